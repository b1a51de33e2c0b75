package storage

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"
)

func selectCtx(t testing.TB, ctx context.Context, db *DB, hints *promstorage.SelectHints, ms ...*labels.Matcher) map[string][]sample {
	t.Helper()
	q, err := db.Querier(hints.Start, hints.End)
	require.NoError(t, err)
	defer q.Close()
	ss := q.Select(ctx, true, hints, ms...)
	out := map[string][]sample{}
	var it chunkenc.Iterator
	for ss.Next() {
		s := ss.At()
		key := s.Labels().String()
		_, dup := out[key]
		require.False(t, dup, "series %s twice", key)
		out[key] = nil
		it = s.Iterator(it)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			out[key] = append(out[key], sample{ts, v})
		}
	}
	require.NoError(t, ss.Err())
	return out
}

func TestTierForStep(t *testing.T) {
	f := func(step time.Duration, limit, want Tier) {
		t.Helper()
		require.Equal(t, want, TierForStep(step, limit), "step %s limit %s", step, limit)
	}
	f(0, Tier5m, TierRaw)
	f(4*time.Minute, Tier5m, TierRaw)
	f(5*time.Minute, Tier5m, Tier1m)
	f(24*time.Minute, Tier5m, Tier1m)
	f(25*time.Minute, Tier5m, Tier5m)
	f(time.Hour, Tier1m, Tier1m)
	f(time.Hour, TierRaw, TierRaw)
}

func TestPlan(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.Now = func() time.Time { return now }
	db, err := Open(opts)
	require.NoError(t, err)
	defer db.Close()
	day := 24 * time.Hour
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	db.SetRolledUpTo(Tier1m, now.Add(-2*time.Minute))
	db.SetRolledUpTo(Tier5m, now.Add(-10*time.Minute))

	f := func(from, to time.Duration, prefer, limit Tier, want ...piece) {
		t.Helper()
		require.Equal(t, want, db.plan(ms(from), ms(to), prefer, limit))
	}
	// Raw where raw covers, then 1m, then 5m.
	f(60*day, 0, TierRaw, Tier5m,
		piece{Tier5m, ms(60 * day), ms(30*day) - 1},
		piece{Tier1m, ms(30 * day), ms(7*day) - 1},
		piece{TierRaw, ms(7 * day), ms(0)})
	// A large step prefers 5m where 5m has data, then the finer tiers.
	f(8*day, 0, Tier5m, Tier5m,
		piece{Tier5m, ms(8 * day), ms(10 * time.Minute)},
		piece{Tier1m, ms(10*time.Minute) + 1, ms(2 * time.Minute)},
		piece{TierRaw, ms(2*time.Minute) + 1, ms(0)})
	// max_source_resolution=1m: nothing older than the 1m retention.
	f(60*day, 8*day, TierRaw, Tier1m, piece{Tier1m, ms(30 * day), ms(8 * day)})
	// raw only.
	f(60*day, 8*day, TierRaw, TierRaw)
	// Beyond every retention: nothing.
	f(200*day, 100*day, TierRaw, Tier5m)
}

func TestTieredSelect(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	g := `queue{job="a"}`
	c := `reqs_total{job="a"}`
	data := map[string][]sample{
		g: samplesOf(3*240, start.UnixMilli()+15000, 15000, func(i int) float64 { return float64(i % 9) }),
		c: samplesOf(3*240, start.UnixMilli()+15000, 15000, func(i int) float64 { return float64(i) }),
	}
	appendSamples(t, db, data)
	db.Flush()
	wm := start.Add(2 * time.Hour)
	_, err := db.Rollup(context.Background(), Tier1m, start, wm)
	require.NoError(t, err)
	db.Flush()
	db.SetRolledUpTo(Tier1m, wm)

	name := func(n string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, n) }
	ctx, rec := WithTierRecorder(context.Background())
	hints := &promstorage.SelectHints{Start: start.UnixMilli(), End: start.Add(3 * time.Hour).UnixMilli(), Step: (10 * time.Minute).Milliseconds()}

	// A plain gauge selector at a 10m step reads the 1m average up to the
	// watermark, then raw.
	got := selectCtx(t, ctx, db, hints, name("queue"))
	require.Len(t, got, 1)
	s := got[`{__name__="queue", job="a"}`]
	require.Len(t, s, 120+240)
	// A gauge window's row is at its last sample, at most a second
	// before the window's end (versionReserve).
	require.Equal(t, start.Add(time.Minute-time.Second).UnixMilli(), s[0].t)
	require.Equal(t, 1.5, s[0].v) // mean of 0,1,2,3
	require.Equal(t, wm.Add(-time.Second).UnixMilli(), s[119].t)
	require.Equal(t, wm.UnixMilli()+15000, s[120].t)
	require.Equal(t, []Tier{TierRaw, Tier1m}, rec.Used())

	// max_over_time reads the max; a counter reads the counter (the last
	// sample per window, repeated 1ms after the window's end).
	hints.Func = "max_over_time"
	s = selectCtx(t, ctx, db, hints, name("queue"))[`{__name__="queue", job="a"}`]
	require.Equal(t, 3.0, s[0].v)
	s = selectCtx(t, ctx, db, hints, name("reqs_total"))[`{__name__="reqs_total", job="a"}`]
	require.Equal(t, []sample{{start.UnixMilli() + 60000, 3}, {start.UnixMilli() + 60001, 3}, {start.UnixMilli() + 120000, 7}}, s[:3])

	// An explicit aggregate, and matchers on the reserved label.
	s = selectCtx(t, ctx, db, hints, name("queue"), labels.MustNewMatcher(labels.MatchEqual, RollupLabel, "count"))[`{__name__="queue", job="a"}`]
	require.Equal(t, 4.0, s[0].v)
	require.Equal(t, 1.0, s[len(s)-1].v) // raw reads each sample as 1
	require.Empty(t, selectCtx(t, ctx, db, hints, name("queue"), labels.MustNewMatcher(labels.MatchEqual, RollupLabel, "bogus")))
	require.Len(t, selectCtx(t, ctx, db, hints, name("queue"), labels.MustNewMatcher(labels.MatchEqual, RollupLabel, "")), 1)

	// max_source_resolution=raw: raw alone.
	rawCtx, rawRec := WithTierRecorder(WithMaxSourceResolution(context.Background(), TierRaw))
	hints.Func = ""
	s = selectCtx(t, rawCtx, db, hints, name("queue"))[`{__name__="queue", job="a"}`]
	require.Len(t, s, 3*240)
	require.Equal(t, []Tier{TierRaw}, rawRec.Used())

	// The reserved label never shows.
	hints.Func = "series"
	series := selectCtx(t, ctx, db, hints, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	require.Len(t, series, 2)
	q, err := db.Querier(hints.Start, hints.End)
	require.NoError(t, err)
	names, _, err := q.LabelNames(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"__name__", "job"}, names)
	vals, _, err := q.LabelValues(ctx, RollupLabel, nil)
	require.NoError(t, err)
	require.Empty(t, vals)

	// Rules read raw only.
	rq, err := db.Raw().Querier(hints.Start, hints.End)
	require.NoError(t, err)
	ss := rq.Select(ctx, true, &promstorage.SelectHints{Start: hints.Start, End: hints.End, Step: hints.Step}, name("queue"))
	require.True(t, ss.Next())
	n := 0
	it := ss.At().Iterator(nil)
	for it.Next() == chunkenc.ValFloat {
		n++
	}
	require.Equal(t, 3*240, n)

	// The planner reports the coarsest tier for the engine.
	require.Equal(t, time.Minute, db.CoarsestResolution(context.Background(), hints.Start, hints.End, 10*time.Minute))
	require.Zero(t, db.CoarsestResolution(context.Background(), hints.Start, hints.End, time.Minute))
}

func TestOldSamplesGoStraightToTiers(t *testing.T) {
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.RetentionRaw = 24 * time.Hour
	opts.Retention1m = 3 * 24 * time.Hour
	opts.Retention5m = 10 * 24 * time.Hour
	db, err := Open(opts)
	require.NoError(t, err)
	defer db.Close()
	now := time.Now()
	db.SetRolledUpTo(Tier1m, now)
	db.SetRolledUpTo(Tier5m, now)

	// Two hours five days ago (5m only) and two days ago (1m and 5m).
	fiveDays := now.Add(-5 * 24 * time.Hour).Truncate(time.Hour)
	twoDays := now.Add(-2 * 24 * time.Hour).Truncate(time.Hour)
	db.SetMetadata("temp", metadata.Metadata{Type: model.MetricTypeGauge})
	data := map[string][]sample{}
	for _, from := range []time.Time{fiveDays, twoDays} {
		data[`temp{at="`+from.Format(time.RFC3339)+`"}`] = samplesOf(480, from.UnixMilli()+15000, 15000, func(i int) float64 { return float64(i % 10) })
	}
	appendSamples(t, db, data)
	db.Flush()

	max5m := func(from time.Time, limit Tier) ([]sample, []Tier) {
		ctx, rec := WithTierRecorder(WithMaxSourceResolution(context.Background(), limit))
		got := selectCtx(t, ctx, db, &promstorage.SelectHints{Start: from.UnixMilli(), End: from.Add(2 * time.Hour).UnixMilli(), Step: time.Hour.Milliseconds(), Func: "max_over_time"},
			labels.MustNewMatcher(labels.MatchEqual, "at", from.Format(time.RFC3339)))
		return got[`{__name__="temp", at="`+from.Format(time.RFC3339)+`"}`], rec.Used()
	}
	s, used := max5m(fiveDays, Tier5m)
	require.Len(t, s, 24)
	require.Equal(t, 9.0, s[0].v)
	require.Equal(t, []Tier{Tier5m}, used)
	s, used = max5m(twoDays, Tier1m)
	require.Len(t, s, 120)
	require.Equal(t, []Tier{Tier1m}, used)
	s, _ = max5m(twoDays, TierRaw)
	require.Empty(t, s, "nothing of it in raw")
}

func TestLateCommitHook(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	now := time.Now()
	var got [][2]int64
	db.OnLateCommit(func(minT, maxT int64) { got = append(got, [2]int64{minT, maxT}) })
	appendSamples(t, db, map[string][]sample{`x`: {{now.UnixMilli() - 1000, 1}}})
	require.Empty(t, got, "no watermark yet")
	db.SetRolledUpTo(Tier1m, now.Add(-time.Minute))
	appendSamples(t, db, map[string][]sample{`x`: {{now.UnixMilli(), 1}}})
	require.Empty(t, got, "after the watermark")
	old := now.Add(-time.Hour).UnixMilli()
	appendSamples(t, db, map[string][]sample{`x`: {{old, 1}, {old + 5000, 2}}})
	require.Equal(t, [][2]int64{{old, old + 5000}}, got)
}

func TestIsCounter(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	db.SetMetadata("http_requests", metadata.Metadata{Type: model.MetricTypeCounter})
	db.SetMetadata("latency", metadata.Metadata{Type: model.MetricTypeHistogram})
	db.SetMetadata("rpc", metadata.Metadata{Type: model.MetricTypeSummary})
	db.SetMetadata("odd_total", metadata.Metadata{Type: model.MetricTypeGauge})
	db.SetMetadata("queue", metadata.Metadata{Type: model.MetricTypeGaugeHistogram})
	f := func(name string, want bool) {
		t.Helper()
		require.Equal(t, want, db.isCounter(name), name)
	}
	f("http_requests", true)
	f("latency_bucket", true)
	f("latency_sum", true)
	f("rpc_count", true)
	f("rpc", false) // quantiles
	f("odd_total", false)
	f("queue_bucket", false)
	f("unknown_total", true)
	f("unknown_bucket", true)
	f("temperature", false)
}

func TestRollupFunctions(t *testing.T) {
	var got []sample
	emit := func(ts int64, v float64) { got = append(got, sample{ts, v}) }
	// Windows of 10: (0,10], (10,20], (20,30].
	// The last sample per window, and 5 and 6, each followed by a reset in
	// their window; the drop from 6 to 1 at 19 needs nothing more.
	rollupCounter([]int64{1, 4, 7, 10, 13, 16, 19, 22}, []float64{1, 5, 2, 3, 4, 6, 1, 2}, 10, emit)
	require.Equal(t, []sample{{4, 5}, {10, 3}, {16, 6}, {19, 1}, {22, 2}}, got)

	// Read back, each window's last value is repeated just after its
	// window's end, unless the next point is already there.
	s := withBoundaryPoints(&series{ts: []int64{4, 10, 16, 19, 22, 41}, vs: []float64{5, 3, 6, 1, 2, 7}}, 10)
	require.Equal(t, []int64{4, 10, 11, 16, 19, 21, 22, 31, 41}, s.ts)
	require.Equal(t, []float64{5, 3, 3, 6, 1, 1, 2, 2, 7}, s.vs)

	var ws []gaugeWindow
	rollupGauge([]int64{1, 4, 10, 13, 20, 21}, []float64{3, -1, 7, 2, 2, 9}, 10, func(w gaugeWindow) { ws = append(ws, w) })
	require.Equal(t, []gaugeWindow{{10, -1, 7, 9, 3}, {20, 2, 2, 4, 2}, {21, 9, 9, 9, 1}}, ws)

	ts, vs := dedupWindows([]int64{5, 9, 10, 12, 18}, []float64{1, 2, 3, 4, 5}, 10)
	require.Equal(t, []int64{10, 18}, ts)
	require.Equal(t, []float64{3, 5}, vs)
}

func TestCompactQuietMonths(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	now := time.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	lastMonth := thisMonth.AddDate(0, -1, 0)
	parts := func() uint64 {
		var m vmstorage.Metrics
		db.tiers[Tier5m].vm.UpdateMetrics(&m)
		return m.TableMetrics.InmemoryPartsCount + m.TableMetrics.SmallPartsCount + m.TableMetrics.BigPartsCount
	}
	// Three separate writes into last month make three parts.
	name, err := marshalRawName(nil, labels.FromStrings("__name__", "reqs_total", RollupLabel, "counter"))
	require.NoError(t, err)
	for i := range 3 {
		b := db.newRollupBatch(Tier5m)
		for j := range 100 {
			b.add(name, lastMonth.Add(time.Duration(i*100+j+1)*5*time.Minute).UnixMilli(), float64(i*100+j))
		}
		require.NoError(t, b.write())
		db.Flush()
	}
	require.EqualValues(t, 3, parts())

	// Not yet: the watermark is still in last month, or it is not quiet.
	merged, err := db.CompactQuietMonths(Tier5m, thisMonth.Add(-time.Minute), 0)
	require.NoError(t, err)
	require.Empty(t, merged)
	merged, err = db.CompactQuietMonths(Tier5m, thisMonth, time.Hour)
	require.NoError(t, err)
	require.Empty(t, merged)
	require.EqualValues(t, 3, parts())

	merged, err = db.CompactQuietMonths(Tier5m, thisMonth, 0)
	require.NoError(t, err)
	require.Equal(t, []time.Time{lastMonth}, merged)
	require.EqualValues(t, 1, parts())
	// Every row is still there, and the month is not merged twice.
	tfs, err := toTagFilters(allSeries)
	require.NoError(t, err)
	set, err := db.readSeries(context.Background(), Tier5m, tfs, lastMonth.UnixMilli(), thisMonth.UnixMilli())
	require.NoError(t, err)
	require.Len(t, set, 1)
	require.Len(t, set[0].ts, 300)
	merged, err = db.CompactQuietMonths(Tier5m, thisMonth, 0)
	require.NoError(t, err)
	require.Empty(t, merged)
	_, err = db.CompactQuietMonths(TierRaw, thisMonth, 0)
	require.ErrorIs(t, err, ErrUnknownTier)
}

// Close drops the rollup tiers' VictoriaMetrics caches and keeps raw's;
// the next Open reads every tier as before.
func TestCloseDropsRollupTierCaches(t *testing.T) {
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Path = dir
	db, err := Open(opts)
	require.NoError(t, err)
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	appendSamples(t, db, map[string][]sample{`reqs_total{job="a"}`: samplesOf(240, start.UnixMilli()+15000, 15000, func(i int) float64 { return float64(i) })})
	db.Flush()
	_, err = db.Rollup(context.Background(), Tier1m, start, start.Add(time.Hour))
	require.NoError(t, err)
	db.Flush() // the 5m rollup reads the 1m tier
	_, err = db.Rollup(context.Background(), Tier5m, start, start.Add(time.Hour))
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.DirExists(t, filepath.Join(dir, "tsdb", "raw", vmCacheDir))
	for _, tier := range []string{"1m", "5m"} {
		require.NoDirExists(t, filepath.Join(dir, "tsdb", tier, vmCacheDir))
	}

	db, err = Open(opts)
	require.NoError(t, err)
	defer db.Close()
	tfs, err := toTagFilters(allSeries)
	require.NoError(t, err)
	for _, tier := range []Tier{Tier1m, Tier5m} {
		set, err := db.readSeries(context.Background(), tier, tfs, start.UnixMilli(), start.Add(time.Hour).UnixMilli())
		require.NoError(t, err)
		require.Len(t, set, 1, "tier %s", tier)
		require.Len(t, set[0].ts, int(time.Hour/tier.Resolution()), "tier %s", tier)
	}
}
