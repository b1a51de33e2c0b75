package slo

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/teststorage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/query"
)

func reportSLOs(t *testing.T) []*config.SLOConfig {
	t.Helper()
	cfg, err := config.Load([]byte(`
slos:
  - name: chat-latency
    kind: latency
    histogram: vllm:e2e_request_latency_seconds
    selector: '{job="vllm"}'
    by: [model_name]
    threshold: 1.5s
    objective: 99%
    window: 28d
`), "report.yml")
	require.NoError(t, err)
	return cfg.SLOs
}

// loadTSDB writes samples into Prometheus' TSDB, which takes any
// timestamps, so that the golden reports can be of a fixed week.
func loadTSDB(t *testing.T, ss []testSample) storage.Queryable {
	st := teststorage.New(t)
	app := st.Appender(context.Background())
	for _, s := range ss {
		_, err := app.Append(0, s.lset, s.t.UnixMilli(), s.v)
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	return st
}

func shanghai(t *testing.T) *time.Location {
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	return loc
}

// goldenReport computes the report of w from 15 days of data ending
// with w, at now.
func goldenReport(t *testing.T, w Week, loc *time.Location, now time.Time) *Report {
	end := w.End(loc)
	q := loadTSDB(t, genReportData(w, loc, end.Add(-15*24*time.Hour), end))
	src := EngineSource{Engine: query.New(query.Options{}, nil, nil), Queryable: q}
	r, err := Compute(context.Background(), src, w, ReportOptions{
		SLOs: reportSLOs(t), Location: loc, Now: now, ExternalURL: "http://box.lab:9090/", Box: "gpu-box-1",
		// One notification per 30 minutes of an incident.
		Notifications: func(alert string, from, to time.Time) (int, error) {
			return int(to.Sub(from) / (30 * time.Minute)), nil
		},
		Releases: ReleaseFunc(func(_ context.Context, from, to time.Time) ([]ReleaseMark, error) {
			return testReleases(w, loc), nil
		}),
	})
	require.NoError(t, err)
	return r
}

var externalRefRE = regexp.MustCompile(`(?i)(https?:)?//[^\s"'<>]+`)

func TestReportGolden(t *testing.T) {
	loc := shanghai(t)
	w, _ := ParseWeek("2026-W48")
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, loc)
	r := goldenReport(t, w, loc, now)

	js, err := RenderJSON(r)
	require.NoError(t, err)
	md, err := RenderMarkdown(r)
	require.NoError(t, err)
	html, err := RenderHTML(r)
	require.NoError(t, err)
	golden(t, "report-2026-W48.json", js)
	golden(t, "report-2026-W48.md", md)
	golden(t, "report-2026-W48.html", html)

	// Self-contained: the only reference out is web.external_url.
	for _, m := range externalRefRE.FindAllString(string(html), -1) {
		require.Regexp(t, `^http://box\.lab:9090/`, m, "external reference in the HTML")
	}
	require.NotContains(t, string(html), "<script")
	require.NotContains(t, string(html), "<img")
	require.Less(t, len(html), 100<<10, "HTML under 100 KB")

	// The mail lists the releases too, without SVG.
	mail, err := RenderEmailHTML(r)
	require.NoError(t, err)
	require.Contains(t, string(mail), ">Releases</h2>")
	require.Contains(t, string(mail), "<td>deploy llama v2</td><td>chat-latency · model_name=llama</td><td align=\"right\">1.5 s</td><td align=\"right\">1 s</td><td align=\"right\">−33.3%</td>")
	require.NotContains(t, string(mail), "<svg")

	// The same report again gives the same bytes.
	r2 := goldenReport(t, w, loc, now)
	html2, err := RenderHTML(r2)
	require.NoError(t, err)
	require.Equal(t, string(html), string(html2))
}

// TestReportKnownAnswers checks the figures of the synthetic data: this
// week 99.2% under the threshold and P95 exactly on the bound 1.0, last
// week 95% and P95 on 1.5, across a counter reset, with n < 100 for the
// small model.
func TestReportKnownAnswers(t *testing.T) {
	loc := shanghai(t)
	w, _ := ParseWeek("2026-W48")
	r := goldenReport(t, w, loc, time.Date(2026, 11, 30, 9, 0, 0, 0, loc))
	checkKnownAnswers(t, r)
}

func checkKnownAnswers(t *testing.T, r *Report) {
	t.Helper()
	require.Len(t, r.SLOs, 2)
	llama, tiny := r.SLOs[0], r.SLOs[1]
	require.Equal(t, map[string]string{"model_name": "llama"}, llama.Labels)
	require.Equal(t, map[string]string{"model_name": "tiny"}, tiny.Labels)

	near := func(want float64, got *float64, what string) {
		t.Helper()
		require.NotNil(t, got, what)
		require.True(t, withinPct(want, *got, 1), "%s: want %v within 1%%, got %v", what, want, *got)
	}
	near(0.992, llama.This.Attainment, "attainment this week")
	near(0.95, llama.Last.Attainment, "attainment last week")
	// 2016 steps of 1000 requests, less the one step the restart loses.
	require.True(t, withinPct(2015000, llama.This.Total, 1), "total this week %v", llama.This.Total)
	near(0.5, llama.This.Quantiles[0].Value, "P50 this week")
	near(1.0, llama.This.Quantiles[1].Value, "P95 this week")
	near(1.5, llama.Last.Quantiles[1].Value, "P95 last week")
	near(1.0+0.5*40/42, llama.This.Quantiles[2].Value, "P99 this week")
	require.Equal(t, "1.0", llama.This.Quantiles[1].Upper)
	require.NotNil(t, llama.Met)
	require.True(t, *llama.Met)

	require.True(t, withinPct(84, tiny.This.Total, 2), "tiny total %v", tiny.This.Total)
	require.True(t, tiny.This.Quantiles[2].TooFew)
	require.Nil(t, tiny.This.Quantiles[2].Value)
	near(1, tiny.This.Attainment, "tiny attainment")

	require.Len(t, r.Probes, 1)
	pr := r.Probes[0]
	require.Equal(t, "chat", pr.Probe)
	near(2014.0/2016, pr.This.Availability, "probe availability this week")
	near(1, pr.Last.Availability, "probe availability last week")
	near(0.8, pr.This.DurationP95, "probe P95 this week")
	near(1.2, pr.Last.DurationP95, "probe P95 last week")
	require.Equal(t, []Failure{{Reason: "timeout", Count: 2}}, pr.Failures)
	require.Equal(t, pr.Last.Tier == "1m", pr.Last.Approx, "≈ on what a rollup tier answers")

	require.Len(t, r.Incidents, 2)
	require.Equal(t, "SLOBudgetBurnFast", r.Incidents[0].Alert)
	require.Equal(t, "P0", r.Incidents[0].Severity)
	// To the minute the incidents are read at.
	require.InDelta(t, float64(40*time.Minute), float64(r.Incidents[0].Duration), float64(time.Minute))
	require.Equal(t, "VLLMQueueHigh", r.Incidents[1].Alert)
	require.Equal(t, []string{"a", "b"}, r.Incidents[1].Instances)
	require.InDelta(t, float64(2*time.Hour), float64(r.Incidents[1].Duration), float64(time.Minute))
	if n := r.Incidents[0].Notifications; n != nil {
		require.Equal(t, 1, *n, "40m + 5m")
	}
	require.Len(t, r.Restarts, 1)
	require.Equal(t, "a", r.Restarts[0].Instance)

	// The deploy at the start of the week moved P95 from 1.5 s to 1.0 s;
	// the restart moved nothing.
	require.Len(t, r.Releases, 2)
	deploy, restart := r.Releases[0], r.Releases[1]
	require.Equal(t, "deploy llama v2", deploy.Text)
	require.Equal(t, r.Start, deploy.At)
	require.Len(t, deploy.Latency, 1, "narrowed to model_name=llama")
	require.Equal(t, map[string]string{"model_name": "llama"}, deploy.Latency[0].Labels)
	near(1.5, deploy.Latency[0].Before, "P95 the day before the deploy")
	near(1.0, deploy.Latency[0].After, "P95 the day after the deploy")
	require.True(t, withinPct(288000, deploy.Latency[0].BeforeTotal, 1), "requests the day before %v", deploy.Latency[0].BeforeTotal)
	require.Equal(t, "release: vllm a restarted (process start changed; no version label)", restart.Text)
	require.NotEmpty(t, restart.Latency)
	near(1.0, restart.Latency[0].Before, "P95 the day before the restart")
	near(1.0, restart.Latency[0].After, "P95 the day after the restart")
}

// testReleases are the releases of the test data: a deploy posted at the
// start of the week, when the distribution changes (P95 1.5 s → 1.0 s),
// and instance a's restart on Wednesday, recorded as a release (no
// version label), which changes nothing; one before the week is left
// out.
func testReleases(w Week, loc *time.Location) []ReleaseMark {
	start := w.Start(loc)
	return []ReleaseMark{
		{At: start.Add(2*24*time.Hour + 12*time.Hour), Text: "release: vllm a restarted (process start changed; no version label)", Labels: map[string]string{"job": "vllm", "instance": "a"}},
		{At: start, Text: "deploy llama v2", Labels: map[string]string{"model_name": "llama", "version": "v2"}},
		{At: start.Add(-time.Hour), Text: "last week's deploy", Labels: map[string]string{}},
	}
}

func TestReportWeeks(t *testing.T) {
	f := func(week, zone string, hours float64) {
		t.Helper()
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		w, err := ParseWeek(week)
		require.NoError(t, err)
		r := goldenReport(t, w, loc, w.End(loc).Add(time.Hour))
		require.Equal(t, hours, r.Hours)
		require.Equal(t, week, r.Week)
		checkKnownAnswers(t, r)
		require.Len(t, r.SLOs[0].Daily, 7)
	}
	f("2026-W13", "Europe/Berlin", 167)
	f("2026-W43", "Europe/Berlin", 169)
	f("2026-W53", "Asia/Shanghai", 168)
}
