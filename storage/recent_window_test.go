package storage

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// windowDB is a DB on a clock the test moves.
type windowDB struct {
	*DB
	now atomic.Int64
}

func openWindowDB(t *testing.T, start time.Time) *windowDB {
	t.Helper()
	w := &windowDB{}
	w.now.Store(start.UnixMilli())
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.Now = func() time.Time { return time.UnixMilli(w.now.Load()) }
	db, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	w.DB = db
	return w
}

func (w *windowDB) set(t time.Time) { w.now.Store(t.UnixMilli()) }

// commit writes samples to VictoriaMetrics and hands the same rows to the
// window, as Commit does.
func (w *windowDB) commit(t *testing.T, series string, samples ...sample) {
	t.Helper()
	raw, err := marshalRawName(nil, mustParse(t, series))
	require.NoError(t, err)
	rows := make([]vmstorage.MetricRow, len(samples))
	for i, s := range samples {
		rows[i] = vmstorage.MetricRow{MetricNameRaw: raw, Timestamp: s.t, Value: s.v}
	}
	require.NoError(t, w.addRows(rows))
	w.recent.add(rows)
}

// selectRaw reads through the raw querier, as rules do.
func (w *windowDB) selectRaw(t *testing.T, mint, maxt int64, ms ...*labels.Matcher) map[string][]sample {
	t.Helper()
	q, err := w.Raw().Querier(mint, maxt)
	require.NoError(t, err)
	ss := q.Select(context.Background(), false, nil, ms...)
	got := map[string][]sample{}
	var prev labels.Labels
	for ss.Next() {
		s := ss.At()
		require.Negative(t, labels.Compare(prev, s.Labels()), "sorted by labels")
		prev = s.Labels()
		it := s.Iterator(nil)
		for it.Next() != 0 {
			ts, v := it.At()
			got[s.Labels().String()] = append(got[s.Labels().String()], sample{ts, v})
		}
	}
	require.NoError(t, ss.Err())
	return got
}

// fromWindow reports whether the window answers ms over [mint, maxt].
func (w *windowDB) fromWindow(t *testing.T, mint, maxt int64, ms ...*labels.Matcher) bool {
	t.Helper()
	_, ok, err := w.recent.read(ms, mint, maxt, math.MaxInt, math.MaxInt)
	require.NoError(t, err)
	return ok
}

func eq(name, value string) *labels.Matcher {
	return labels.MustNewMatcher(labels.MatchEqual, name, value)
}

func TestRecentWindowServesWhatDiskHolds(t *testing.T) {
	start := time.UnixMilli(baseTime).Add(-20 * time.Minute)
	db := openWindowDB(t, start)
	ms := []*labels.Matcher{eq(labels.MetricName, "req_total")}
	// Before the name is hot the window answers nothing; the Select
	// turns it hot.
	require.False(t, db.fromWindow(t, baseTime-time.Hour.Milliseconds(), baseTime, ms...))
	db.selectRaw(t, start.UnixMilli()-5*60_000, start.UnixMilli(), ms...)

	// 20 minutes of samples every 15s on three series, with a duplicate
	// timestamp, an out-of-order sample and a staleness marker.
	end := start.Add(20 * time.Minute)
	for ts := start.UnixMilli(); ts <= end.UnixMilli(); ts += 15_000 {
		db.set(time.UnixMilli(ts))
		i := float64(ts-start.UnixMilli()) / 15_000
		db.commit(t, `req_total{code="200",instance="a"}`, sample{ts, 10 * i})
		db.commit(t, `req_total{code="500",instance="a"}`, sample{ts, i})
		db.commit(t, `req_total{code="200",instance="b"}`, sample{ts, 2 * i})
		db.commit(t, `other{instance="a"}`, sample{ts, 1})
	}
	last := end.UnixMilli()
	db.commit(t, `req_total{code="200",instance="b"}`, sample{last, 1e6}, sample{last - 7_500, 3.5})
	db.commit(t, `req_total{code="500",instance="a"}`, sample{last, math.Float64frombits(value.StaleNaN)})
	db.commit(t, `req_total{code="200",instance="a"}`, sample{last, 1})
	db.Flush()

	mint := last - 5*60_000
	for _, sel := range []string{
		`req_total`,
		`req_total{code="200"}`,
		`req_total{code!="200"}`,
		`req_total{instance=~"a|b",code=~"2.."}`,
		`req_total{instance!~"b"}`,
		`req_total{missing=""}`,
		`req_total{missing!=""}`,
		`req_total{instance="c"}`,
	} {
		ms, err := parseMatchers(sel)
		require.NoError(t, err)
		require.True(t, db.fromWindow(t, mint, last, ms...), sel)
		got := db.selectRaw(t, mint, last, ms...)

		tfs, err := toTagFilters(ms)
		require.NoError(t, err)
		disk, err := db.readSeries(context.Background(), TierRaw, tfs, mint, last)
		require.NoError(t, err)
		want := map[string][]sample{}
		for _, s := range disk {
			for i := range s.ts {
				want[s.lset.String()] = append(want[s.lset.String()], sample{s.ts[i], s.vs[i]})
			}
		}
		require.Equal(t, len(want), len(got), sel)
		for k, w := range want {
			requireSamples(t, w, got[k])
		}
	}
	// Ranges the window does not hold, and selectors without a name, are
	// read from disk.
	require.False(t, db.fromWindow(t, last-17*60_000, last, ms...))
	require.False(t, db.fromWindow(t, start.UnixMilli(), last, ms...), "before the name turned hot")
	require.False(t, db.fromWindow(t, mint, last, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, "req_.*")))
}

func TestRecentWindowCachedSelectorsSeeNewSeries(t *testing.T) {
	start := time.UnixMilli(baseTime)
	db := openWindowDB(t, start)
	sel := []*labels.Matcher{eq(labels.MetricName, "up"), eq("job", "vllm")}
	db.selectRaw(t, 0, start.UnixMilli(), sel...) // turns "up" hot
	now := start.Add(2 * time.Minute)
	db.set(now)
	db.commit(t, `up{instance="b",job="vllm"}`, sample{now.UnixMilli(), 1})
	mint := now.UnixMilli() - 30_000
	require.Len(t, db.selectRaw(t, mint, now.UnixMilli(), sel...), 1)
	require.True(t, db.fromWindow(t, mint, now.UnixMilli(), sel...))

	// A new series after the selector was cached: found, and in order.
	db.commit(t, `up{instance="a",job="vllm"}`, sample{now.UnixMilli(), 0})
	db.commit(t, `up{instance="c",job="other"}`, sample{now.UnixMilli(), 1})
	got := db.selectRaw(t, mint, now.UnixMilli(), sel...)
	require.Equal(t, map[string][]sample{
		`{__name__="up", instance="a", job="vllm"}`: {{now.UnixMilli(), 0}},
		`{__name__="up", instance="b", job="vllm"}`: {{now.UnixMilli(), 1}},
	}, got)

	// A series that stops receiving samples leaves the window once its
	// samples are older than the span.
	later := now.Add(recentSpan + recentMargin + recentSweepEvery)
	db.set(later)
	db.commit(t, `up{instance="a",job="vllm"}`, sample{later.UnixMilli(), 1})
	n, _ := db.RecentWindowStats()
	require.Equal(t, 1, n)
	got = db.selectRaw(t, later.UnixMilli()-60_000, later.UnixMilli(), sel...)
	require.Len(t, got, 1)
}

func TestRecentWindowAfterDeleteReadsDisk(t *testing.T) {
	start := time.Now().Add(-30 * time.Minute)
	db := openWindowDB(t, start)
	ms := []*labels.Matcher{eq(labels.MetricName, "up")}
	db.selectRaw(t, 0, start.UnixMilli(), ms...)
	now := start.Add(10 * time.Minute)
	db.set(now)
	db.commit(t, `up{instance="a"}`, sample{now.UnixMilli(), 1})
	mint := now.UnixMilli() - 60_000
	require.True(t, db.fromWindow(t, mint, now.UnixMilli(), ms...))

	require.NoError(t, db.Delete(context.Background(), math.MinInt64, math.MaxInt64, ms...))
	require.False(t, db.fromWindow(t, mint, now.UnixMilli(), ms...))
	require.Empty(t, db.selectRaw(t, mint, now.UnixMilli(), ms...))
}

func TestRecentWindowRefusesNamesBeyondItsSize(t *testing.T) {
	start := time.UnixMilli(baseTime)
	db := openWindowDB(t, start)
	db.recent.maxSeries = 2
	for _, name := range []string{"small", "big"} {
		db.selectRaw(t, 0, start.UnixMilli(), eq(labels.MetricName, name))
	}
	now := start.Add(2 * time.Minute)
	db.set(now)
	db.commit(t, `small{i="1"}`, sample{now.UnixMilli(), 1})
	db.commit(t, `big{i="1"}`, sample{now.UnixMilli(), 1})
	db.commit(t, `big{i="2"}`, sample{now.UnixMilli(), 2})
	db.Flush()

	mint := now.UnixMilli() - 60_000
	require.True(t, db.fromWindow(t, mint, now.UnixMilli(), eq(labels.MetricName, "small")))
	require.False(t, db.fromWindow(t, mint, now.UnixMilli(), eq(labels.MetricName, "big")))
	require.Len(t, db.selectRaw(t, mint, now.UnixMilli(), eq(labels.MetricName, "big")), 2, "read from disk")
	n, _ := db.RecentWindowStats()
	require.Equal(t, 1, n)
}

func TestRecentWindowLimits(t *testing.T) {
	start := time.UnixMilli(baseTime)
	db := openWindowDB(t, start)
	ms := []*labels.Matcher{eq(labels.MetricName, "up")}
	db.selectRaw(t, 0, start.UnixMilli(), ms...)
	now := start.Add(2 * time.Minute)
	db.set(now)
	for _, inst := range []string{"a", "b", "c"} {
		db.commit(t, `up{instance="`+inst+`"}`, sample{now.UnixMilli() - 15_000, 1}, sample{now.UnixMilli(), 1})
	}
	mint := now.UnixMilli() - 60_000
	_, ok, err := db.recent.read(ms, mint, now.UnixMilli(), 2, math.MaxInt)
	require.True(t, ok)
	require.ErrorIs(t, err, ErrQueryTooLarge)
	_, _, err = db.recent.read(ms, mint, now.UnixMilli(), 3, 5)
	require.ErrorIs(t, err, ErrQueryTooLarge)
	set, _, err := db.recent.read(ms, mint, now.UnixMilli(), 3, 6)
	require.NoError(t, err)
	require.Len(t, set, 3)
	// Each series' samples are its own: appending to one does not
	// overwrite the next (the tiered querier appends pieces).
	set[0].ts = append(set[0].ts, 1)
	require.Equal(t, now.UnixMilli()-15_000, set[1].ts[0])

	q, err := db.Raw().Querier(mint, now.UnixMilli())
	require.NoError(t, err)
	ss := q.Select(context.Background(), false, &promstorage.SelectHints{Start: mint, End: now.UnixMilli(), Limit: 2}, ms...)
	n := 0
	for ss.Next() {
		n++
	}
	require.Equal(t, 2, n)
}

func TestRawMetricGroup(t *testing.T) {
	for _, s := range []string{`up{instance="a"}`, `{Hostname="h",__name__="DCGM_FI_DEV_GPU_TEMP",gpu="0"}`} {
		ls := mustParse(t, s)
		raw, err := marshalRawName(nil, ls)
		require.NoError(t, err)
		name, ok := rawMetricGroup(raw)
		require.True(t, ok, s)
		require.Equal(t, ls.Get(labels.MetricName), string(name))
	}
	raw, err := marshalRawName(nil, mustParse(t, `{job="x"}`))
	require.NoError(t, err)
	_, ok := rawMetricGroup(raw)
	require.False(t, ok)
	_, ok = rawMetricGroup(raw[:5])
	require.False(t, ok)
}

// TestRecentWindowFillsWhenANameTurnsHot: a name's first Select copies its
// last recentSpan from the store, VictoriaMetrics and the head alike, and
// the window answers that Select and the next ones with what disk holds;
// Commits after it reach the window.
func TestRecentWindowFillsWhenANameTurnsHot(t *testing.T) {
	start := time.UnixMilli(baseTime)
	db := openWindowDB(t, start)
	appendAt := func(ts int64, v float64, series ...string) {
		t.Helper()
		app := db.AppenderV2(context.Background())
		for _, s := range series {
			_, err := app.Append(0, mustParse(t, s), 0, ts, v, nil, nil, promstorage.AOptions{})
			require.NoError(t, err)
		}
		require.NoError(t, app.Commit())
	}
	// 20 minutes every 15 s, flushed to VictoriaMetrics; then samples
	// only the head holds.
	var ts int64
	for ts = start.UnixMilli(); ts <= start.Add(20*time.Minute).UnixMilli(); ts += 15_000 {
		db.set(time.UnixMilli(ts))
		appendAt(ts, float64(ts-start.UnixMilli())/1000, `gpu_util{gpu="0"}`, `gpu_util{gpu="1"}`)
	}
	db.Flush()
	for range 4 {
		db.set(time.UnixMilli(ts))
		appendAt(ts, float64(ts-start.UnixMilli())/1000, `gpu_util{gpu="0"}`, `gpu_util{gpu="1"}`, `gpu_util{gpu="2"}`)
		ts += 15_000
	}
	now := ts - 15_000
	ms := []*labels.Matcher{eq(labels.MetricName, "gpu_util")}
	mint := now - 15*60_000
	// What disk holds, read before the name turned hot.
	want := func() map[string][]sample {
		tfs, err := toTagFilters(ms)
		require.NoError(t, err)
		fromHead := db.head.read(ms, mint, now, false)
		disk, err := db.readSeries(context.Background(), TierRaw, tfs, mint, now)
		require.NoError(t, err)
		got := map[string][]sample{}
		for _, s := range mergeHead(disk, fromHead, false) {
			for i := range s.ts {
				got[s.lset.String()] = append(got[s.lset.String()], sample{s.ts[i], s.vs[i]})
			}
		}
		return got
	}
	before := want()
	require.Len(t, before, 3)
	require.Len(t, before[`{__name__="gpu_util", gpu="0"}`], 61)

	require.True(t, db.fromWindow(t, mint, now, ms...), "the first read fills the window")
	got := db.selectRaw(t, mint, now, ms...)
	require.Equal(t, len(before), len(got))
	for k, w := range before {
		requireSamples(t, w, got[k])
	}

	// A Commit after the fill reaches the window, once.
	ts = now + 15_000
	db.set(time.UnixMilli(ts))
	appendAt(ts, 1, `gpu_util{gpu="0"}`, `gpu_util{gpu="3"}`)
	got = db.selectRaw(t, mint, ts, ms...)
	require.True(t, db.fromWindow(t, mint, ts, ms...))
	require.Len(t, got, 4)
	require.Len(t, got[`{__name__="gpu_util", gpu="0"}`], 62)
	require.Equal(t, []sample{{ts, 1}}, got[`{__name__="gpu_util", gpu="3"}`])
}

// TestRecentSeriesAddOlder: samples read from the store go in front of
// what the window held, or in between, one per timestamp, none older than
// the horizon.
func TestRecentSeriesAddOlder(t *testing.T) {
	s := &recentSeries{}
	s.add(50, 5, 0)
	s.add(60, 6, 0)
	s.addOlder([]int64{10, 20, 30}, []float64{1, 2, 3}, 15) // in front, 10 past the horizon
	require.Equal(t, []int64{20, 30, 50, 60}, s.ts)
	require.Equal(t, []float64{2, 3, 5, 6}, s.vs)
	s.addOlder([]int64{25, 40, 50, 70}, []float64{2.5, 4, 4, 7}, 15) // between, a duplicate, after
	require.Equal(t, []int64{20, 25, 30, 40, 50, 60, 70}, s.ts)
	require.Equal(t, []float64{2, 2.5, 3, 4, 5, 6, 7}, s.vs, "the larger value wins at a duplicate timestamp")
	s.addOlder(nil, nil, 15)
	require.Len(t, s.ts, 7)
}
