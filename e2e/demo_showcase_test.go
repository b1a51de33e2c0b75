package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDemoShowcaseSlowAlerts runs `appliance demo` on free ports as a
// newcomer (or a browser test) would: each instance has a passing llm
// probe and the dashboard API knows the services and their probes; after
// POST /demo/control {"slow": 3} on one instance its probe's TTFT crosses
// the threshold (the overview's amber), DemoProbeSlow fires as P1 for that
// probe (red, on /api/v1/alerts), the logging receiver logs it, and
// the annotations carry the alert. Every wait is on the condition itself.
func TestDemoShowcaseSlowAlerts(t *testing.T) {
	p := startDemo(t, 2)
	m := regexp.MustCompile(`demo: 2 simulated vLLM instances at (\S+), (\S+)\n`).FindStringSubmatch(p.Output())
	require.NotNil(t, m, p.Output())
	slowInstance := m[1]

	eventually(t, 60*time.Second, "both probes succeed", func() bool {
		return len(p.instant(`probe_success == 1`, time.Time{})) == 2
	})
	eventually(t, 60*time.Second, "the GPU is scraped", func() bool {
		return len(p.instant(`DCGM_FI_DEV_GPU_UTIL`, time.Time{})) == 1
	})
	// Both instances scraped: a service's probes are matched through its
	// instances, so the probes list is whole once both have been scraped.
	eventually(t, 60*time.Second, "both vLLM instances scraped", func() bool {
		return len(p.instant(`up{job="vllm"} == 1`, time.Time{})) == 2
	})
	var services []struct {
		Job, Model string
		Probes     []string
	}
	code, r := p.get("/api/v1/appliance/services", nil)
	require.Equal(t, http.StatusOK, code, r.Error)
	require.NoError(t, json.Unmarshal(r.Data, &services))
	require.Len(t, services, 2)
	require.Equal(t, "llama-3.1-8b-instruct", services[0].Model)
	require.Equal(t, []string{"vllm-0", "vllm-1"}, services[0].Probes)
	require.Empty(t, p.alerts("DemoProbeSlow"))

	resp, err := http.Post("http://"+slowInstance+"/demo/control", "application/json", strings.NewReader(`{"slow": 3}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	eventually(t, 60*time.Second, "amber: vllm-0's TTFT above its threshold", func() bool {
		return len(p.instant(`probe_ttft_seconds{probe="vllm-0"} > on (probe) probe_ttft_threshold_seconds`, time.Time{})) == 1
	})
	// The slowed probe's alert fires as P1. The other probe is not
	// slowed, but on a starved machine its real TTFT can pass 300 ms too
	// (seen at load 38 on 2 cores: 402 ms, pending), so only the slowed
	// probe's alert is asserted; its state and severity must be exact.
	eventually(t, 3*time.Minute, "red: DemoProbeSlow firing (P1) for vllm-0", func() bool {
		for _, a := range p.alerts("DemoProbeSlow") {
			if a.Labels["probe"] == "vllm-0" && a.State == "firing" {
				return true
			}
		}
		return false
	})
	for _, a := range p.alerts("DemoProbeSlow") {
		if a.Labels["probe"] == "vllm-0" {
			require.Equal(t, "P1", a.Labels["severity"], "%+v", a)
		}
	}
	eventually(t, 60*time.Second, "the receiver logs the alert", func() bool {
		return strings.Contains(p.Output(), `msg="demo receiver: would send"`) && strings.Contains(p.Output(), "alertname=DemoProbeSlow")
	})

	now := time.Now()
	q := url.Values{"from": {strconv.FormatInt(now.Add(-10*time.Minute).Unix(), 10)}, "to": {strconv.FormatInt(now.Unix(), 10)}}
	code, r = p.get("/api/v1/appliance/annotations", q)
	require.Equal(t, http.StatusOK, code, r.Error)
	var anns []struct {
		Kind, Severity string
		Labels         map[string]string
	}
	require.NoError(t, json.Unmarshal(r.Data, &anns))
	found := false
	for _, a := range anns {
		if a.Kind == "alert" && a.Labels["alertname"] == "DemoProbeSlow" && a.Severity == "P1" {
			found = true
		}
	}
	require.True(t, found, "%+v", anns)

	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}
