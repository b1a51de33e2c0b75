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
// If the default ports are taken on this machine, the fleet takes free
// ports and a config file limits auto-detection to them.
func TestAutodetectScrapesAndProbesDemoFleet(t *testing.T) {
	opts := demo.DefaultFleetOptions()
	opts.RequestRate = 0.2
	fleet, err := demo.NewFleet(opts)
	cfgPath := ""
	dir := t.TempDir()
	if errors.Is(err, demo.ErrPortInUse) {
		opts.BasePort = 0
		fleet, err = demo.NewFleet(opts)
		require.NoError(t, err)
		var ports []string
		for _, a := range fleet.Targets() {
			_, p, err := net.SplitHostPort(a)
			require.NoError(t, err)
			ports = append(ports, p)
		}
		t.Logf("vLLM's default ports are taken; the fleet is on %v and a config limits autodetect to them", ports)
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
	// the 300 ms first-token delay set on it.
	probeName := "vllm-" + port0
	var ttft float64
	eventually(t, 60*time.Second, "probe "+probeName+" succeeded", func() bool {
		ok := p.instant(fmt.Sprintf(`probe_success{probe=%q}`, probeName), time.Time{})
		tt := p.instant(fmt.Sprintf(`probe_ttft_seconds{probe=%q}`, probeName), time.Time{})
		if len(ok) != 1 || value(t, ok[0]) != 1 || len(tt) != 1 {
			return false
		}
		ttft = value(t, tt[0])
		return true
	})
	require.GreaterOrEqual(t, ttft, 0.3)
	require.Less(t, ttft, 1.5)
	tpot := p.instant(fmt.Sprintf(`probe_tpot_seconds{probe=%q}`, probeName), time.Time{})
	require.Len(t, tpot, 1)
	require.InDelta(t, 0.020, value(t, tpot[0]), 0.010)
	tokens := p.instant(fmt.Sprintf(`probe_output_tokens{probe=%q}`, probeName), time.Time{})
	require.Len(t, tokens, 1)
	require.Equal(t, 16.0, value(t, tokens[0]))

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
	tt := p.instant(`probe_ttft_seconds{probe="chat"}`, time.Time{})
	require.Len(t, tt, 1)
	require.GreaterOrEqual(t, value(t, tt[0]), 0.3)
	require.Less(t, value(t, tt[0]), 1.0)
	tokens := p.instant(`probe_output_tokens{probe="chat"}`, time.Time{})
	require.Len(t, tokens, 1)
	require.Equal(t, 4.0, value(t, tokens[0]))
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

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
