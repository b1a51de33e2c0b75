package histconv

import (
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// recorder is the sink the converted series are written to: the last
// value per series, and the exemplars per series.
type recorder struct {
	samples   map[string]float64
	exemplars map[string][]exemplar.Exemplar
	order     []string
}

func newRecorder() *recorder {
	return &recorder{samples: map[string]float64{}, exemplars: map[string][]exemplar.Exemplar{}}
}

func (r *recorder) Append(ref storage.SeriesRef, ls labels.Labels, _, _ int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AOptions) (storage.SeriesRef, error) {
	if h != nil || fh != nil {
		return 0, storage.ErrNativeHistogramsDisabled
	}
	r.samples[ls.String()] = v
	r.order = append(r.order, ls.String())
	r.exemplars[ls.String()] = append(r.exemplars[ls.String()], opts.Exemplars...)
	return 1, nil
}

func (r *recorder) AppendExemplars(ref storage.SeriesRef, ls labels.Labels, es []exemplar.Exemplar) (storage.SeriesRef, error) {
	r.exemplars[ls.String()] = append(r.exemplars[ls.String()], es...)
	return ref, nil
}
func (*recorder) Commit() error   { return nil }
func (*recorder) Rollback() error { return nil }

// buckets returns the le values and cumulative counts of name's _bucket
// series, in the order written.
func (r *recorder) buckets(name string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range r.samples {
		if strings.HasPrefix(k, `{__name__="`+name+`_bucket"`) {
			i := strings.Index(k, `le="`)
			le := k[i+4:]
			out[le[:strings.IndexByte(le, '"')]] = v
		}
	}
	return out
}

var job = labels.FromStrings("__name__", "lat", "job", "j")

// schema0 has buckets (2^(i-1), 2^i]: 2 in (0.5,1], 3 in (1,2], 2 in
// (8,16], 1 in the zero bucket [-0.001,0.001].
func schema0() *histogram.Histogram {
	return &histogram.Histogram{
		Schema: 0, ZeroThreshold: 0.001, ZeroCount: 1, Count: 8, Sum: 42,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}, {Offset: 2, Length: 1}},
		PositiveBuckets: []int64{2, 1, -1},
	}
}

func TestConvertExponential(t *testing.T) {
	c := New(Options{Registerer: prometheus.NewRegistry()})
	rec := newRecorder()
	app := c.Appender(rec)
	ref, err := app.Append(0, job, 0, 1000, 0, schema0(), nil, storage.AOptions{})
	require.NoError(t, err)
	require.NotZero(t, ref, "the scrape loop tracks staleness only for a non-zero ref")
	require.Equal(t, map[string]float64{
		"-0.001": 0, "0.001": 1, "0.5": 1, "1.0": 3, "2.0": 6, "8.0": 6, "16.0": 8, "+Inf": 8,
	}, rec.buckets("lat"))
	require.Equal(t, 8.0, rec.samples[`{__name__="lat_count", job="j"}`])
	require.Equal(t, 42.0, rec.samples[`{__name__="lat_sum", job="j"}`])
	require.Equal(t, 1.0, testutil.ToFloat64(c.converted))

	// The float form converts the same.
	rec2 := newRecorder()
	_, err = c.Appender(rec2).Append(0, labels.FromStrings("__name__", "lat2"), 0, 1000, 0, nil, schema0().ToFloat(nil), storage.AOptions{})
	require.NoError(t, err)
	require.Len(t, rec2.buckets("lat2"), 8)
}

// A gauge histogram whose bucket empties keeps that bound: the _bucket
// series does not end.
func TestConvertKeepsBounds(t *testing.T) {
	c := New(Options{})
	rec := newRecorder()
	app := c.Appender(rec)
	_, err := app.Append(0, job, 0, 1000, 0, schema0(), nil, storage.AOptions{})
	require.NoError(t, err)
	h := &histogram.Histogram{
		Schema: 0, ZeroThreshold: 0.001, Count: 3, Sum: 3,
		PositiveSpans:   []histogram.Span{{Offset: 1, Length: 1}},
		PositiveBuckets: []int64{3},
	}
	rec = newRecorder()
	_, err = c.Appender(rec).Append(0, job, 0, 2000, 0, h, nil, storage.AOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]float64{
		"-0.001": 0, "0.001": 0, "0.5": 0, "1.0": 0, "2.0": 3, "8.0": 3, "16.0": 3, "+Inf": 3,
	}, rec.buckets("lat"))

	// A schema change restarts from the new schema's bounds.
	h2 := &histogram.Histogram{
		Schema: -1, ZeroThreshold: 0.001, Count: 3, Sum: 3,
		PositiveSpans:   []histogram.Span{{Offset: 1, Length: 1}},
		PositiveBuckets: []int64{3},
	}
	rec = newRecorder()
	_, err = c.Appender(rec).Append(0, job, 0, 3000, 0, h2, nil, storage.AOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"1.0": 0, "4.0": 3, "+Inf": 3}, rec.buckets("lat"))
}

func TestConvertCustomBuckets(t *testing.T) {
	c := New(Options{})
	rec := newRecorder()
	fh := &histogram.FloatHistogram{
		Schema: histogram.CustomBucketsSchema, Count: 6, Sum: 10,
		CustomValues:    []float64{0.1, 0.5, 1, 5},
		PositiveSpans:   []histogram.Span{{Offset: 1, Length: 2}, {Offset: 1, Length: 1}},
		PositiveBuckets: []float64{2, 3, 1},
	}
	_, err := c.Appender(rec).Append(0, job, 0, 1000, 0, nil, fh, storage.AOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"0.1": 0, "0.5": 2, "1.0": 5, "5.0": 5, "+Inf": 6}, rec.buckets("lat"))
	require.Equal(t, 6.0, rec.samples[`{__name__="lat_count", job="j"}`])
}

// One bad histogram is dropped and counted; the samples around it are
// stored and the appender returns no error.
func TestConvertDropsInvalid(t *testing.T) {
	c := New(Options{})
	rec := newRecorder()
	app := c.Appender(rec)
	bad := &histogram.Histogram{Schema: 0, Count: 1, PositiveSpans: []histogram.Span{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{1}}
	_, err := app.Append(0, labels.FromStrings("__name__", "up"), 0, 1000, 1, nil, nil, storage.AOptions{})
	require.NoError(t, err)
	_, err = app.Append(0, job, 0, 1000, 0, bad, nil, storage.AOptions{})
	require.NoError(t, err)
	_, err = app.Append(0, labels.FromStrings("__name__", "up2"), 0, 1000, 1, nil, nil, storage.AOptions{})
	require.NoError(t, err)
	require.Len(t, rec.samples, 2)
	n, first := app.Dropped()
	require.Equal(t, 1, n)
	require.ErrorContains(t, first, `series {__name__="lat", job="j"}`)
	require.Equal(t, 1.0, testutil.ToFloat64(c.dropped.WithLabelValues(ReasonInvalid)))
}

// The float stale marker the scrape loop writes for a vanished native
// series becomes stale markers for all its classic series.
func TestConvertStale(t *testing.T) {
	c := New(Options{})
	rec := newRecorder()
	app := c.Appender(rec)
	_, err := app.Append(0, job, 0, 1000, 0, schema0(), nil, storage.AOptions{})
	require.NoError(t, err)
	rec = newRecorder()
	app = c.Appender(rec)
	_, err = app.Append(0, job, 0, 2000, math.Float64frombits(value.StaleNaN), nil, nil, storage.AOptions{})
	require.NoError(t, err)
	require.Len(t, rec.samples, 10) // 8 buckets, _count, _sum
	for k, v := range rec.samples {
		require.True(t, value.IsStaleNaN(v), k)
	}
	require.False(t, c.Known(job.Hash()))
}

// More bounds than MaxBuckets lower the resolution until they fit, and
// the series stays at the lowered schema.
func TestConvertTooManyBuckets(t *testing.T) {
	c := New(Options{MaxBuckets: 10})
	rec := newRecorder()
	deltas := make([]int64, 40)
	deltas[0] = 1
	h := &histogram.Histogram{Schema: 3, Count: 40, Sum: 1, PositiveSpans: []histogram.Span{{Offset: 0, Length: 40}}, PositiveBuckets: deltas}
	_, err := c.Appender(rec).Append(0, job, 0, 1000, 0, h, nil, storage.AOptions{})
	require.NoError(t, err)
	b := rec.buckets("lat")
	require.LessOrEqual(t, len(b), 11)
	require.Equal(t, 40.0, b["+Inf"])
	// Buckets 0..39 at schema 3 have upper bounds 2^(i/8); at schema 0
	// the bounds are powers of two and the counts there exact.
	require.Equal(t, 1.0, b["1.0"])
	require.Equal(t, 9.0, b["2.0"])
	require.Equal(t, 33.0, b["16.0"])
}

func TestConvertExemplars(t *testing.T) {
	c := New(Options{})
	rec := newRecorder()
	app := c.Appender(rec)
	ex := []exemplar.Exemplar{
		{Labels: labels.FromStrings("trace_id", "a"), Value: 1.5, Ts: 900, HasTs: true},
		{Labels: labels.FromStrings("trace_id", "b"), Value: 12, Ts: 950, HasTs: true},
	}
	_, err := app.Append(0, job, 0, 1000, 0, schema0(), nil, storage.AOptions{Exemplars: ex})
	require.NoError(t, err)
	require.Equal(t, "a", rec.exemplars[`{__name__="lat_bucket", job="j", le="2.0"}`][0].Labels.Get("trace_id"))
	require.Equal(t, "b", rec.exemplars[`{__name__="lat_bucket", job="j", le="16.0"}`][0].Labels.Get("trace_id"))

	// Remote write passes them after the histogram, under its labels.
	rec.exemplars = map[string][]exemplar.Exemplar{}
	_, err = app.AppendExemplars(0, job, ex[:1])
	require.NoError(t, err)
	require.Len(t, rec.exemplars[`{__name__="lat_bucket", job="j", le="2.0"}`], 1)
}
