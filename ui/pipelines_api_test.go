package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/pipeline"
)

// TestPipelinesAPI lists the configured pipelines and reads one from
// pushed series: two segments, the second four times the first.
func TestPipelinesAPI(t *testing.T) {
	ps := []pipeline.Pipeline{{Name: "cams", Segments: []pipeline.Segment{
		{Name: "upload", Kind: pipeline.KindHistogram, Metric: "up_seconds", Matchers: `device="cam1"`, Bytes: "up_bytes_total"},
		{Name: "inference", Kind: pipeline.KindHistogram, Metric: "inf_seconds"},
	}}}
	ts := newTestServer(t, func(o *Options) { o.Pipelines = func() []pipeline.Pipeline { return ps } })
	now := time.Now().Truncate(time.Second)
	start := now.Add(-10 * time.Minute)
	var lines []string
	for i := 0; i <= 40; i++ {
		ms := start.Add(time.Duration(i) * 15 * time.Second).UnixMilli()
		for _, s := range []struct {
			name string
			mean float64
		}{{"up_seconds", 0.25}, {"inf_seconds", 1}} {
			lines = append(lines,
				fmt.Sprintf(`%s_sum{device="cam1"} %g %d`, s.name, s.mean*float64(i), ms),
				fmt.Sprintf(`%s_count{device="cam1"} %d %d`, s.name, i, ms),
				fmt.Sprintf(`%s_bucket{device="cam1",le="+Inf"} %d %d`, s.name, i, ms))
		}
		lines = append(lines, fmt.Sprintf(`up_bytes_total{device="cam1"} %d %d`, 500*i, ms))
	}
	ts.importLines(lines)

	var list []pipeline.Pipeline
	ts.getJSON("/api/v1/appliance/pipelines", http.StatusOK, &list)
	require.Equal(t, ps, list)

	var r pipeline.Report
	ts.getJSON("/api/v1/appliance/pipelines/cams?"+url.Values{"from": {fmt.Sprint(start.Unix())}, "to": {fmt.Sprint(now.Unix())}}.Encode(), http.StatusOK, &r)
	require.Equal(t, "inference", r.Slowest, r.Summary)
	require.InDelta(t, 0.8, float64(r.SlowestShare), 1e-9)
	require.InDelta(t, 0.2, float64(r.Segments[0].Share), 1e-9)
	require.InDelta(t, 1.25, float64(r.TotalMean), 1e-9)
	require.NotNil(t, r.Segments[0].Transfer)
	require.InDelta(t, 20000, float64(r.Segments[0].Transfer.Bytes), 1e-6)
	require.NotEmpty(t, r.Segments[1].Mean)

	ts.getJSON("/api/v1/appliance/pipelines/nope", http.StatusNotFound, nil)
	ts.getJSON("/api/v1/appliance/pipelines/cams?from=x", http.StatusBadRequest, nil)
}
