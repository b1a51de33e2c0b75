package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/explain"
)

// TestExplainAPI serves breakdown, explain and compare from series
// imported into the real storage: a vLLM service whose queue time grows
// half-way, and a histogram of two versions.
func TestExplainAPI(t *testing.T) {
	ts := newTestServer(t, nil)
	now := time.Now().Truncate(time.Second)
	start := now.Add(-20 * time.Minute)
	var lines []string
	sel := `job="vllm",instance="127.0.0.1:8000",model_name="llama"`
	var n, e2e, queue, decode float64
	for i := 0; i <= 240; i++ {
		ms := start.Add(time.Duration(i) * 5 * time.Second).UnixMilli()
		add := func(series string, v float64) { lines = append(lines, fmt.Sprintf("%s %g %d", series, v, ms)) }
		q, waiting := 0.1, 0.0
		if i > 180 {
			q, waiting = 6.1, 20
		}
		n, queue, decode, e2e = n+1, queue+q, decode+1.9, e2e+q+1.9
		for _, le := range []string{"1", "5", "10", "+Inf"} {
			c := n
			if le == "1" {
				c = 0
			}
			if le == "5" {
				c = min(n, 181)
			}
			add(`vllm:e2e_request_latency_seconds_bucket{`+sel+`,le="`+le+`"}`, c)
		}
		add(`vllm:e2e_request_latency_seconds_sum{`+sel+`}`, e2e)
		add(`vllm:e2e_request_latency_seconds_count{`+sel+`}`, n)
		add(`vllm:request_queue_time_seconds_bucket{`+sel+`,le="+Inf"}`, n)
		add(`vllm:request_decode_time_seconds_bucket{`+sel+`,le="+Inf"}`, n)
		add(`vllm:request_queue_time_seconds_sum{`+sel+`}`, queue)
		add(`vllm:request_queue_time_seconds_count{`+sel+`}`, n)
		add(`vllm:request_decode_time_seconds_sum{`+sel+`}`, decode)
		add(`vllm:request_decode_time_seconds_count{`+sel+`}`, n)
		add(`vllm:num_requests_running{`+sel+`}`, 2)
		add(`vllm:num_requests_waiting{`+sel+`}`, waiting)
		add(`lat_bucket{model_version="v1",le="1"}`, float64(i))
		add(`lat_bucket{model_version="v1",le="+Inf"}`, float64(2*i))
		add(`lat_bucket{model_version="v2",le="1"}`, float64(i/2))
		add(`lat_bucket{model_version="v2",le="+Inf"}`, float64(2*i))
	}
	ts.importLines(lines)

	var r explain.Report
	ts.getJSON("/api/v1/appliance/explain?"+url.Values{"job": {"vllm"}, "model": {"llama"}, "now": {fmt.Sprint(now.Unix())}}.Encode(), http.StatusOK, &r)
	require.Equal(t, explain.StatusRise, r.Status, r.Summary)
	require.Equal(t, "queue", r.Grew, r.Summary)
	require.Equal(t, "waiting", r.Signals[0].ID, r.Summary)
	require.Contains(t, r.Missing, "vllm:request_prefill_time_seconds (prefill)")

	var bd explain.BreakdownReport
	ts.getJSON("/api/v1/appliance/breakdown?"+url.Values{"job": {"vllm"}, "model": {"llama"},
		"from": {fmt.Sprint(start.Unix())}, "to": {fmt.Sprint(now.Unix())}}.Encode(), http.StatusOK, &bd)
	require.Len(t, bd.Phases, 2)
	require.NotEmpty(t, bd.Phases[0].Mean)

	ts.getJSON("/api/v1/appliance/explain?job=nope", http.StatusNotFound, nil)
	ts.getJSON("/api/v1/appliance/explain", http.StatusNotFound, nil)

	var cmp explain.CompareReport
	ts.getJSON("/api/v1/appliance/compare?"+url.Values{"metric": {"lat"}, "label": {"model_version"}, "a": {"v1"}, "b": {"v2"},
		"from": {fmt.Sprint(now.Add(-10 * time.Minute).Unix())}, "to": {fmt.Sprint(now.Unix())}}.Encode(), http.StatusOK, &cmp)
	require.InDelta(t, 1.0, float64(cmp.A.Quantiles["p50"]), 1e-9, "half the requests at or under 1 s")
	require.InDelta(t, 0.5, float64(cmp.A.CDF[0][1]), 0.01)
	require.InDelta(t, 0.25, float64(cmp.B.CDF[0][1]), 0.01)
	ts.getJSON("/api/v1/appliance/compare?metric=lat", http.StatusBadRequest, nil)
	ts.getJSON("/api/v1/appliance/compare?metric=lat%7B&label=x&a=1&b=2", http.StatusBadRequest, nil)
}
