package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/demo"
)

// TestAutodetectScrapesAndProbesDemoFleet: `appliance run` with no config,
// next to the demo fleet on vLLM's default ports, finds the instances,
// scrapes them as job vllm, probes them with an llm probe that measures
// the fleet's configured first-token delay, and writes the local readings.
// The zero-config case is what this test is for: under CI=true it fails
// when vLLM's default ports are taken. Elsewhere (a developer's machine
// that runs a model server) the fleet takes free ports, a config file
// limits auto-detection to them, and the log says the zero-config case
// went untested.
func TestAutodetectScrapesAndProbesDemoFleet(t *testing.T) {
	opts := demo.DefaultFleetOptions()
	opts.RequestRate = 0.2
	fleet, err := demo.NewFleet(opts)
	cfgPath := ""
	dir := t.TempDir()
	if errors.Is(err, demo.ErrPortInUse) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("vLLM's default ports %d-%d are taken, so `appliance run` with no config cannot be tested: "+
				"stop what listens there (another e2e run, a model server): %v", opts.BasePort, opts.BasePort+opts.Instances-1, err)
		}
		opts.BasePort = 0
		fleet, err = demo.NewFleet(opts)
		require.NoError(t, err)
		var ports []string
		for _, a := range fleet.Targets() {
			_, p, err := net.SplitHostPort(a)
			require.NoError(t, err)
			ports = append(ports, p)
		}
		t.Logf("vLLM's default ports are taken and CI is not set: the fleet is on %v and a config limits autodetect to them; "+
			"the zero-config case is NOT tested in this run", ports)
		cfgPath = writeConfig(t, dir, fmt.Sprintf("autodetect:\n  host: 127.0.0.1\n  ports: [%s]\n", strings.Join(ports, ", ")))
	}
	require.NoError(t, err)
	first := fleet.Instance(0)
	first.SetStreamDelays(300*time.Millisecond, 20*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fleet.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	_, port0, err := net.SplitHostPort(fleet.Targets()[0])
	require.NoError(t, err)

	p := start(t, cfgPath, filepath.Join(dir, "data"))

	// Found and scraped within a minute of start, as job vllm.
	eventually(t, 60*time.Second, "every fleet instance up in job vllm", func() bool {
		n := 0
		for _, s := range p.instant(`up{job="vllm"}`, time.Time{}) {
			if value(t, s) == 1 {
				n++
			}
		}
		return n == len(fleet.Targets())
	})
	require.NotEmpty(t, p.instant(`vllm:num_requests_running{job="vllm"}`, time.Time{}))

	// /api/v1/targets says the targets were auto-detected.
	code, r := p.get("/api/v1/targets", nil)
	require.Equal(t, http.StatusOK, code)
	var data struct {
		ActiveTargets []struct {
			DiscoveredLabels map[string]string `json:"discoveredLabels"`
			Labels           map[string]string `json:"labels"`
		} `json:"activeTargets"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &data))
	detected := 0
	for _, tg := range data.ActiveTargets {
		if tg.Labels["job"] == "vllm" {
			require.Equal(t, "true", tg.DiscoveredLabels["__meta_autodetect_detected"], "%v", tg.DiscoveredLabels)
			require.Equal(t, "vllm", tg.DiscoveredLabels["__meta_autodetect_kind"])
			detected++
		}
	}
	require.Equal(t, len(fleet.Targets()), detected)

	// Probed: the llm probe of the first instance succeeds and measures
	// the 300 ms first-token delay and the 20 ms pace set on it. The
	// bounds are the ones the server guarantees whatever the load on this
	// machine (it never sends a token early); the probe's own timing is
	// tested exactly in package probe.
	probeName := "vllm-" + port0
	run := p.probeRun(probeName, "probe_ttft_seconds", "probe_tpot_seconds", "probe_duration_seconds", "probe_output_tokens")
	ttft, tpot := run["probe_ttft_seconds"], run["probe_tpot_seconds"]
	require.Equal(t, 16.0, run["probe_output_tokens"])
	require.GreaterOrEqual(t, ttft, 0.3, "the first token comes 300 ms after the request")
	// The 16th token is sent 300+15*20 ms after the request at the earliest.
	require.GreaterOrEqual(t, ttft+15*tpot, 0.6, "TTFT %g, TPOT %g", ttft, tpot)
	require.LessOrEqual(t, ttft+15*tpot, run["probe_duration_seconds"], "TTFT %g, TPOT %g", ttft, tpot)

	// Local readings are on by default too.
	eventually(t, 30*time.Second, "local host readings", func() bool {
		return len(p.instant(`node_load1{job="local"}`, time.Time{})) == 1
	})

	// Down: the probe fails with a reason, the target stays with up 0.
	first.SetDown(true)
	eventually(t, 90*time.Second, "probe failing with reason http_status", func() bool {
		v := p.instant(fmt.Sprintf(`probe_success{probe=%q, reason="http_status"}`, probeName), time.Time{})
		return len(v) == 1 && value(t, v[0]) == 0
	})
	eventually(t, 30*time.Second, "up 0 for the down instance", func() bool {
		v := p.instant(fmt.Sprintf(`up{job="vllm", instance=~".*:%s"}`, port0), time.Time{})
		return len(v) == 1 && value(t, v[0]) == 0
	})
}

// TestConfiguredProbesAndReload: probes from the config file write their
// series; a reload that removes one makes its series vanish at once
// (staleness markers); collectors and autodetect switched off add nothing.
func TestConfiguredProbesAndReload(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) })
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		send := func(s string) { _, _ = w.Write([]byte("data: " + s + "\n\n")); _ = rc.Flush() }
		send(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)
		time.Sleep(300 * time.Millisecond)
		for i := range 4 {
			send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":"t%d"}}]}`, i))
			time.Sleep(20 * time.Millisecond)
		}
		send("[DONE]")
	})
	srv := httptestServer(t, mux)

	dir := t.TempDir()
	base := "autodetect: {enabled: false}\ncollectors: {enabled: false}\nscrape_configs: []\nprobes:\n" +
		fmt.Sprintf("  - {name: web, kind: http, url: %q, interval: 1s, expect_body: ok}\n", srv+"/health")
	chat := fmt.Sprintf("  - {name: chat, kind: llm, url: %q, interval: 2s, timeout: 2s, model: m}\n", srv+"/v1/chat/completions")
	cfgPath := writeConfig(t, dir, base+chat)
	p := start(t, cfgPath, filepath.Join(dir, "data"))

	eventually(t, 30*time.Second, "both probes succeed", func() bool {
		v := p.instant(`probe_success == 1`, time.Time{})
		return len(v) == 2
	})
	run := p.probeRun("chat", "probe_ttft_seconds", "probe_duration_seconds", "probe_output_tokens")
	require.GreaterOrEqual(t, run["probe_ttft_seconds"], 0.3, "the server sleeps 300 ms before the first token")
	require.Less(t, run["probe_ttft_seconds"], run["probe_duration_seconds"])
	require.Equal(t, 4.0, run["probe_output_tokens"])
	phases := p.instant(`probe_http_duration_seconds{probe="web"}`, time.Time{})
	require.Len(t, phases, 5)
	require.Empty(t, p.instant(`{job="local"}`, time.Time{}), "collectors are off")

	require.NoError(t, os.WriteFile(cfgPath, []byte(base), 0o644))
	code, body := p.post("/-/reload", "text/plain", nil, nil)
	require.Equal(t, http.StatusOK, code, body)
	eventually(t, 10*time.Second, "the removed probe's series are gone", func() bool {
		return len(p.instant(`{probe="chat"}`, time.Time{})) == 0
	})
	require.Len(t, p.instant(`probe_success{probe="web"}`, time.Time{}), 1)
}

// probeRun returns the value of each named series of probe from one and
// the same successful run: it reads each series' last sample with its timestamp
// until all timestamps agree (a probe's runs have strictly increasing
// timestamps, and all series of a run share one), so that values of two
// runs are never compared.
func (p *proc) probeRun(probe string, names ...string) map[string]float64 {
	p.t.Helper()
	out := map[string]float64{}
	names = append([]string{"probe_success"}, names...)
	eventually(p.t, 60*time.Second, "one successful run of probe "+probe+" with "+strings.Join(names, ", "), func() bool {
		clear(out)
		var at float64
		for i, n := range names {
			sel := fmt.Sprintf(`%s{probe=%q}`, n, probe)
			v := p.instant(sel, time.Time{})
			ts := p.instant("timestamp("+sel+")", time.Time{})
			if len(v) != 1 || len(ts) != 1 || i > 0 && value(p.t, ts[0]) != at {
				return false
			}
			at = value(p.t, ts[0])
			out[n] = value(p.t, v[0])
		}
		// The first series may have moved on while the others were read.
		ts := p.instant(fmt.Sprintf(`timestamp(%s{probe=%q})`, names[0], probe), time.Time{})
		return out["probe_success"] == 1 && len(ts) == 1 && value(p.t, ts[0]) == at
	})
	return out
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
