package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const sloConfig = `scrape_configs: []
slos:
  - name: chat-latency
    kind: latency
    histogram: vllm:e2e_request_latency_seconds
    selector: '{job="vllm"}'
    by: [model_name]
    threshold: 1.5s
    objective: 99%
    window: 28d
`

// TestSLOEndToEnd: the SLOs' rule groups run (slo:<name> in
// /api/v1/rules, the recording rules write), the report API answers, and
// `appliance report` gives the same bytes twice, through --url and from
// the data directory once the appliance is stopped.
func TestSLOEndToEnd(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, sloConfig+"global: {evaluation_interval: 1s}\n")
	p := start(t, cfg, data)

	// Two hours of requests, pushed: 1% slower than 1.5 s.
	now := time.Now().Truncate(time.Minute)
	var b strings.Builder
	b.WriteString("# TYPE vllm:e2e_request_latency_seconds histogram\n")
	for i := 120; i >= 0; i-- {
		ts := now.Add(-time.Duration(i) * time.Minute).UnixMilli()
		n := float64(120-i) * 100
		for _, le := range []string{"1.0", "1.5", "+Inf"} {
			v := n
			switch le {
			case "1.0":
				v = n * 0.9
			case "1.5":
				v = n * 0.99
			}
			fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{job=\"vllm\",instance=\"a\",model_name=\"m\",le=%q} %g %d\n", le, v, ts)
		}
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_count{job=\"vllm\",instance=\"a\",model_name=\"m\"} %g %d\n", n, ts)
	}
	code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()), nil)
	require.Equal(t, http.StatusNoContent, code, body)

	code, r := p.get("/api/v1/rules", nil)
	require.Equal(t, http.StatusOK, code)
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			File  string `json:"file"`
			Rules []struct {
				Name string `json:"name"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &rules))
	found := false
	for _, g := range rules.Groups {
		if g.Name == "slo:chat-latency" {
			found = true
			require.Equal(t, "generated:slo", g.File)
			require.Len(t, g.Rules, 10)
		}
	}
	require.True(t, found, "group slo:chat-latency in /api/v1/rules: %s", r.Data)
	eventually(t, 90*time.Second, "the SLI recording rule writes (the SLO groups run every minute)", func() bool {
		return len(p.instant(`slo:sli_error:ratio_rate1h{slo="chat-latency", model_name="m"}`, time.Time{})) == 1
	})
	v := value(t, p.instant(`slo:sli_error:ratio_rate1h{slo="chat-latency"}`, time.Time{})[0])
	require.InDelta(t, 0.01, v, 0.001)

	code, r = p.get("/api/v1/appliance/reports", nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "success", r.Status)

	report := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(binary, append([]string{"report", "--config", cfg, "--week", "2026-W48", "--timezone", "Asia/Shanghai"}, args...)...).CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	viaURL := report("--url", "http://"+p.addr, "--format", "md")
	require.Contains(t, viaURL, "# SLO report 2026-W48")
	require.Equal(t, viaURL, report("--url", "http://"+p.addr, "--format", "md"), "same command, same bytes")

	code, _ = p.stop()
	require.Equal(t, 0, code)
	html := report("--data", data)
	require.Contains(t, html, "<h1>SLO report 2026-W48</h1>")
	require.Equal(t, html, report("--data", data), "same command, same bytes")
}

// TestCheckRefusesThresholdThatIsNoBound: appliance check names the
// nearest bucket bounds of a threshold the histogram does not have, and
// accepts TGI's bound written as a person would.
func TestCheckRefusesThresholdThatIsNoBound(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `slos:
  - name: chat-latency
    kind: latency
    histogram: vllm:e2e_request_latency_seconds
    threshold: 1.2s
    objective: 99%
  - name: tgi
    kind: latency
    histogram: tgi_request_duration
    threshold: 150us
    objective: 90%
`)
	out, err := exec.Command(binary, "check", "--config", cfg).CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, string(out))
	require.Equal(t, 1, ee.ExitCode())
	require.Contains(t, string(out), "slo chat-latency: threshold 1.2s: threshold is not a bucket bound of the histogram; the nearest bounds are 1.0 and 1.5 of vllm:e2e_request_latency_seconds")
	require.NotContains(t, string(out), "slo tgi")
}
