package storage

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	vmlogger "github.com/VictoriaMetrics/VictoriaMetrics/lib/logger"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql/parser"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"
)

// sample is a float sample as tests write and read it.
type sample struct {
	t int64
	v float64
}

// baseTime is a minute boundary an hour ago: inside retention, and the same
// UTC day as now for most of the day (Stats is per day).
var baseTime = time.Now().Add(-time.Hour).Truncate(time.Minute).UnixMilli()

func openTestDB(t testing.TB, dir string, reg prometheus.Registerer) *DB {
	t.Helper()
	opts := DefaultOptions()
	opts.Path = dir
	opts.Registerer = reg
	db, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// appendSamples commits samples for each label set through AppenderV2.
func appendSamples(t testing.TB, db *DB, data map[string][]sample) {
	t.Helper()
	app := db.AppenderV2(context.Background())
	for series, samples := range data {
		ls := mustParse(t, series)
		var ref promstorage.SeriesRef
		for _, s := range samples {
			var err error
			ref, err = app.Append(ref, ls, 0, s.t, s.v, nil, nil, promstorage.AOptions{})
			require.NoError(t, err)
			require.NotZero(t, ref)
		}
	}
	require.NoError(t, app.Commit())
}

func mustParse(t testing.TB, s string) labels.Labels {
	t.Helper()
	m, err := parseSeries(s)
	require.NoError(t, err)
	return m
}

// parseSeries parses `name{a="b",c="d"}`.
func parseSeries(s string) (labels.Labels, error) {
	ms, err := parseMatchers(s)
	if err != nil {
		return labels.EmptyLabels(), err
	}
	b := labels.NewScratchBuilder(len(ms))
	for _, m := range ms {
		b.Add(m.Name, m.Value)
	}
	b.Sort()
	return b.Labels(), nil
}

// selectAll runs Select and returns series text -> samples.
func selectAll(t testing.TB, db *DB, mint, maxt int64, hints *promstorage.SelectHints, ms ...*labels.Matcher) ([]string, map[string][]sample) {
	t.Helper()
	q, err := db.Querier(mint, maxt)
	require.NoError(t, err)
	defer q.Close()
	ss := q.Select(context.Background(), true, hints, ms...)
	var order []string
	out := map[string][]sample{}
	var it chunkenc.Iterator
	for ss.Next() {
		s := ss.At()
		key := s.Labels().String()
		order = append(order, key)
		it = s.Iterator(it)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			out[key] = append(out[key], sample{ts, v})
		}
		require.NoError(t, it.Err())
	}
	require.NoError(t, ss.Err())
	return order, out
}

func requireSamples(t testing.TB, want, got []sample) {
	t.Helper()
	require.Len(t, got, len(want), "got %v", got)
	for i := range want {
		require.Equal(t, want[i].t, got[i].t, "sample %d", i)
		w, g := want[i].v, got[i].v
		switch {
		case value.IsStaleNaN(w):
			require.True(t, value.IsStaleNaN(g), "sample %d: want StaleNaN, got %v", i, g)
		case math.IsInf(w, 0) || w == 0:
			require.Equal(t, w, g, "sample %d", i)
		default:
			require.InEpsilon(t, w, g, 1e-12, "sample %d", i)
		}
	}
}

func samplesOf(n int, start, step int64, f func(i int) float64) []sample {
	out := make([]sample, n)
	for i := range out {
		out[i] = sample{start + int64(i)*step, f(i)}
	}
	return out
}

func TestSelectMatchers(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	data := map[string][]sample{
		`http_requests_total{job="api",instance="a:1",code="200"}`: samplesOf(10, baseTime, 15000, func(i int) float64 { return float64(i) * 1.5 }),
		`http_requests_total{job="api",instance="a:1",code="500"}`: samplesOf(10, baseTime, 15000, func(i int) float64 { return 0.1 + float64(i) }),
		`http_requests_total{job="web",instance="b:1"}`:            samplesOf(5, baseTime, 30000, func(i int) float64 { return 123456.789012345 * float64(i+1) }),
		`node_load1{job="node",instance="c:1"}`:                    samplesOf(3, baseTime, 60000, func(i int) float64 { return 1e-9 * float64(i+1) }),
		`up{job="api",instance="a:1"}`:                             samplesOf(2, baseTime, 15000, func(int) float64 { return 1 }),
	}
	appendSamples(t, db, data)
	db.Flush()

	f := func(matchers string, want ...string) {
		t.Helper()
		ms, err := parseMatchers(matchers)
		require.NoError(t, err)
		order, got := selectAll(t, db, baseTime, baseTime+time.Hour.Milliseconds(), nil, ms...)
		wantKeys := make([]string, len(want))
		for i, w := range want {
			wantKeys[i] = mustParse(t, w).String()
		}
		if len(want) == 0 {
			require.Empty(t, order, "matchers %s", matchers)
			return
		}
		require.Equal(t, wantKeys, order, "matchers %s", matchers)
		for i, w := range want {
			requireSamples(t, data[w], got[wantKeys[i]])
		}
	}
	f(`http_requests_total{code="200"}`, `http_requests_total{job="api",instance="a:1",code="200"}`)
	f(`http_requests_total{code!="200"}`,
		`http_requests_total{job="api",instance="a:1",code="500"}`,
		`http_requests_total{job="web",instance="b:1"}`)
	// Empty value: matches series without the label.
	f(`http_requests_total{code=""}`, `http_requests_total{job="web",instance="b:1"}`)
	f(`{__name__="http_requests_total",code!=""}`,
		`http_requests_total{job="api",instance="a:1",code="200"}`,
		`http_requests_total{job="api",instance="a:1",code="500"}`)
	// Regexps are anchored.
	f(`{__name__=~"http_.*",code=~"5.."}`, `http_requests_total{job="api",instance="a:1",code="500"}`)
	f(`{__name__=~"http"}`)
	f(`{__name__=~"node_load1|up"}`, `node_load1{job="node",instance="c:1"}`, `up{job="api",instance="a:1"}`)
	f(`{job="api",__name__!~"http.*"}`, `up{job="api",instance="a:1"}`)
	// A regexp that matches the empty string also matches a missing label.
	f(`http_requests_total{code=~"200|"}`,
		`http_requests_total{job="api",instance="a:1",code="200"}`,
		`http_requests_total{job="web",instance="b:1"}`)
	f(`http_requests_total{code!~"2.*|"}`, `http_requests_total{job="api",instance="a:1",code="500"}`)
	f(`{job=~".+"}`,
		`http_requests_total{job="api",instance="a:1",code="200"}`,
		`http_requests_total{job="api",instance="a:1",code="500"}`,
		`http_requests_total{job="web",instance="b:1"}`,
		`node_load1{job="node",instance="c:1"}`,
		`up{job="api",instance="a:1"}`)
	f(`nonexistent`)
}

func TestSelectTimeRangeAndHints(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	data := map[string][]sample{
		`m{i="1"}`: samplesOf(60, baseTime, 10000, func(i int) float64 { return float64(i) }),
		`m{i="2"}`: samplesOf(60, baseTime, 10000, func(i int) float64 { return -float64(i) }),
	}
	appendSamples(t, db, data)
	db.Flush()
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")}

	// The querier's range is inclusive at both ends.
	_, got := selectAll(t, db, baseTime+100000, baseTime+200000, nil, ms...)
	requireSamples(t, data[`m{i="1"}`][10:21], got[`{__name__="m", i="1"}`])

	// Hints narrow the range further.
	hints := &promstorage.SelectHints{Start: baseTime + 150000, End: baseTime + 160000}
	_, got = selectAll(t, db, baseTime, baseTime+time.Hour.Milliseconds(), hints, ms...)
	requireSamples(t, data[`m{i="2"}`][15:17], got[`{__name__="m", i="2"}`])

	// The extreme range of Prometheus' API defaults works.
	_, got = selectAll(t, db, math.MinInt64, math.MaxInt64, nil, ms...)
	requireSamples(t, data[`m{i="1"}`], got[`{__name__="m", i="1"}`])
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	require.NoError(t, err)
	values, _, err := q.LabelValues(context.Background(), "i", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2"}, values)

	// Func "series" returns labels without samples.
	order, got := selectAll(t, db, baseTime, baseTime+time.Hour.Milliseconds(), &promstorage.SelectHints{Func: "series"}, ms...)
	require.Equal(t, []string{`{__name__="m", i="1"}`, `{__name__="m", i="2"}`}, order)
	require.Empty(t, got)

	// Limit keeps the first series in label order.
	order, _ = selectAll(t, db, baseTime, baseTime+time.Hour.Milliseconds(), &promstorage.SelectHints{Limit: 1, Func: "series"}, ms...)
	require.Equal(t, []string{`{__name__="m", i="1"}`}, order)
}

func TestSelectMergesBlocksAndDuplicates(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	// Three commits, flushed separately so they land in different parts,
	// out of order and overlapping.
	appendSamples(t, db, map[string][]sample{`m`: {{baseTime + 20000, 2}, {baseTime + 30000, 3}}})
	db.Flush()
	appendSamples(t, db, map[string][]sample{`m`: {{baseTime, 0}, {baseTime + 10000, 1}, {baseTime + 20000, 2}}})
	db.Flush()
	appendSamples(t, db, map[string][]sample{`m`: {{baseTime + 30000, 3}, {baseTime + 40000, 4}, {baseTime + 40000, 4}}})
	db.Flush()
	_, got := selectAll(t, db, baseTime, baseTime+60000, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	requireSamples(t, samplesOf(5, baseTime, 10000, func(i int) float64 { return float64(i) }), got[`{__name__="m"}`])
}

func TestStalenessMarkerAndSpecialValues(t *testing.T) {
	reg := prometheus.NewRegistry()
	db := openTestDB(t, t.TempDir(), reg)
	stale := math.Float64frombits(value.StaleNaN)
	app := db.AppenderV2(context.Background())
	ls := labels.FromStrings("__name__", "m")
	for i, v := range []float64{1, stale, math.Inf(1), math.NaN(), math.Inf(-1), -0.000123456789012, 150.25} {
		_, err := app.Append(0, ls, 0, baseTime+int64(i)*1000, v, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	db.Flush()
	_, got := selectAll(t, db, baseTime, baseTime+10000, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	// The plain NaN at +3s is dropped: VictoriaMetrics cannot store it.
	requireSamples(t, []sample{
		{baseTime, 1}, {baseTime + 1000, stale}, {baseTime + 2000, math.Inf(1)},
		{baseTime + 4000, math.Inf(-1)}, {baseTime + 5000, -0.000123456789012}, {baseTime + 6000, 150.25},
	}, got[`{__name__="m"}`])
	require.Equal(t, 1.0, testutil.ToFloat64(db.metrics.appendErrorsBy[reasonNaN]))
	require.Equal(t, 6.0, testutil.ToFloat64(db.metrics.samplesAppended))
}

func TestAppendErrors(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	app := db.AppenderV2(context.Background())
	ls := labels.FromStrings("__name__", "m")
	now := time.Now().UnixMilli()

	_, err := app.Append(0, ls, 0, now-91*24*time.Hour.Milliseconds(), 1, nil, nil, promstorage.AOptions{})
	require.ErrorIs(t, err, promstorage.ErrOutOfBounds)
	_, err = app.Append(0, ls, 0, now+3*24*time.Hour.Milliseconds(), 1, nil, nil, promstorage.AOptions{})
	require.ErrorIs(t, err, promstorage.ErrOutOfBounds)
	_, err = app.Append(0, ls, 0, now, 0, &histogram.Histogram{}, nil, promstorage.AOptions{})
	require.ErrorIs(t, err, promstorage.ErrNativeHistogramsDisabled)
	_, err = app.Append(0, labels.EmptyLabels(), 0, now, 1, nil, nil, promstorage.AOptions{})
	require.ErrorIs(t, err, errNoLabels)
	_, err = app.Append(0, ls, 0, now, 1, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NoError(t, app.Commit())

	v1 := db.Appender(context.Background())
	_, err = v1.AppendHistogram(0, ls, now, nil, &histogram.FloatHistogram{})
	require.ErrorIs(t, err, promstorage.ErrNativeHistogramsDisabled)
	require.NoError(t, v1.Rollback())

	require.Equal(t, 2.0, testutil.ToFloat64(db.metrics.appendErrorsBy[reasonOutOfBounds]))
	require.Equal(t, 2.0, testutil.ToFloat64(db.metrics.appendErrorsBy[reasonNativeHistogram]))
	require.Equal(t, 1.0, testutil.ToFloat64(db.metrics.samplesAppended))
}

func TestSeriesRefs(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	a := labels.FromStrings("__name__", "m", "i", "a")
	b := labels.FromStrings("__name__", "m", "i", "b")
	app := db.AppenderV2(context.Background())
	refA, err := app.Append(0, a, 0, baseTime, 1, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	refB, err := app.Append(0, b, 0, baseTime, 2, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NotZero(t, refA)
	require.NotEqual(t, refA, refB)
	// The scrape loop passes refs back; the same labels give the same ref.
	ref, err := app.Append(refA, a, 0, baseTime+1000, 3, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.Equal(t, refA, ref)
	ref, err = app.Append(0, b, 0, baseTime+1000, 4, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.Equal(t, refB, ref)
	// An unknown ref is resolved from the labels.
	ref, err = app.Append(12345, b, 0, baseTime+2000, 5, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.Equal(t, refB, ref)
	require.NoError(t, app.Commit())
	db.Flush()
	_, got := selectAll(t, db, baseTime, baseTime+10000, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	requireSamples(t, []sample{{baseTime, 1}, {baseTime + 1000, 3}}, got[`{__name__="m", i="a"}`])
	requireSamples(t, []sample{{baseTime, 2}, {baseTime + 1000, 4}, {baseTime + 2000, 5}}, got[`{__name__="m", i="b"}`])
}

func TestSeriesCacheCollision(t *testing.T) {
	c := newSeriesCache(10)
	a := labels.FromStrings("__name__", "a")
	b := labels.FromStrings("__name__", "b")
	refA, rawA, _, err := c.resolve(a, nil)
	require.NoError(t, err)
	// Plant b's name under a's hash, as a hash collision would.
	rawB, err := marshalRawName(nil, b)
	require.NoError(t, err)
	sh := &c.shards[refA%seriesCacheShards]
	sh.curr[refA] = &seriesEntry{raw: rawB}
	ref, raw, _, err := c.resolve(a, nil)
	require.NoError(t, err)
	require.NotEqual(t, refA, ref)
	require.Equal(t, rawA, raw)
	ref2, _, _, err := c.resolve(a, nil)
	require.NoError(t, err)
	require.Equal(t, ref, ref2, "a colliding label set keeps its ref")
}

func TestRollbackWritesNothing(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	app := db.AppenderV2(context.Background())
	_, err := app.Append(0, labels.FromStrings("__name__", "m"), 0, baseTime, 1, nil, nil,
		promstorage.AOptions{Metadata: metadata.Metadata{Type: model.MetricTypeGauge, Help: "h"}})
	require.NoError(t, err)
	require.NoError(t, app.Rollback())
	db.Flush()
	order, _ := selectAll(t, db, baseTime-1000, baseTime+1000, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	require.Empty(t, order)
	require.Empty(t, db.Metadata("", 0, 0))
}

func TestLabelNamesAndValues(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	appendSamples(t, db, map[string][]sample{
		`a{job="x",zone="eu"}`:  {{baseTime, 1}},
		`a{job="y",zone="us"}`:  {{baseTime, 1}},
		`b{job="x",disk="sda"}`: {{baseTime, 1}},
	})
	db.Flush()
	q, err := db.Querier(baseTime-60000, baseTime+60000)
	require.NoError(t, err)
	defer q.Close()
	ctx := context.Background()
	eq := func(n, v string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchEqual, n, v) }

	names, _, err := q.LabelNames(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"__name__", "disk", "job", "zone"}, names)
	names, _, err = q.LabelNames(ctx, nil, eq("__name__", "a"))
	require.NoError(t, err)
	require.Equal(t, []string{"__name__", "job", "zone"}, names)
	names, _, err = q.LabelNames(ctx, &promstorage.LabelHints{Limit: 2})
	require.NoError(t, err)
	require.Len(t, names, 2)

	values, _, err := q.LabelValues(ctx, "job", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"x", "y"}, values)
	values, _, err = q.LabelValues(ctx, "zone", nil, eq("job", "x"))
	require.NoError(t, err)
	require.Equal(t, []string{"eu"}, values)
	values, _, err = q.LabelValues(ctx, "__name__", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, values)
	values, _, err = q.LabelValues(ctx, "__name__", &promstorage.LabelHints{Limit: 1, LimitSmallest: true})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, values)
	values, _, err = q.LabelValues(ctx, "job", nil, labels.MustNewMatcher(labels.MatchRegexp, "zone", "u.*"))
	require.NoError(t, err)
	require.Equal(t, []string{"y"}, values)
}

func TestMetadataPersists(t *testing.T) {
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Path = dir
	db, err := Open(opts)
	require.NoError(t, err)

	gauge := metadata.Metadata{Type: model.MetricTypeGauge, Help: "Load.", Unit: ""}
	hist := metadata.Metadata{Type: model.MetricTypeHistogram, Help: "Latency.", Unit: "seconds"}
	counter := metadata.Metadata{Type: model.MetricTypeCounter, Help: "Requests."}

	app := db.AppenderV2(context.Background())
	_, err = app.Append(0, labels.FromStrings("__name__", "load"), 0, baseTime, 1, nil, nil, promstorage.AOptions{Metadata: gauge})
	require.NoError(t, err)
	// Without MetricFamilyName the family is derived from the name.
	_, err = app.Append(0, labels.FromStrings("__name__", "lat_bucket", "le", "1"), 0, baseTime, 1, nil, nil, promstorage.AOptions{Metadata: hist})
	require.NoError(t, err)
	_, err = app.Append(0, labels.FromStrings("__name__", "lat_sum"), 0, baseTime, 1, nil, nil, promstorage.AOptions{Metadata: hist, MetricFamilyName: "lat"})
	require.NoError(t, err)
	require.NoError(t, app.Commit())

	v1 := db.Appender(context.Background())
	_, err = v1.UpdateMetadata(0, labels.FromStrings("__name__", "reqs_total"), counter)
	require.NoError(t, err)
	require.NoError(t, v1.Commit())

	db.SetMetadata("imported", metadata.Metadata{Type: model.MetricTypeUnknown, Help: "From text."})
	want := map[string][]metadata.Metadata{
		"load":       {gauge},
		"lat":        {hist},
		"reqs_total": {counter},
		"imported":   {{Type: model.MetricTypeUnknown, Help: "From text."}},
	}
	require.Equal(t, want, db.Metadata("", 0, 0))
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "Close twice")

	db = openTestDB(t, dir, nil)
	require.Equal(t, want, db.Metadata("", 0, 0))
	require.Equal(t, map[string][]metadata.Metadata{"lat": {hist}}, db.Metadata("lat", 0, 0))
	require.Len(t, db.Metadata("", 2, 0), 2)
	require.Empty(t, db.Metadata("nope", 0, 0))

	// A second variant is kept next to the first, newest first.
	gauge2 := metadata.Metadata{Type: model.MetricTypeGauge, Help: "Load average."}
	db.SetMetadata("load", gauge2)
	require.Equal(t, []metadata.Metadata{gauge2, gauge}, db.Metadata("load", 0, 0)["load"])
	require.Equal(t, []metadata.Metadata{gauge2}, db.Metadata("load", 0, 1)["load"])
}

func TestReopenKeepsEverySeries(t *testing.T) {
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Path = dir
	db, err := Open(opts)
	require.NoError(t, err)
	data := map[string][]sample{}
	for i := range 200 {
		data[`reopen{i="`+itoa(i%26)+`",n="`+itoa(i)+`"}`] = samplesOf(20, baseTime, 15000, func(j int) float64 { return float64(i*1000 + j) })
	}
	appendSamples(t, db, data)
	require.NoError(t, db.Close()) // no Flush: Close must persist everything

	db = openTestDB(t, dir, nil)
	order, got := selectAll(t, db, baseTime, baseTime+time.Hour.Milliseconds(), nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "reopen"))
	require.Len(t, order, len(data))
	for s, want := range data {
		requireSamples(t, want, got[mustParse(t, s).String()])
	}
}

func TestStats(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	now := time.Now().UnixMilli()
	data := map[string][]sample{}
	for i := range 5 {
		data[`big{i="`+itoa(i)+`"}`] = []sample{{now - 1000, 1}}
	}
	for i := range 3 {
		data[`mid{i="`+itoa(i)+`"}`] = []sample{{now - 1000, 1}}
	}
	data[`small`] = []sample{{now - 2000, 1}}
	appendSamples(t, db, data)
	db.Flush()

	st, err := db.Stats(labels.MetricName, 2)
	require.NoError(t, err)
	require.Equal(t, uint64(9), st.NumSeries)
	require.Equal(t, now-2000, st.MinTime)
	require.Equal(t, now-1000, st.MaxTime)
	ps := st.IndexPostingStats
	require.Equal(t, "big", ps.CardinalityMetricsStats[0].Name)
	require.Equal(t, uint64(5), ps.CardinalityMetricsStats[0].Count)
	require.Equal(t, "mid", ps.CardinalityMetricsStats[1].Name)
	require.Len(t, ps.CardinalityMetricsStats, 2)
	// Label value counts: i has 5 values, __name__ 3.
	require.Equal(t, "i", ps.CardinalityLabelStats[0].Name)
	require.Equal(t, uint64(5), ps.CardinalityLabelStats[0].Count)
	require.Equal(t, 8, ps.NumLabelPairs) // __name__ x3 + i x5
	require.Equal(t, "__name__=big", ps.LabelValuePairsStats[0].Name)

	st, err = db.Stats("i", 10)
	require.NoError(t, err)
	require.Equal(t, "0", st.IndexPostingStats.CardinalityMetricsStats[0].Name)
	require.Equal(t, uint64(2), st.IndexPostingStats.CardinalityMetricsStats[0].Count)

	require.Equal(t, 9, db.ActiveSeries())
}

func TestDelete(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	appendSamples(t, db, map[string][]sample{`a{x="1"}`: {{baseTime, 1}}, `a{x="2"}`: {{baseTime, 2}}})
	db.Flush()
	// Committed since the last flush: in the head, deleted there too.
	appendSamples(t, db, map[string][]sample{`a{x="1"}`: {{baseTime + 1, 1}}, `a{x="2"}`: {{baseTime + 1, 2}}})
	m := labels.MustNewMatcher(labels.MatchEqual, "x", "1")
	require.ErrorIs(t, db.Delete(context.Background(), baseTime, baseTime+1, m), ErrNotSupported)
	require.NoError(t, db.Delete(context.Background(), math.MinInt64, math.MaxInt64, m))
	order, _ := selectAll(t, db, baseTime, baseTime+1000, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "a"))
	require.Equal(t, []string{`{__name__="a", x="2"}`}, order)
	require.ErrorIs(t, db.Snapshot(t.TempDir(), true), ErrNotSupported)
}

func TestQueryLimits(t *testing.T) {
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.MaxSeriesPerQuery = 5
	opts.MaxSamplesPerQuery = 45
	db, err := Open(opts)
	require.NoError(t, err)
	defer db.Close()
	data := map[string][]sample{}
	for i := range 10 {
		data[`m{i="`+itoa(i)+`"}`] = samplesOf(10, baseTime, 1000, func(int) float64 { return 1 })
	}
	appendSamples(t, db, data)
	db.Flush()
	q, err := db.Querier(baseTime, baseTime+60000)
	require.NoError(t, err)
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	require.False(t, ss.Next())
	require.ErrorIs(t, ss.Err(), ErrQueryTooLarge)

	ss = q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "i", "[0-5]"))
	require.False(t, ss.Next())
	require.ErrorIs(t, ss.Err(), ErrQueryTooLarge)

	ss = q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "i", "[0-4]"))
	require.False(t, ss.Next())
	require.ErrorIs(t, ss.Err(), ErrQueryTooLarge, "50 samples, 45 allowed")

	_, got := selectAll(t, db, baseTime, baseTime+60000, nil, labels.MustNewMatcher(labels.MatchRegexp, "i", "[0-3]"))
	require.Len(t, got, 4)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ss = q.Select(ctx, true, nil, labels.MustNewMatcher(labels.MatchRegexp, "i", "[0-3]"))
	require.False(t, ss.Next())
	require.ErrorIs(t, ss.Err(), context.Canceled)
}

// TestReadAcrossDecodeBatches reads more blocks than one decode batch
// holds: every series comes back whole, series whose blocks straddle two
// batches included, and the sample limit counts across batches.
func TestReadAcrossDecodeBatches(t *testing.T) {
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	db, err := Open(opts)
	require.NoError(t, err)
	defer db.Close()
	const nSeries = decodeBatchBlocks + 100
	// Two commits with a flush between them: two parts, so each series
	// has two blocks and the read holds about 2*nSeries blocks.
	for half := range 2 {
		data := map[string][]sample{}
		for i := range nSeries {
			data[`wide{i="`+itoa(i)+`"}`] = samplesOf(5, baseTime+int64(half)*5000, 1000, func(j int) float64 { return float64(i*10 + half*5 + j) })
		}
		appendSamples(t, db, data)
		db.Flush()
	}
	_, got := selectAll(t, db, baseTime, baseTime+60000, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "wide"))
	require.Len(t, got, nSeries)
	for name, samples := range got {
		require.Len(t, samples, 10, name)
		for j := 1; j < len(samples); j++ {
			require.Equal(t, samples[j-1].t+1000, samples[j].t, "%s sorted, no gaps", name)
			require.Equal(t, samples[j-1].v+1, samples[j].v, name)
		}
	}

	db.opts.MaxSamplesPerQuery = nSeries*10 - 1
	q, err := db.Querier(baseTime, baseTime+60000)
	require.NoError(t, err)
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "wide"))
	require.False(t, ss.Next())
	require.ErrorIs(t, ss.Err(), ErrQueryTooLarge)
}

func TestClosedAndBadPath(t *testing.T) {
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Path = dir
	db, err := Open(opts)
	require.NoError(t, err)
	app := db.AppenderV2(context.Background())
	_, err = app.Append(0, labels.FromStrings("__name__", "m"), 0, baseTime, 1, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.ErrorIs(t, app.Commit(), ErrClosed)
	_, err = db.Querier(0, 1)
	require.ErrorIs(t, err, ErrClosed)

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	opts.Path = filepath.Join(file, "data")
	_, err = Open(opts)
	require.ErrorContains(t, err, "create data directory")
}

func TestSecondOpenFails(t *testing.T) {
	dir := t.TempDir()
	openTestDB(t, dir, nil)
	opts := DefaultOptions()
	opts.Path = dir
	_, err := Open(opts)
	require.ErrorContains(t, err, "locked by another process")
}

func TestChunkQuerier(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	appendSamples(t, db, map[string][]sample{`m`: samplesOf(300, baseTime, 1000, func(i int) float64 { return float64(i) })})
	db.Flush()
	cq, err := db.ChunkQuerier(baseTime, baseTime+time.Hour.Milliseconds())
	require.NoError(t, err)
	css := cq.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m"))
	require.True(t, css.Next())
	n := 0
	it := css.At().Iterator(nil)
	for it.Next() {
		n += it.At().Chunk.NumSamples()
	}
	require.NoError(t, it.Err())
	require.Equal(t, 300, n)
	require.False(t, css.Next())
	require.NoError(t, css.Err())
}

func TestSampleIteratorSeek(t *testing.T) {
	s := &series{ts: []int64{10, 20, 30, 40}, vs: []float64{1, 2, 3, 4}}
	it := s.Iterator(nil)
	require.Equal(t, chunkenc.ValFloat, it.Seek(15))
	require.Equal(t, int64(20), it.AtT())
	require.Equal(t, chunkenc.ValFloat, it.Seek(5), "Seek never moves back")
	require.Equal(t, int64(20), it.AtT())
	require.Equal(t, chunkenc.ValFloat, it.Next())
	require.Equal(t, int64(30), it.AtT())
	require.Equal(t, chunkenc.ValFloat, it.Seek(40))
	require.Equal(t, chunkenc.ValNone, it.Next())
	require.Equal(t, chunkenc.ValNone, it.Seek(1))
}

func TestSelfMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	db := openTestDB(t, t.TempDir(), reg)
	appendSamples(t, db, map[string][]sample{`m`: {{baseTime, 1}}})
	db.Flush()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{
		"appliance_storage_samples_appended_total", "appliance_storage_active_series",
		"appliance_storage_append_errors_total", "appliance_storage_rows_pending",
		"appliance_storage_parts", "appliance_storage_disk_bytes",
		"appliance_storage_head_series", "appliance_storage_head_samples",
	} {
		require.True(t, names[n], n)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func parseMatchers(s string) ([]*labels.Matcher, error) {
	return parser.NewParser(parser.Options{}).ParseMetricSelector(s)
}

func TestVictoriaMetricsLogsGoToSlog(t *testing.T) {
	openTestDB(t, t.TempDir(), nil) // runs vmInit
	var buf bytes.Buffer
	prev := vmLog.Swap(slog.New(slog.NewTextHandler(&buf, nil)))
	defer vmLog.Store(prev)
	vmlogger.Warnf("disk %s is slow", "sda")
	vmlogger.Infof("merged a part") // below WARN: not logged
	require.Contains(t, buf.String(), `level=WARN msg="disk sda is slow" component=victoriametrics`)
	require.NotContains(t, buf.String(), "merged")
}
