package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/thermal"
)

// TestThermalAPI: a Pi's temperature and throttle flag next to a vLLM
// service's request time and a detector's per-frame histogram.
func TestThermalAPI(t *testing.T) {
	ts := newTestServer(t, nil)
	now := time.Now().Truncate(time.Minute)
	start := now.Add(-10 * time.Minute)
	sel := `job="vllm",instance="127.0.0.1:8000",model_name="llama"`
	var lines []string
	for i := 0; i <= 40; i++ {
		ms := start.Add(time.Duration(i) * 15 * time.Second).UnixMilli()
		add := func(series string, v float64) { lines = append(lines, fmt.Sprintf("%s %g %d", series, v, ms)) }
		add(`node_thermal_zone_temp{job="local",instance="pi",zone="0",type="cpu-thermal"}`, 70+float64(i)/4)
		add(`appliance_throttled{job="local",instance="pi",flag="throttled"}`, float64(i/30))
		n := float64(i)
		add(`vllm:e2e_request_latency_seconds_bucket{`+sel+`,le="1"}`, n)
		add(`vllm:e2e_request_latency_seconds_bucket{`+sel+`,le="+Inf"}`, n)
		add(`vllm:e2e_request_latency_seconds_sum{`+sel+`}`, n/2)
		add(`vllm:e2e_request_latency_seconds_count{`+sel+`}`, n)
		add(`vllm:num_requests_running{`+sel+`}`, 1)
		add(`up{`+sel+`}`, 1)
		add(`detector_frame_seconds_bucket{le="0.1"}`, 10*n)
		add(`detector_frame_seconds_bucket{le="+Inf"}`, 15*n)
		add(`detector_frame_seconds_count`, 15*n)
		add(`detector_frame_seconds_sum`, n)
	}
	ts.importLines(lines)

	q := url.Values{"from": {fmt.Sprint(start.Unix())}, "to": {fmt.Sprint(now.Unix())}, "step": {"60"}}
	var r thermal.Report
	ts.getJSON("/api/v1/appliance/thermal?"+q.Encode(), http.StatusOK, &r)
	require.Len(t, r.Temperatures, 1)
	require.Equal(t, "cpu-thermal", r.Temperatures[0].Name)
	require.Equal(t, 80.0, r.Thresholds[0].Value)
	require.Len(t, r.Throttle, 1)
	require.Equal(t, "throttled", r.Throttle[0].Reason)
	require.NotNil(t, r.Latency)
	require.Equal(t, "vllm/llama P95", r.Latency.Name)
	require.NotEmpty(t, r.Latency.Points)
	require.NotNil(t, r.Frames, "the frame histogram is found by its name")
	require.Equal(t, "detector_frame_seconds", r.Frames.Metric)
	require.NotEmpty(t, r.Frames.Jitter.Points)

	q.Set("metric", "detector_frame_seconds")
	ts.getJSON("/api/v1/appliance/thermal?"+q.Encode(), http.StatusOK, &r)
	require.Equal(t, "detector_frame_seconds P95", r.Latency.Name)
	q.Set("metric", "not a name")
	ts.getJSON("/api/v1/appliance/thermal?"+q.Encode(), http.StatusBadRequest, nil)
}
