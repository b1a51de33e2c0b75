package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/downsample"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/slo"
)

// reportImport is 15 days of vLLM latency histograms ending with week w,
// in the text format with millisecond timestamps, one body per day. Model
// llama gets 1000 requests per 5 minutes: in week w 99.2% under 1.5 s and
// 95% under 1.0 s (so P95 is the bound 1.0 exactly), before it 95% under
// 1.5 s and 90% under 1.0 (P95 1.5 exactly); its counters restart from 0
// on w's Wednesday at noon. Model tiny gets one request every 2 hours.
func reportImport(w slo.Week, loc *time.Location) []string {
	les := []string{"0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "+Inf"}
	this := []float64{200, 500, 800, 950, 992, 998, 1000, 1000, 1000}
	last := []float64{100, 300, 600, 900, 950, 990, 1000, 1000, 1000}
	start, end := w.Start(loc), w.End(loc)
	restart := start.Add(60 * time.Hour)
	from := end.Add(-15 * 24 * time.Hour)
	cum := make([]float64, len(les))
	tiny := 0.0
	var bodies []string
	var b strings.Builder
	day := from
	for t := from; t.Before(end); t = t.Add(5 * time.Minute) {
		if t.Sub(day) >= 24*time.Hour {
			bodies, day = append(bodies, b.String()), t
			b.Reset()
		}
		if b.Len() == 0 {
			b.WriteString("# TYPE vllm:e2e_request_latency_seconds histogram\n")
		}
		dist := last
		if t.After(start) {
			dist = this
		}
		switch {
		case t.Equal(restart):
			clear(cum)
		case t.After(from):
			for i := range cum {
				cum[i] += dist[i]
			}
		}
		if t.After(from) && t.Sub(from)%(2*time.Hour) == 0 {
			tiny++
		}
		ms := t.UnixMilli()
		for i, le := range les {
			fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{job=\"vllm\",instance=\"a\",model_name=\"llama\",le=%q} %g %d\n", le, cum[i], ms)
			v := tiny
			if i == 0 {
				v = 0 // tiny's requests take 0.4 s
			}
			fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{job=\"vllm\",instance=\"b\",model_name=\"tiny\",le=%q} %g %d\n", le, v, ms)
		}
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_count{job=\"vllm\",instance=\"a\",model_name=\"llama\"} %g %d\n", cum[len(cum)-1], ms)
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_count{job=\"vllm\",instance=\"b\",model_name=\"tiny\"} %g %d\n", tiny, ms)
	}
	return append(bodies, b.String())
}

// TestReportFromImportedData pushes 15 days through
// /api/v1/import/prometheus and checks the report the API serves for the
// last complete week in Asia/Shanghai against the known answers, within
// 1%; last week is older than the raw tier keeps and comes from the 1m
// tier.
func TestReportFromImportedData(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	cfg, err := config.Load([]byte(`
slos:
  - name: chat-latency
    kind: latency
    histogram: vllm:e2e_request_latency_seconds
    selector: '{job="vllm"}'
    by: [model_name]
    threshold: 1.5s
    objective: 99%
`), "slo.yml")
	require.NoError(t, err)
	engine := query.New(query.Options{}, nil, nil)
	var rp *slo.Reporter
	ts := newTestServer(t, func(o *Options) {
		o.Engine = engine
		o.Reports = reportsFunc(func() *slo.Reporter { return rp })
	})
	archive, err := slo.NewArchive(ts.db.State())
	require.NoError(t, err)
	rp = &slo.Reporter{
		Source:   slo.EngineSource{Engine: engine, Queryable: ts.db},
		Archive:  archive,
		Options:  func() slo.ReportOptions { return slo.OptionsFor(cfg) },
		Schedule: func() *config.WeeklyReportConfig { return nil },
		Location: func() *time.Location { return loc },
	}

	w := slo.WeekOf(time.Now(), loc).Prev()
	for _, body := range reportImport(w, loc) {
		ts.importText(body)
	}
	ds, err := downsample.New(ts.db, downsample.Options{Span1m: 24 * time.Hour, Span5m: 24 * time.Hour})
	require.NoError(t, err)
	t.Cleanup(ds.Close)
	require.NoError(t, ds.Step(context.Background()))

	code, body := ts.get("/api/v1/appliance/reports/" + w.String() + ".json")
	require.Equal(t, http.StatusOK, code, body)
	var r slo.Report
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	require.Len(t, r.SLOs, 2)
	llama, tiny := r.SLOs[0], r.SLOs[1]
	near := func(want float64, got *float64, what string) {
		t.Helper()
		require.NotNil(t, got, what)
		require.InEpsilon(t, want, *got, 0.01, what)
	}
	near(0.992, llama.This.Attainment, "attainment this week")
	near(0.95, llama.Last.Attainment, "attainment last week")
	near(1.0, llama.This.Quantiles[1].Value, "P95 this week")
	near(1.5, llama.Last.Quantiles[1].Value, "P95 last week")
	require.Equal(t, "1.0", llama.This.Quantiles[1].Upper)
	require.InEpsilon(t, 2015000, llama.This.Total, 0.01, "requests this week across the restart")
	require.True(t, tiny.This.Quantiles[2].TooFew, "P99 of 84 requests")
	require.Equal(t, "1m", r.SLOs[0].Last.Tier)

	code, body = ts.get("/api/v1/appliance/reports/" + w.String() + ".md")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "| vllm | chat-latency | model_name=llama | 99% | 99.200% | 95.000% |")
	require.Contains(t, body, "| P99 | n < 100 | n < 100 |")
	code, body = ts.get("/reports/" + w.String() + ".html")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "<h1>SLO report "+w.String()+"</h1>")

	code, body = ts.get("/api/v1/appliance/reports/2026-W54.json")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `"errorType":"bad_data"`)
	code, _ = ts.get("/api/v1/appliance/reports/" + w.String() + ".pdf")
	require.Equal(t, http.StatusBadRequest, code)

	// The archive lists what the scheduler stored.
	rep, err := slo.Compute(context.Background(), rp.Source, w, slo.ReportOptions{SLOs: cfg.SLOs, Location: loc, Now: w.End(loc)})
	require.NoError(t, err)
	require.NoError(t, archive.Put(rep))
	code, body = ts.get("/api/v1/appliance/reports")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"week":"`+w.String()+`","formats":["html","md","json"]`)

	// Without reports.weekly there is nobody to send to.
	code, body = ts.post("/api/v1/appliance/reports/"+w.String()+"/send", "application/json", nil)
	require.Equal(t, http.StatusUnprocessableEntity, code, body)

	// The /slo page's list: llama has spent more than its budget over
	// 28d (95% for most of the data), tiny none; sorted by budget left.
	code, body = ts.get("/api/v1/appliance/slos")
	require.Equal(t, http.StatusOK, code, body)
	var st struct {
		Data []slo.Status `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Len(t, st.Data, 2)
	require.Equal(t, "llama", st.Data[0].Labels["model_name"])
	require.Less(t, *st.Data[0].BudgetLeft, 0.0)
	require.Equal(t, "tiny", st.Data[1].Labels["model_name"])
	require.InDelta(t, 1.0, *st.Data[1].BudgetLeft, 1e-9)
	require.Equal(t, 14.4*28/30, st.Data[0].Alerts[0].Factor)
}

// reportsFunc defers to a Reporter built after the server.
type reportsFunc func() *slo.Reporter

func (f reportsFunc) List() ([]slo.ArchivedReport, error) { return f().List() }
func (f reportsFunc) Report(ctx context.Context, week, format string) ([]byte, error) {
	return f().Report(ctx, week, format)
}
func (f reportsFunc) Statuses(ctx context.Context) ([]slo.Status, error) { return f().Statuses(ctx) }
func (f reportsFunc) SendNow(ctx context.Context, week string) error     { return f().SendNow(ctx, week) }
