package demo

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The showcase: what `appliance demo` runs so that a newcomer sees every
// part of the appliance at work. The fleet is scraped every 5 s, the
// sidecar gives it a GPU, an llm probe runs against each instance, the
// rule packs vllm, targets, gpu and probes are on, with one faster demo
// rule, and alerts go to the sidecar's receiver, which logs them.
//
// Stream delays are fixed (ShowcaseFirstToken, ShowcasePerToken) so the
// probes measure steady values well under their thresholds; slowing an
// instance by 3 (POST /demo/control {"slow": 3}) triples them, which puts
// the probe's time to first token above ShowcaseTTFTThreshold at its next
// run (the overview turns amber), DemoProbeSlow fires 30 s later (red, P1)
// and the probes pack's ProbeTTFTHigh some minutes after.
const (
	ShowcaseFirstToken    = 150 * time.Millisecond
	ShowcasePerToken      = 20 * time.Millisecond
	ShowcaseTTFTThreshold = 300 * time.Millisecond
	// ShowcaseDurationThreshold: 16 tokens take 150 ms + 15 x 20 ms = 0.45 s.
	ShowcaseDurationThreshold = time.Second
	ShowcaseProbeInterval     = 5 * time.Second
	// ShowcaseLatencyThreshold is the latency SLO's threshold: a bucket
	// bound of vllm:e2e_request_latency_seconds (requestTimeBuckets), as
	// a latency SLO's threshold must be. At normal load about 99% of the
	// fleet's requests finish within it (66% within 5 s), so the SLO's 95%
	// keeps most of its budget until an instance is slowed.
	ShowcaseLatencyThreshold = 20 * time.Second
)

// The showcase's SLOs, so the /slo and /reports pages have data: one
// latency SLO on the fleet's e2e request latency and one availability
// SLO on the first instance's probe.
const (
	ShowcaseLatencySLO      = "demo-e2e-latency"
	ShowcaseAvailabilitySLO = "demo-probe-availability"
)

// ShowcaseRulePacks are the rule packs the showcase turns on.
var ShowcaseRulePacks = []string{"vllm", "targets", "gpu", "probes"}

// ShowcaseRules is the demo's own rule file: DemoProbeSlow is the probes
// pack's ProbeTTFTHigh on a 30-second window with a 30-second for, so a
// slowed instance alerts within a minute instead of the pack's 5-plus.
const ShowcaseRules = `# Written by appliance demo: a fast alert for the showcase.
groups:
  - name: demo
    interval: 5s
    rules:
      - alert: DemoProbeSlow
        expr: |
          max by (probe) (max_over_time(probe_ttft_seconds[30s]))
            > on (probe)
          max by (probe) (probe_ttft_threshold_seconds)
        for: 30s
        labels:
          severity: P1
        annotations:
          summary: 'Demo: probe {{ $labels.probe }} waits {{ $value | humanizeDuration }} for the first token, above its threshold'
`

// ShowcaseOptions are what the showcase config is built from.
type ShowcaseOptions struct {
	// Listen is the appliance's listen address, with a port.
	Listen string
	// Fleet is the simulated fleet, Sidecar its GPU and receiver.
	Fleet   *Fleet
	Sidecar *Sidecar
	// RulesFile is where ShowcaseRules was written ("" leaves it out).
	RulesFile string
}

// WriteShowcaseRules writes ShowcaseRules into dir and returns its path.
func WriteShowcaseRules(dir string) (string, error) {
	path := filepath.Join(dir, "demo-rules.yml")
	if err := os.WriteFile(path, []byte(ShowcaseRules), 0o644); err != nil {
		return "", fmt.Errorf("write demo rules: %w", err)
	}
	return path, nil
}

// SetShowcaseDelays fixes every instance's stream delays to the
// showcase's (the slow factor still scales them).
func SetShowcaseDelays(f *Fleet) {
	for i := range f.Len() {
		f.Instance(i).SetStreamDelays(ShowcaseFirstToken, ShowcasePerToken)
	}
}

// ShowcaseConfig is the appliance config of the showcase.
func ShowcaseConfig(o ShowcaseOptions) string {
	var b strings.Builder
	dur := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }
	fmt.Fprintf(&b, "global:\n  scrape_interval: 5s\n  scrape_timeout: 5s\n  evaluation_interval: 5s\n")
	fmt.Fprintf(&b, "scrape_configs:\n")
	fmt.Fprintf(&b, "  - job_name: appliance\n    static_configs:\n      - targets: [%q]\n", LocalURLHost(o.Listen))
	fmt.Fprintf(&b, "  - job_name: vllm\n    static_configs:\n      - targets:\n")
	for _, t := range o.Fleet.Targets() {
		fmt.Fprintf(&b, "          - %q\n", t)
	}
	if o.Sidecar != nil {
		fmt.Fprintf(&b, "  - job_name: dcgm\n    static_configs:\n      - targets: [%q]\n", o.Sidecar.Addr())
	}
	fmt.Fprintf(&b, "rule_packs: [%s]\n", strings.Join(ShowcaseRulePacks, ", "))
	if o.RulesFile != "" {
		fmt.Fprintf(&b, "rule_files: [%q]\n", o.RulesFile)
	}
	fmt.Fprintf(&b, "probes:\n")
	for i, t := range o.Fleet.Targets() {
		model := o.Fleet.Instance(i).Models()[0]
		fmt.Fprintf(&b, "  - name: %q\n    kind: llm\n    url: %q\n    model: %q\n    max_tokens: 16\n    interval: %s\n    timeout: %s\n    ttft_threshold: %s\n    duration_threshold: %s\n",
			"vllm-"+strconv.Itoa(i), "http://"+t+"/v1/chat/completions", model,
			dur(ShowcaseProbeInterval), dur(ShowcaseProbeInterval), dur(ShowcaseTTFTThreshold), dur(ShowcaseDurationThreshold))
	}
	fmt.Fprintf(&b, "slos:\n")
	fmt.Fprintf(&b, "  - name: %s\n    kind: latency\n    service: vllm\n    histogram: vllm:e2e_request_latency_seconds\n    selector: '{job=\"vllm\"}'\n    threshold: %s\n    objective: 95%%\n    window: 7d\n",
		ShowcaseLatencySLO, dur(ShowcaseLatencyThreshold))
	fmt.Fprintf(&b, "  - name: %s\n    kind: availability\n    probe: %q\n    objective: 99.5%%\n    window: 7d\n", ShowcaseAvailabilitySLO, "vllm-0")
	// The sidecar is the GPU; the appliance's own host readings stay on.
	fmt.Fprintf(&b, "collectors:\n  gpu: false\n")
	// The fleet is scraped and probed by the config: nothing to detect.
	fmt.Fprintf(&b, "autodetect:\n  enabled: false\n")
	if o.Sidecar != nil {
		fmt.Fprintf(&b, "alerting:\n  route:\n    receiver: demo-log\n    group_by: [alertname]\n    group_wait: 5s\n    group_interval: 30s\n    repeat_interval: 1h\n")
		// P2 alerts wait for the daily digest (to the same log), as in the
		// default routes, so /alerts has a digest to preview.
		fmt.Fprintf(&b, "    routes:\n      - matchers: ['severity=\"P2\"']\n        digest: true\n  digest:\n    receivers: [demo-log]\n")
		fmt.Fprintf(&b, "  receivers:\n    - name: demo-log\n      webhook_configs:\n        - url: %q\n", o.Sidecar.ReceiverURL())
		// The weekly SLO report goes to the same log (the /reports page's
		// "send now" has somewhere to send).
		fmt.Fprintf(&b, "reports:\n  weekly:\n    receivers: [demo-log]\n")
	}
	return b.String()
}

// LocalURLHost turns a listen address such as ":9090" into
// "localhost:9090".
func LocalURLHost(listen string) string {
	if strings.HasPrefix(listen, ":") {
		return "localhost" + listen
	}
	return listen
}

// FreeListen returns listen with port 0 replaced by a free port, so that
// the demo can scrape itself and print its URL. The port is free when it
// returns; another program could take it before the appliance binds it.
func FreeListen(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("listen address %q: %w", listen, err)
	}
	if port != "0" {
		return listen, nil
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return "", fmt.Errorf("find a free port on %q: %w", listen, err)
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}
