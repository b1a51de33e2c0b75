package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
)

func remoteWriteBody(t *testing.T, req *prompb.WriteRequest) []byte {
	t.Helper()
	raw, err := req.Marshal()
	require.NoError(t, err)
	return snappy.Encode(nil, raw)
}

var rwHeaders = map[string]string{
	"Content-Encoding":                  "snappy",
	"X-Prometheus-Remote-Write-Version": "0.1.0",
}

// TestRemoteWrite pushes with Prometheus remote write 1.0 and reads the
// samples back; a malformed body is a 400 and stores nothing.
func TestRemoteWrite(t *testing.T) {
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, "scrape_configs: []\n"), filepath.Join(dir, "data"))

	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	req := &prompb.WriteRequest{}
	for i := 0; i < 3; i++ {
		ts := prompb.TimeSeries{Labels: []prompb.Label{
			{Name: "__name__", Value: "edge_inference_seconds"},
			{Name: "device", Value: fmt.Sprintf("jetson-%d", i)},
		}}
		for j := 0; j < 10; j++ {
			ts.Samples = append(ts.Samples, prompb.Sample{
				Timestamp: base.Add(time.Duration(j) * 15 * time.Second).UnixMilli(),
				Value:     float64(i*100+j) + 0.25,
			})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	code, body := p.post("/api/v1/write", "application/x-protobuf", remoteWriteBody(t, req), rwHeaders)
	require.Equal(t, http.StatusNoContent, code, body)

	at := base.Add(9 * 15 * time.Second)
	eventually(t, 20*time.Second, "pushed samples queryable", func() bool {
		return len(p.instant("count_over_time(edge_inference_seconds[10m])", at)) == 3
	})
	for _, s := range p.instant("count_over_time(edge_inference_seconds[10m])", at) {
		require.Equal(t, 10.0, value(t, s), s.Metric["device"])
	}
	v := p.instant(`edge_inference_seconds{device="jetson-2"}`, at)
	require.Len(t, v, 1)
	require.Equal(t, 209.25, value(t, v[0]))

	// Not snappy: refused with the reason; nothing stored.
	code, body = p.post("/api/v1/write", "application/x-protobuf", []byte("definitely not snappy"), rwHeaders)
	require.Equal(t, http.StatusBadRequest, code)
	require.NotEmpty(t, strings.TrimSpace(body))
	// Snappy, but not a protobuf WriteRequest.
	code, _ = p.post("/api/v1/write", "application/x-protobuf", snappy.Encode(nil, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}), rwHeaders)
	require.Equal(t, http.StatusBadRequest, code)
	// Barrier: a good write after the refused ones; once it is queryable,
	// anything the refused ones had stored would be too.
	writeSentinel(t, p, at)
	all := p.instant(`count({__name__=~".+", __name__!="e2e_sentinel"})`, at)
	require.Len(t, all, 1)
	require.Equal(t, 3.0, value(t, all[0]), "only the three pushed series exist")
}

// TestImportPrometheusText backfills text-format samples with and without
// timestamps; a body with one bad line is refused whole.
func TestImportPrometheusText(t *testing.T) {
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, "scrape_configs: []\n"), filepath.Join(dir, "data"))

	old := time.Now().Add(-2 * time.Hour).Truncate(time.Minute)
	var b strings.Builder
	b.WriteString("# HELP detector_latency_seconds Inference latency of the edge detector.\n")
	b.WriteString("# TYPE detector_latency_seconds gauge\n")
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&b, "detector_latency_seconds{camera=\"gate\"} %g %d\n", 0.040+float64(i)/1000, old.Add(time.Duration(i)*time.Minute).UnixMilli())
	}
	b.WriteString("detector_frames_total{camera=\"gate\"} 1234\n") // no timestamp: now
	code, body := p.post("/api/v1/import/prometheus?extra_label=site=lab1", "text/plain", []byte(b.String()), nil)
	require.Equal(t, http.StatusNoContent, code, body)

	eventually(t, 20*time.Second, "imported samples queryable", func() bool {
		return len(p.instant(`detector_frames_total`, time.Time{})) == 1
	})
	frames := p.instant(`detector_frames_total`, time.Time{})
	require.Equal(t, "lab1", frames[0].Metric["site"])
	require.Equal(t, 1234.0, value(t, frames[0]))
	end := old.Add(59 * time.Minute)
	cnt := p.instant(`count_over_time(detector_latency_seconds{site="lab1"}[1h])`, end)
	require.Len(t, cnt, 1)
	require.Equal(t, 60.0, value(t, cnt[0]))
	mx := p.instant(`max_over_time(detector_latency_seconds[1h])`, end)
	require.InDelta(t, 0.099, value(t, mx[0]), 1e-12)

	code, r := p.get("/api/v1/metadata", map[string][]string{"metric": {"detector_latency_seconds"}})
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(r.Data), "Inference latency of the edge detector.")

	// One malformed line in the middle: 400 naming the line, nothing stored.
	bad := "import_probe_ok 1\nimport_probe_bad{x=\"1\" 2\nimport_probe_ok2 3\n"
	code, body = p.post("/api/v1/import/prometheus", "text/plain", []byte(bad), nil)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "line 2")
	require.Contains(t, body, `"errorType":"bad_data"`)
	writeSentinel(t, p, time.Now())
	require.Empty(t, p.instant(`{__name__=~"import_probe_.*"}`, time.Time{}))
}

// writeSentinel remote-writes one sample of e2e_sentinel at `at` and waits
// until a query at `at` finds it: a barrier for a test that must show that
// something sent before it was not stored. VictoriaMetrics makes the rows
// of all commits searchable in one periodic flush (about a second), so
// once the sentinel is found, a sample committed before it is too.
func writeSentinel(t *testing.T, p *proc, at time.Time) {
	t.Helper()
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "e2e_sentinel"}},
		Samples: []prompb.Sample{{Timestamp: at.UnixMilli(), Value: 1}},
	}}}
	code, body := p.post("/api/v1/write", "application/x-protobuf", remoteWriteBody(t, req), rwHeaders)
	require.Equal(t, http.StatusNoContent, code, body)
	eventually(t, 20*time.Second, "the sentinel sample queryable", func() bool {
		return len(p.instant(`e2e_sentinel`, at)) == 1
	})
}
