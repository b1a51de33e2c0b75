package storage

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"
)

// TestSelectAtSteps: a step read (what a range query reads when its
// windows are shorter than its step) returns exactly the points of the
// full read that lie in the windows, from raw, from a rollup tier and
// from a range stitched of both, for counters (with their boundary
// points), gauge averages, max and count, at steps aligned to the
// windows and not, and with the first step before the data.
func TestSelectAtSteps(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	const n = 3 * 240 // 3 hours at 15 s
	data := map[string][]sample{
		`queue{job="a"}`: samplesOf(n, start.UnixMilli()+15000, 15000, func(i int) float64 { return float64(i % 9) }),
		// A counter with a reset and a gap of 20 minutes.
		`reqs_total{job="a"}`: func() []sample {
			s := samplesOf(n, start.UnixMilli()+15000, 15000, func(i int) float64 { return float64(i % 500) })
			return append(s[:300], s[380:]...)
		}(),
	}
	appendSamples(t, db, data)
	db.Flush()
	wm := start.Add(2 * time.Hour)
	_, err := db.Rollup(context.Background(), Tier1m, start, wm)
	require.NoError(t, err)
	db.Flush()
	db.SetRolledUpTo(Tier1m, wm)

	read := func(hints *promstorage.SelectHints, sw *stepWindows, ms ...*labels.Matcher) map[string][]sample {
		q, err := db.Querier(hints.Start, hints.End)
		require.NoError(t, err)
		defer q.Close()
		var ss promstorage.SeriesSet
		if sw == nil {
			ss = q.Select(context.Background(), true, hints, ms...)
		} else {
			ss = q.(*tieredQuerier).SelectAtSteps(context.Background(), true, hints, sw.First, sw.Step, sw.Last, sw.Window, ms...)
		}
		out := map[string][]sample{}
		var it chunkenc.Iterator
		for ss.Next() {
			it = ss.At().Iterator(it)
			key := ss.At().Labels().String()
			out[key] = []sample{}
			for it.Next() == chunkenc.ValFloat {
				ts, v := it.At()
				out[key] = append(out[key], sample{ts, v})
			}
		}
		require.NoError(t, ss.Err())
		return out
	}
	name := func(n string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, n) }
	minute := time.Minute.Milliseconds()
	end := start.Add(3 * time.Hour).UnixMilli()
	for _, c := range []struct {
		step, window, shift int64
		fn                  string
	}{
		{10 * minute, 2 * minute, 0, ""},
		{10 * minute, 5 * minute, 0, "rate"},
		{7 * minute, 3 * minute, 17_000, "rate"},
		{20 * minute, 5 * minute, -minute, "max_over_time"},
		{15 * minute, 4 * minute, 0, "sum_over_time"},
		{10 * minute, 2 * minute, 0, "avg_over_time"},
	} {
		sw := &stepWindows{First: start.UnixMilli() + c.shift, Step: c.step, Window: c.window}
		sw.Last = sw.First + (end-sw.First)/c.step*c.step
		hints := &promstorage.SelectHints{Start: sw.First - c.window + 1, End: sw.Last, Step: c.step, Range: c.window, Func: c.fn}
		for _, m := range []string{"queue", "reqs_total"} {
			full := read(hints, nil, name(m))
			got := read(hints, sw, name(m))
			require.Len(t, got, len(full))
			var kept, all int
			for key, ss := range full {
				want := []sample{}
				for _, s := range ss {
					if sw.Keep(s.t) {
						want = append(want, s)
					}
				}
				require.Equal(t, want, got[key], "%s %+v", key, c)
				kept, all = kept+len(want), all+len(ss)
			}
			require.Less(t, kept, all*3/4, "%s %+v: the step read drops samples", m, c)
			require.NotZero(t, kept)
		}
	}
	// Which tiers: the stitched range reads both.
	ctx, rec := WithTierRecorder(context.Background())
	q, err := db.Querier(start.UnixMilli(), end)
	require.NoError(t, err)
	ss := q.(*tieredQuerier).SelectAtSteps(ctx, true, &promstorage.SelectHints{Start: start.UnixMilli(), End: end, Step: 10 * minute, Range: 2 * minute}, start.UnixMilli()+2*minute-1, 10*minute, end, 2*minute, name("queue"))
	require.True(t, ss.Next())
	require.Equal(t, []Tier{TierRaw, Tier1m}, rec.Used())
}

func TestStepWindowsKeep(t *testing.T) {
	w := &stepWindows{First: 100, Step: 50, Last: 200, Window: 10}
	for ts, want := range map[int64]bool{
		89: false, 90: false, 91: true, 100: true, 101: false, 140: false, 141: true, 150: true,
		151: false, 191: true, 200: true, 201: false, 241: false, 250: false,
	} {
		require.Equal(t, want, w.Keep(ts), "t=%d", ts)
	}
	var none *stepWindows
	require.True(t, none.Keep(12345))

	// filter (a cursor over ascending times) keeps what keep keeps.
	for _, w := range []*stepWindows{w, {First: -7, Step: 13, Last: 300, Window: 5}, {First: 0, Step: 60, Last: 600, Window: 59}} {
		var ts []int64
		var vs []float64
		var want []int64
		for t := int64(-100); t <= 700; t += 3 {
			ts, vs = append(ts, t), append(vs, float64(t))
			if w.Keep(t) {
				want = append(want, t)
			}
		}
		got, gotV := filterSteps(w, ts, vs)
		require.Equal(t, want, got)
		require.Len(t, gotV, len(got))
	}
}

// TestBoundaryPointsAtSkips: making a counter's boundary points in step
// windows only, skipping the rows between windows, keeps what making all
// of them and then filtering keeps, for sparse and dense windows, series
// with gaps, and windows before, across and after the rows.
func TestBoundaryPointsAtSkips(t *testing.T) {
	const res = 300
	r := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		ts, vs := randomRows(r, res)
		w := randomWindows(r, res, int64(res*(1+r.IntN(3))))
		all := withBoundaryPoints(&series{ts: slices.Clone(ts), vs: slices.Clone(vs)}, res)
		wantT, wantV := filterSteps(w, all.ts, all.vs)
		got := boundaryPointsAt(&series{ts: ts, vs: vs}, res, w)
		require.Equal(t, append([]int64{}, wantT...), append([]int64{}, got.ts...), "windows %+v rows %v", *w, ts)
		require.Equal(t, append([]float64{}, wantV...), append([]float64{}, got.vs...))
	}
}

// TestWindowPointsAt: a gauge aggregate's newest version of each window
// from mint on in the step windows, made in one pass that skips the rows
// between windows, is what dedupWindows, trimBefore and filterSteps make one
// after the other, with versions, gaps, and windows before, across and
// after the rows.
func TestWindowPointsAt(t *testing.T) {
	const res = 300
	r := rand.New(rand.NewPCG(7, 8))
	for range 3000 {
		ts, vs := randomRows(r, res)
		mint := ts[0] + int64(r.IntN(3*res)) - res
		var w *stepWindows
		if r.IntN(5) > 0 {
			w = randomWindows(r, res, int64(1+r.IntN(3*res)))
		}
		want := &series{}
		want.ts, want.vs = dedupWindows(slices.Clone(ts), slices.Clone(vs), res)
		want.trimBefore(mint)
		wantT, wantV := filterSteps(w, want.ts, want.vs)
		got := windowPointsAt(&series{ts: ts, vs: vs}, res, mint, w)
		require.Equal(t, append([]int64{}, wantT...), append([]int64{}, got.ts...), "windows %v mint %d rows %v", w, mint, ts)
		require.Equal(t, append([]float64{}, wantV...), append([]float64{}, got.vs...))
	}
}

// randomRows makes up to 80 rows of a rollup tier at resolution res: at
// times several in one window (a window rolled up again), with gaps.
func randomRows(r *rand.Rand, res int) ([]int64, []float64) {
	var ts []int64
	var vs []float64
	n := 1 + r.IntN(80)
	for t0 := int64(r.IntN(2000)) - 1000; len(ts) < n; {
		ts, vs = append(ts, t0), append(vs, float64(len(ts)))
		t0 += int64(1 + r.IntN(res))
		if r.IntN(10) == 0 {
			t0 += int64(r.IntN(20 * res)) // a gap
		}
	}
	return ts, vs
}

// randomWindows makes step windows of the given length, a multiple of res
// apart, before, across or after randomRows' rows.
func randomWindows(r *rand.Rand, res int, window int64) *stepWindows {
	step := int64(res * (1 + r.IntN(60)))
	w := &stepWindows{First: int64(r.IntN(6000)) - 3000, Step: step, Window: window}
	w.Last = w.First + step*int64(r.IntN(30))
	return w
}

// TestExactTier: a range query reading whole windows through a function
// whose value over whole windows is the same from any tier may read a
// tier below the step/5 rule; anything else keeps the rule.
func TestExactTier(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	step := 20 * time.Minute
	f := func(qs string, start time.Time, step time.Duration, want Tier) {
		t.Helper()
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(qs)
		require.NoError(t, err)
		require.Equal(t, want, db.exactTier(expr, start, step, TierForStep(step, Tier5m), Tier5m), qs)
	}
	f(`histogram_quantile(0.95, sum by (le) (rate(lat_bucket[5m])))`, start, step, Tier5m)
	f(`max_over_time(queue[1h])`, start, step, Tier5m)
	f(`sum(increase(reqs_total[10m])) / sum(count_over_time(queue[1h]))`, start, step, Tier5m)
	f(`max_over_time(queue[1h] offset 1h)`, start, step, Tier5m)
	f(`max_over_time(queue[1h])`, start.Add(time.Minute), step, Tier1m) // not on 5m windows
	f(`max_over_time(queue[1h])`, start, 22*time.Minute, Tier1m)        // step
	f(`max_over_time(queue[1h] offset 1m)`, start, step, Tier1m)        // offset
	f(`rate(lat_bucket[7m])`, start, step, Tier1m)                      // range
	f(`rate(queue[5m])`, start, step, Tier1m)                           // a gauge's rate reads averages
	f(`min_over_time(reqs_total[1h])`, start, step, Tier1m)             // a counter's min is not kept
	f(`avg_over_time(queue[1h])`, start, step, Tier1m)                  // avg of unequal windows
	f(`queue`, start, step, Tier1m)                                     // the lookback
	f(`max_over_time(queue[1h:5m])`, start, step, Tier1m)               // subquery
	f(`max_over_time({__name__=~"queue"}[1h])`, start, step, Tier1m)    // no name to type
	f(`max_over_time(queue[1h])`, start, 10*time.Minute, Tier5m)        // step below 5 windows
	f(`max_over_time(queue[1h])`, start, 2*time.Minute, Tier1m)         // whole 1m windows
	f(`rate(reqs_total[5m])`, start, 2*time.Minute, TierRaw)            // raw extrapolates, rollups do not
	f(`rate(reqs_total[5m])`, start, 5*time.Minute, Tier5m)             // from 1m: the same increase
}
