package slo

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

// Synthetic vLLM data with known answers, shared by the golden tests and
// the end-to-end test through the import API.
//
// Model "llama" gets 1000 requests every 5 minutes on instance a. This
// week (the week under report) 99.2% are at or under 1.5 s and 95.0% at or
// under 1.0 s, so P95 is exactly the bound 1.0 (histogram_quantile
// returns the upper bound when the rank equals a bucket's count); last
// week and before 95.0% are under 1.5 s and 90% under 1.0, so P95 is
// exactly 1.5. Instance a restarts on the Wednesday of this week at
// 12:00: its counters start again from 0.
//
// Model "tiny" gets one request every 2 hours, all of them 0.4 s: 84 in a
// week, too few for a P99.
//
// Probe chat takes 0.8 s this week and 1.2 s before, and fails twice
// (timeout) this week: availability 2014/2016.
//
// The alert SLOBudgetBurnFast fires for 40 minutes on Thursday and
// VLLMQueueHigh on a and b for 2 hours on Friday.

var testBounds = []string{"0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "+Inf"}

// cumulative requests per bucket of one 5-minute step.
var (
	thisWeekDist = []float64{200, 500, 800, 950, 992, 998, 1000, 1000, 1000}
	lastWeekDist = []float64{100, 300, 600, 900, 950, 990, 1000, 1000, 1000}
)

const testStep = 5 * time.Minute

type testSample struct {
	lset labels.Labels
	t    time.Time
	v    float64
}

// genReportData returns samples from from to to (exclusive) for a report
// on week w in loc.
func genReportData(w Week, loc *time.Location, from, to time.Time) []testSample {
	weekStart := w.Start(loc)
	restart := weekStart.Add(2*24*time.Hour + 12*time.Hour)
	var out []testSample
	add := func(t time.Time, v float64, kv ...string) {
		out = append(out, testSample{lset: labels.FromStrings(kv...), t: t, v: v})
	}
	// Counters of instance a since its last start.
	cum := make([]float64, len(testBounds))
	tinyCount := 0.0
	started := from
	for t := from; t.Before(to); t = t.Add(testStep) {
		if !t.Before(restart) && t.Add(-testStep).Before(restart) {
			clear(cum)
			started = t
		}
		dist := lastWeekDist
		if t.After(weekStart) {
			dist = thisWeekDist
		}
		// A sample at t counts the requests of the step ending at t.
		if t.After(from) && !(t.Equal(started) && t.After(from)) {
			for i := range cum {
				cum[i] += dist[i]
			}
		}
		for i, le := range testBounds {
			add(t, cum[i], "__name__", "vllm:e2e_request_latency_seconds_bucket", "job", "vllm", "instance", "a", "model_name", "llama", "le", le)
		}
		add(t, cum[len(cum)-1], "__name__", "vllm:e2e_request_latency_seconds_count", "job", "vllm", "instance", "a", "model_name", "llama")
		add(t, float64(started.Unix()), "__name__", "process_start_time_seconds", "job", "vllm", "instance", "a")

		if t.After(from) && t.Sub(from)%(2*time.Hour) == 0 {
			tinyCount++
		}
		// Probe chat runs every 5 minutes: 0.8 s this week, 1.2 s
		// before; it fails (timeout) at the two Saturday runs at 03:00
		// and 03:05 of this week.
		dur := 1.2
		if t.After(weekStart) {
			dur = 0.8
		}
		sat := weekStart.Add(5*24*time.Hour + 3*time.Hour)
		if t.Equal(sat) || t.Equal(sat.Add(testStep)) {
			add(t, 0, "__name__", "probe_success", "probe", "chat", "reason", "timeout")
		} else {
			add(t, 1, "__name__", "probe_success", "probe", "chat")
		}
		add(t, dur, "__name__", "probe_duration_seconds", "probe", "chat")
		for _, le := range testBounds {
			v := tinyCount
			if f, _ := strconv.ParseFloat(le, 64); f < 0.4 {
				v = 0
			}
			add(t, v, "__name__", "vllm:e2e_request_latency_seconds_bucket", "job", "vllm", "instance", "b", "model_name", "tiny", "le", le)
		}
		add(t, tinyCount, "__name__", "vllm:e2e_request_latency_seconds_count", "job", "vllm", "instance", "b", "model_name", "tiny")
	}
	// Alerts, at every minute while they fire, as the rules write them.
	alert := func(start time.Time, d time.Duration, kv ...string) {
		for t := start; t.Before(start.Add(d)); t = t.Add(time.Minute) {
			if !t.Before(from) && t.Before(to) {
				add(t, 1, append([]string{"__name__", "ALERTS", "alertstate", "firing"}, kv...)...)
			}
		}
	}
	alert(weekStart.Add(3*24*time.Hour+10*time.Hour), 40*time.Minute, "alertname", "SLOBudgetBurnFast", "severity", "P0", "slo", "chat-latency", "model_name", "llama")
	for _, in := range []string{"a", "b"} {
		alert(weekStart.Add(4*24*time.Hour+15*time.Hour), 2*time.Hour, "alertname", "VLLMQueueHigh", "severity", "P1", "job", "vllm", "instance", in)
	}
	slices.SortStableFunc(out, func(a, b testSample) int { return a.t.Compare(b.t) })
	return out
}

// importText writes samples in the Prometheus text format with
// millisecond timestamps, as /api/v1/import/prometheus takes them.
func importText(ss []testSample) string {
	var b strings.Builder
	b.WriteString("# TYPE vllm:e2e_request_latency_seconds histogram\n# TYPE process_start_time_seconds gauge\n# TYPE probe_success gauge\n# TYPE probe_duration_seconds gauge\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "%s %s %d\n", s.lset.String(), strconv.FormatFloat(s.v, 'g', -1, 64), s.t.UnixMilli())
	}
	return b.String()
}

func withinPct(want, got, pct float64) bool {
	return math.Abs(got-want) <= math.Abs(want)*pct/100
}
