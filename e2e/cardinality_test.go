package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// cardinalityReport is what the test reads of GET /api/v1/appliance/cardinality.
type cardinalityReport struct {
	TotalSeries  uint64 `json:"totalSeries"`
	MaxSeries    int    `json:"maxSeries"`
	ActiveSeries int    `json:"activeSeries"`
	Flagged      []struct {
		Metric, Label, Job, Instance, Reason string
		Values                               int
	} `json:"flagged"`
	Targets []struct {
		Job, Instance string
		Series        int
		SampleLimit   int `json:"sampleLimit"`
		Refused       int64
	} `json:"targets"`
	TopMetrics []struct {
		Name   string
		Series uint64
	} `json:"topMetrics"`
}

// vmHWM is the peak resident set of a process (VmHWM in /proc), in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// TestCardinality pushes a metric with a request_id label of thousands of
// values to an appliance with storage.max_series: the label is flagged
// (API), appliance_cardinality_warning exists and HighCardinalityLabel
// fires; the series past the limit are refused (400, counted, shown on the
// scraped target that makes new series) while the series already stored,
// a scraped target's among them, keep arriving; the process stays up and
// its peak memory bounded. Then /cardinality in Chromium: every panel
// ready, the flagged label on the page, no console error, no request
// outside the appliance, a screenshot.
func TestCardinality(t *testing.T) {
	// A scraped target: steady_ok_total every scrape, and one new
	// series per scrape (steady_burst{n}), which the limit refuses.
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := scrapes.Add(1)
		fmt.Fprintf(w, "# TYPE steady_ok_total counter\nsteady_ok_total %d\n# TYPE steady_burst gauge\nsteady_burst{n=\"%d\"} 1\n", n, n)
	}))
	defer srv.Close()

	const maxSeries, pushed = 4000, 6000
	addr := freeAddr(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
storage:
  max_series: %d
  cardinality:
    max_label_values: 500
    interval: 2s
rule_packs: [targets]
scrape_configs:
  - job_name: appliance
    static_configs: [{targets: [%q]}]
  - job_name: steady
    sample_limit: 100
    static_configs: [{targets: [%q]}]
`, maxSeries, addr, strings.TrimPrefix(srv.URL, "http://")))
	p := launch(t, addr, "run", "--config", cfg, "--data", filepath.Join(dir, "data"), "--listen", addr)
	waitReady(t, p, "appliance", "/-/ready")
	eventually(t, 30*time.Second, "the steady target scraped", func() bool {
		return len(p.instant(`steady_ok_total`, time.Time{})) == 1
	})

	// Thousands of request ids in one import, more than the limit leaves.
	var b strings.Builder
	for i := range pushed {
		fmt.Fprintf(&b, "api_requests_total{job=\"edge\",instance=\"dev-7\",request_id=\"%08x-9c1d-4e2f-8a3b-%012x\"} 1\n", i, i*2654435761)
	}
	code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()), nil)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "storage.max_series")
	require.Contains(t, body, "samples were stored")
	stored := value(t, p.instant(`count(api_requests_total)`, time.Time{})[0])
	require.Greater(t, stored, 500.0, "the series within the limit are stored")
	require.Less(t, stored, float64(pushed), "the excess is refused")
	t.Logf("pushed %d request_id series at storage.max_series %d: %.0f stored, the rest refused", pushed, maxSeries, stored)

	// Flagged in the API: id-like, with the metric and the target.
	var rep cardinalityReport
	eventually(t, 60*time.Second, "request_id flagged", func() bool {
		code, r := p.get("/api/v1/appliance/cardinality", nil)
		require.Equal(t, http.StatusOK, code, r.Error)
		require.NoError(t, json.Unmarshal(r.Data, &rep))
		for _, f := range rep.Flagged {
			if f.Label == "request_id" {
				return true
			}
		}
		return false
	})
	var flag = rep.Flagged[0]
	for _, f := range rep.Flagged {
		if f.Label == "request_id" {
			flag = f
		}
	}
	require.Equal(t, "api_requests_total", flag.Metric)
	require.Equal(t, "edge", flag.Job)
	require.Equal(t, "dev-7", flag.Instance)
	require.Equal(t, "id_like", flag.Reason)
	require.EqualValues(t, stored, flag.Values)
	require.Equal(t, maxSeries, rep.MaxSeries)
	require.GreaterOrEqual(t, rep.ActiveSeries, maxSeries)

	// The warning series and the P2 rule on it.
	eventually(t, 60*time.Second, "appliance_cardinality_warning written", func() bool {
		v := p.instant(`appliance_cardinality_warning{metric="api_requests_total",label="request_id",job="edge",instance="dev-7"}`, time.Time{})
		return len(v) == 1 && value(t, v[0]) == stored
	})
	eventually(t, 60*time.Second, "HighCardinalityLabel firing", func() bool {
		_, r := p.get("/api/v1/alerts", nil)
		var data struct {
			Alerts []struct {
				Labels map[string]string
				State  string
			}
		}
		require.NoError(t, json.Unmarshal(r.Data, &data))
		for _, a := range data.Alerts {
			if a.Labels["alertname"] == "HighCardinalityLabel" && a.Labels["label"] == "request_id" && a.State == "firing" {
				require.Equal(t, "P2", a.Labels["severity"])
				return true
			}
		}
		return false
	})

	// Past the limit the steady target's new series are refused and its
	// page says why, while its existing series keep arriving.
	before := value(t, p.instant(`timestamp(steady_ok_total)`, time.Time{})[0])
	var lastError string
	eventually(t, 30*time.Second, "the steady target's lastError names storage.max_series", func() bool {
		_, r := p.get("/api/v1/targets", nil)
		var data struct {
			ActiveTargets []struct {
				Labels    map[string]string
				LastError string
				Health    string
			}
		}
		require.NoError(t, json.Unmarshal(r.Data, &data))
		for _, tg := range data.ActiveTargets {
			if tg.Labels["job"] == "steady" && strings.Contains(tg.LastError, "storage.max_series") {
				lastError = tg.LastError
				require.Equal(t, "up", tg.Health, "the scrape itself succeeds")
				return true
			}
		}
		return false
	})
	t.Logf("steady target's lastError: %s", lastError)
	eventually(t, 30*time.Second, "steady_ok_total still arriving", func() bool {
		return value(t, p.instant(`timestamp(steady_ok_total)`, time.Time{})[0]) > before+1
	})
	require.Equal(t, 1.0, value(t, p.instant(`up{job="steady"}`, time.Time{})[0]))
	bursts := value(t, p.instant(`count(count_over_time(steady_burst[10m]))`, time.Time{})[0])
	n0 := scrapes.Load()
	eventually(t, 30*time.Second, "three more scrapes, each with a new series", func() bool { return scrapes.Load() >= n0+3 })
	require.Equal(t, bursts, value(t, p.instant(`count(count_over_time(steady_burst[10m]))`, time.Time{})[0]), "no new series past the limit")

	// Counted per target on /metrics.
	metrics := httpBody(t, p.url("/metrics"))
	require.Regexp(t, `(?m)^appliance_storage_series_refused_total\{instance="dev-7",job="edge"\} [1-9]`, metrics)
	require.Regexp(t, `(?m)^appliance_storage_series_refused_total\{instance="[^"]+",job="steady"\} [1-9]`, metrics)
	require.Regexp(t, `(?m)^appliance_ingest_rejected_samples_total\{reason="max_series"\} [1-9]`, metrics)

	// The steady target against its sample_limit.
	code, r := p.get("/api/v1/appliance/cardinality", nil)
	require.Equal(t, http.StatusOK, code, r.Error)
	require.NoError(t, json.Unmarshal(r.Data, &rep))
	var steady, edge bool
	for _, tg := range rep.Targets {
		switch tg.Job {
		case "steady":
			steady = true
			require.Equal(t, 100, tg.SampleLimit)
			require.Positive(t, tg.Series)
			require.Positive(t, tg.Refused)
		case "edge":
			edge = true
			require.Equal(t, -1, tg.Series, "a push has no scrape")
			require.EqualValues(t, pushed-int(stored), tg.Refused)
		}
	}
	require.True(t, steady && edge, "%+v", rep.Targets)

	// Prometheus' own cardinality endpoint sees the label too.
	code, r = p.get("/api/v1/status/tsdb", nil)
	require.Equal(t, http.StatusOK, code, r.Error)
	require.Contains(t, string(r.Data), `"name":"request_id"`)

	// A flood of new ids past the limit: refused, nothing more stored,
	// memory bounded.
	hwm := vmHWM(t, p.cmd.Process.Pid)
	const flood = 3 * 20_000
	for k := range 3 {
		b.Reset()
		for i := range 20_000 {
			fmt.Fprintf(&b, "api_requests_total{job=\"edge\",instance=\"dev-7\",request_id=\"%08x-0000-4e2f-8a3b-%012x\"} 1\n", k, i)
		}
		code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()), nil)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, body, "20000 sample(s) of new series refused")
	}
	require.Equal(t, stored, value(t, p.instant(`count(api_requests_total)`, time.Time{})[0]), "the flood stored nothing")
	hwm2 := vmHWM(t, p.cmd.Process.Pid)
	t.Logf("peak RSS (VmHWM) of the appliance: %.1f MiB after %d pushed series, %.1f MiB after %d more refused", float64(hwm)/(1<<20), pushed, float64(hwm2)/(1<<20), flood)
	require.Less(t, hwm2, int64(1<<30), "memory stays bounded")

	cardinalityPage(t, p)

	exit, _ := p.stop()
	require.Equal(t, 0, exit, "nothing crashed")
}

// cardinalityPage opens /cardinality in Chromium.
func cardinalityPage(t *testing.T, p *proc) {
	t.Helper()
	chrome := chromiumPath(t)
	base := "http://" + p.addr
	requireBundle(t, base)
	// The growth chart reads the self-scrape's active series.
	eventually(t, 30*time.Second, "appliance_storage_active_series scraped", func() bool {
		return len(p.instant(`appliance_storage_active_series`, time.Time{})) == 1
	})
	ctx, b := openBrowserFor(t, chrome, 90*time.Second)
	openPage(t, ctx, base+"/cardinality", "open /cardinality")
	byID := pagePanels(t, ctx)
	for _, id := range []string{"summary", "flagged", "top-metrics", "top-labels", "top-pairs", "targets", "growth"} {
		require.Equal(t, "ready", byID[id].State, "panel %s: %+v", id, byID)
		n, err := strconv.Atoi(byID[id].Series)
		require.NoError(t, err, "panel %s data-series", id)
		require.Positive(t, n, "panel %s has data", id)
	}
	var flagged []string
	evalJSON(t, ctx, `[...document.querySelectorAll('[data-panel="flagged"] tr[data-flag]')].map(e => e.dataset.flag)`, &flagged)
	require.Contains(t, flagged, "api_requests_total/request_id")
	var text string
	evalJSON(t, ctx, `document.querySelector('[data-panel="flagged"]').innerText`, &text)
	require.Contains(t, text, "request_id")
	require.Contains(t, text, "dev-7")
	evalJSON(t, ctx, `document.querySelector('[data-panel="targets"]').innerText`, &text)
	require.Contains(t, text, "steady")
	// The targets page shows why the steady target's new series are refused.
	openPage(t, ctx, base+"/targets", "open /targets")
	evalJSON(t, ctx, `document.querySelector('[data-panel="targets"]').innerText`, &text)
	require.Contains(t, text, "storage.max_series")
	checkBrowserClean(t, b, base)
	openPage(t, ctx, base+"/cardinality", "open /cardinality again")
	screenshot(t, ctx, "cardinality.png")
}
