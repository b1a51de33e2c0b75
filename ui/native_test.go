package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/internal/exemplars"
)

// nativeHist has, at schema 0, 2 observations in (0.5,1], 3 in (1,2] and
// 2 in (8,16].
func nativeHist() *histogram.Histogram {
	return &histogram.Histogram{
		Schema: 0, ZeroThreshold: 1e-9, Count: 7, Sum: 30,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 2, Length: 1}},
		PositiveBuckets: []int64{2, 1, -1},
	}
}

func badHist() *histogram.Histogram {
	return &histogram.Histogram{Schema: 0, Count: 1, PositiveSpans: []histogram.Span{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{1}}
}

func (ts *testServer) remoteWriteV1(req *prompb.WriteRequest) (int, string) {
	ts.t.Helper()
	raw, err := req.Marshal()
	require.NoError(ts.t, err)
	r := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	r.Header.Set("Content-Type", "application/x-protobuf")
	r.Header.Set("Content-Encoding", "snappy")
	r.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	return ts.do(r)
}

func (ts *testServer) queryAt(q string, at time.Time) (float64, bool) {
	ts.t.Helper()
	code, body := ts.get("/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatInt(at.Unix(), 10)}}.Encode())
	require.Equal(ts.t, http.StatusOK, code, body)
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	require.NoError(ts.t, json.Unmarshal(decode(ts.t.(*testing.T), body).Data, &data))
	if len(data.Result) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(data.Result[0].Value[1].(string), 64)
	require.NoError(ts.t, err)
	return v, true
}

// A remote-write 1.0 request with a float series, a native histogram and
// an invalid native histogram stores the first two (the histogram as
// classic series) and answers 204; one with only the invalid histogram is
// refused with 400 naming it.
func TestRemoteWriteNativeHistogramV1(t *testing.T) {
	ex, err := exemplars.New(exemplars.Options{MaxExemplars: 100})
	require.NoError(t, err)
	ts := newTestServer(t, func(o *Options) { o.Exemplars = ex; o.Registerer = prometheus.NewRegistry() })
	now := time.Now().Truncate(time.Second)
	ms := now.UnixMilli()
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "a"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: ms}}},
		{
			Labels:     []prompb.Label{{Name: "__name__", Value: "lat_seconds"}, {Name: "job", Value: "a"}},
			Histograms: []prompb.Histogram{prompb.FromIntHistogram(ms, nativeHist())},
			Exemplars:  []prompb.Exemplar{{Labels: []prompb.Label{{Name: "trace_id", Value: "abc"}}, Value: 1.5, Timestamp: ms}},
		},
		{Labels: []prompb.Label{{Name: "__name__", Value: "broken"}}, Histograms: []prompb.Histogram{prompb.FromIntHistogram(ms, badHist())}},
	}}
	code, body := ts.remoteWriteV1(req)
	require.Equal(t, http.StatusNoContent, code, body)
	ts.db.Flush()

	v, ok := ts.queryAt(`up`, now)
	require.True(t, ok)
	require.Equal(t, 1.0, v)
	v, ok = ts.queryAt(`lat_seconds_count`, now)
	require.True(t, ok)
	require.Equal(t, 7.0, v)
	v, ok = ts.queryAt(`lat_seconds_bucket{le="2.0"}`, now)
	require.True(t, ok)
	require.Equal(t, 5.0, v)
	// The median (rank 3.5) is in (1,2]: 1 + (3.5-2)/3 = 1.5.
	v, ok = ts.queryAt(`histogram_quantile(0.5, lat_seconds_bucket)`, now)
	require.True(t, ok)
	require.InDelta(t, 1.5, v, 1e-9)
	_, ok = ts.queryAt(`{__name__=~"broken.*"}`, now)
	require.False(t, ok)

	// The exemplar went to the bucket holding its value.
	code, body = ts.get("/api/v1/query_exemplars?" + url.Values{"query": {`lat_seconds_bucket`}, "start": {strconv.FormatInt(now.Unix()-60, 10)}, "end": {strconv.FormatInt(now.Unix()+60, 10)}}.Encode())
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"le":"2.0"`)
	require.Contains(t, body, `"trace_id":"abc"`)

	code, body = ts.remoteWriteV1(&prompb.WriteRequest{Timeseries: req.Timeseries[2:]})
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "native histogram")
	require.Contains(t, body, `broken`)
}

// Remote write 2.0 with integer and float histograms, and one of the
// custom-buckets schema.
func TestRemoteWriteNativeHistogramV2(t *testing.T) {
	ts := newTestServer(t, nil)
	now := time.Now().Truncate(time.Second)
	ms := now.UnixMilli()
	st := writev2.NewSymbolTable()
	series := func(name string, h writev2.Histogram) writev2.TimeSeries {
		return writev2.TimeSeries{
			LabelsRefs: st.SymbolizeLabels(labels.FromStrings("__name__", name, "job", "b"), nil),
			Histograms: []writev2.Histogram{h},
			Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM},
		}
	}
	nhcb := &histogram.FloatHistogram{
		Schema: histogram.CustomBucketsSchema, Count: 6, Sum: 10, CustomValues: []float64{0.1, 0.5, 1},
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 4}}, PositiveBuckets: []float64{1, 2, 0, 3},
	}
	req := &writev2.Request{Timeseries: []writev2.TimeSeries{
		series("int_h", writev2.FromIntHistogram(0, ms, nativeHist())),
		series("float_h", writev2.FromFloatHistogram(0, ms, nativeHist().ToFloat(nil))),
		series("nhcb_h", writev2.FromFloatHistogram(0, ms, nhcb)),
		series("bad_h", writev2.FromIntHistogram(0, ms, badHist())),
	}}
	req.Symbols = st.Symbols()
	raw, err := req.Marshal()
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	r.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
	r.Header.Set("Content-Encoding", "snappy")
	r.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	code, body := ts.do(r)
	require.Equal(t, http.StatusNoContent, code, body)
	ts.db.Flush()
	for _, name := range []string{"int_h", "float_h"} {
		v, ok := ts.queryAt(fmt.Sprintf(`histogram_quantile(0.5, %s_bucket)`, name), now)
		require.True(t, ok, name)
		require.InDelta(t, 1.5, v, 1e-9, name)
	}
	v, ok := ts.queryAt(`nhcb_h_bucket{le="1.0"}`, now)
	require.True(t, ok)
	require.Equal(t, 3.0, v)
	v, ok = ts.queryAt(`nhcb_h_bucket{le="+Inf"}`, now)
	require.True(t, ok)
	require.Equal(t, 6.0, v)
}

// Without exemplars, query_exemplars answers [] as Prometheus does.
func TestQueryExemplarsEmpty(t *testing.T) {
	ts := newTestServer(t, nil)
	code, body := ts.get("/api/v1/query_exemplars?query=up&start=0&end=100")
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"status":"success","data":[]}`, body)
}
