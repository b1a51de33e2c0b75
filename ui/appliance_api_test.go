package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/ui/dashboard"
)

// importLines posts text-format lines (with millisecond timestamps) and
// flushes them so that queries see them.
func (ts *testServer) importLines(lines []string) {
	ts.t.Helper()
	code, body := ts.post("/api/v1/import/prometheus", "text/plain", []byte(strings.Join(lines, "\n")+"\n"))
	require.Equal(ts.t, http.StatusNoContent, code, body)
	ts.db.Flush()
}

type applianceEnvelope struct {
	Status   string          `json:"status"`
	Data     json.RawMessage `json:"data"`
	Warnings []string        `json:"warnings"`
	Error    string          `json:"error"`
}

func (ts *testServer) getJSON(path string, want int, data any) applianceEnvelope {
	ts.t.Helper()
	code, body := ts.get(path)
	require.Equal(ts.t, want, code, body)
	var env applianceEnvelope
	require.NoError(ts.t, json.Unmarshal([]byte(body), &env), body)
	if data != nil {
		require.NoError(ts.t, json.Unmarshal(env.Data, data), body)
	}
	return env
}

// TestApplianceAPI serves services, dashboards and annotations from series
// imported into the real storage.
func TestApplianceAPI(t *testing.T) {
	userDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(userDir, "mine.yaml"), []byte(`
id: mine
title: Mine
scope: service
rows:
  - id: r
    title: R
    panels:
      - {id: running, title: Running, kind: timeseries, unit: short, queries: [{expr: "sum({{running}}{$sel})", legend: running}]}
`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(userDir, "broken.yaml"), []byte("id: broken\ntitle: [\n"), 0o644))
	ts := newTestServer(t, func(o *Options) {
		o.DashboardsDir = userDir
		o.ProbeTargets = func() []dashboard.ProbeTarget {
			return []dashboard.ProbeTarget{
				{Name: "chat", URL: "http://localhost:8000/v1/chat/completions", Model: "llama"},
				{Name: "other", URL: "http://10.0.0.9:8000/v1/chat/completions"},
			}
		}
	})

	now := time.Now().Truncate(time.Second)
	start := now.Add(-10 * time.Minute)
	var lines []string
	for i := 0; i <= 20; i++ {
		ts := start.Add(time.Duration(i) * 30 * time.Second)
		ms := ts.UnixMilli()
		add := func(series string, v float64) { lines = append(lines, fmt.Sprintf("%s %g %d", series, v, ms)) }
		add(`vllm:num_requests_running{job="vllm",instance="127.0.0.1:8000",model_name="llama"}`, 2)
		add(`vllm:num_requests_waiting{job="vllm",instance="127.0.0.1:8000",model_name="llama"}`, 1)
		add(`up{job="vllm",instance="127.0.0.1:8000"}`, 1)
		add(`up{job="appliance",instance="localhost:9090"}`, 1)
		add(`appliance_build_info{job="appliance",instance="localhost:9090",version="x"}`, 1)
		add(`probe_success{probe="chat"}`, 1)
		// A restart at 5 minutes; warm-up for the minute after it.
		startTime := float64(start.Add(-time.Hour).Unix())
		if i >= 10 {
			startTime = float64(start.Add(5 * time.Minute).Unix())
		}
		add(`process_start_time_seconds{job="vllm",instance="127.0.0.1:8000"}`, startTime)
		if i >= 10 && i <= 12 {
			add(`appliance_instance_warming{job="vllm",instance="127.0.0.1:8000"}`, 1)
		} else {
			add(`appliance_instance_warming{job="vllm",instance="127.0.0.1:8000"}`, 0)
		}
		if i >= 14 {
			add(`ALERTS{alertname="VLLMSlowEndToEnd",alertstate="firing",severity="P1",job="vllm",instance="127.0.0.1:8000"}`, 1)
		}
	}
	ts.importLines(lines)

	var services []dashboard.Service
	ts.getJSON("/api/v1/appliance/services", http.StatusOK, &services)
	require.Equal(t, []dashboard.Service{{
		Job: "vllm", Model: "llama", Engine: "vllm", ModelLabel: "model_name",
		Instances: []string{"127.0.0.1:8000"}, Probes: []string{"chat"},
		Selector: `job="vllm",model_name="llama"`,
	}}, services)

	var list []map[string]string
	env := ts.getJSON("/api/v1/appliance/dashboards", http.StatusOK, &list)
	require.Equal(t, []map[string]string{
		{"id": "overview", "title": "Overview", "source": "embedded"},
		{"id": "model", "title": "Model", "source": "embedded"},
		{"id": "probes", "title": "Probes", "source": "embedded"},
		{"id": "hardware", "title": "Hardware", "source": "embedded"},
		{"id": "mine", "title": "Mine", "source": filepath.Join(userDir, "mine.yaml")},
	}, list)
	require.Len(t, env.Warnings, 1)
	require.Contains(t, env.Warnings[0], filepath.Join(userDir, "broken.yaml"))

	var ov dashboard.Dashboard
	ts.getJSON("/api/v1/appliance/dashboards/overview", http.StatusOK, &ov)
	require.Len(t, ov.Rows, 1)
	require.Equal(t, "vllm:llama", ov.Rows[0].ID)
	require.Equal(t, "vllm", ov.Rows[0].Service.Job)
	var ids []string
	for _, p := range ov.Rows[0].Panels {
		ids = append(ids, p.ID)
	}
	// Only what the imported series fill.
	require.Equal(t, []string{"probe_availability", "queue_length", "alerts_firing", "targets_down"}, ids)
	require.Equal(t, `sum by (probe) (sum_over_time(probe_success{probe=~"chat"}[$__rate_interval])) / sum by (probe) (count_over_time(probe_success{probe=~"chat"}[$__rate_interval]))`,
		ov.Rows[0].Panels[0].Queries[0].Expr)
	require.Equal(t, `sum(vllm:num_requests_waiting{$sel})`, ov.Rows[0].Panels[1].Queries[0].Expr)
	require.Equal(t, `count(up{job="vllm"} == 0) or vector(0)`, ov.Rows[0].Panels[3].Queries[0].Expr)

	var mine dashboard.Dashboard
	ts.getJSON("/api/v1/appliance/dashboards/mine?job=vllm&model=llama", http.StatusOK, &mine)
	require.Equal(t, "vllm", mine.Service.Job)
	require.Equal(t, "sum(vllm:num_requests_running{$sel})", mine.Rows[0].Panels[0].Queries[0].Expr)

	env = ts.getJSON("/api/v1/appliance/dashboards/broken", http.StatusNotFound, nil)
	require.Contains(t, env.Error, "did not load")

	var anns []dashboard.Annotation
	ts.getJSON(fmt.Sprintf("/api/v1/appliance/annotations?from=%d&to=%d", start.Unix(), now.Unix()), http.StatusOK, &anns)
	var kinds []string
	for _, a := range anns {
		kinds = append(kinds, a.Kind)
	}
	require.Equal(t, []string{"restart", "warmup", "alert"}, kinds, "%+v", anns)
	restart, warm, alert := anns[0], anns[1], anns[2]
	require.Equal(t, float64(start.Add(5*time.Minute).Unix()), restart.Time)
	require.Equal(t, restart.Time, restart.End)
	// Spans are read at the annotation step: each edge lies within one
	// step after the sample that makes it.
	step := dashboard.AnnotationStep(start, now).Seconds()
	within := func(want time.Time, got float64) {
		t.Helper()
		w := float64(want.Unix())
		require.True(t, got >= w && got <= w+step, "want %v within one step (%gs) after %v", got, step, w)
	}
	within(start.Add(5*time.Minute), warm.Time)
	within(start.Add(6*time.Minute), warm.End)
	require.Equal(t, "P1", alert.Severity)
	within(start.Add(7*time.Minute), alert.Time)
	within(now.Add(-time.Duration(step)*time.Second), alert.End)
	require.Equal(t, "VLLMSlowEndToEnd", alert.Labels["alertname"])

	ts.getJSON("/api/v1/appliance/annotations?from=10&to=5", http.StatusBadRequest, nil)
}
