package query

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/storage/storagetest"
)

// pushdownData appends random series to app, from base (unix ms) over
// about 6 hours: counters (some with resets), gauges with NaN and ±Inf,
// a classic histogram's buckets, irregular intervals, gaps, staleness
// markers and series that start or end in the middle.
func pushdownData(t testing.TB, app storage.Appender, rng *rand.Rand, base int64) {
	t.Helper()
	stale := math.Float64frombits(value.StaleNaN)
	add := func(lset labels.Labels, counter bool) {
		interval := int64([]int{5, 10, 15, 15, 30, 60}[rng.IntN(6)]) * 1000
		first := base + rng.Int64N(3600_000)
		last := base + 6*3600_000 - rng.Int64N(3600_000)
		v := rng.Float64() * 100
		for ts := first; ts <= last; ts += interval + rng.Int64N(interval/5+1) - interval/10 {
			switch r := rng.IntN(1000); {
			case r < 15: // a gap
				ts += rng.Int64N(20) * interval
				continue
			case r < 20:
				_, err := app.Append(0, lset, ts, stale)
				require.NoError(t, err)
				continue
			}
			if counter {
				if rng.IntN(400) == 0 {
					v = rng.Float64() * 3 // a reset
				} else {
					v += math.Floor(rng.Float64() * 7)
				}
			} else {
				switch r := rng.IntN(2000); {
				case r == 0:
					v = math.NaN()
				case r == 1:
					v = math.Inf(1 - 2*rng.IntN(2))
				case r < 40:
					v = math.Copysign(0, float64(1-2*rng.IntN(2))) // 0 and -0 tie in max and min
				case r < 80:
					v = float64(rng.IntN(3)) // more ties
				default:
					v = rng.NormFloat64()*50 + 1e3*float64(rng.IntN(3))
				}
			}
			_, err := app.Append(0, lset, ts, v)
			require.NoError(t, err)
		}
	}
	for _, job := range []string{"a", "b", "c"} {
		for inst := range 3 {
			l := func(name string, kv ...string) labels.Labels {
				return labels.FromStrings(append([]string{"__name__", name, "job", job, "instance", fmt.Sprint(inst)}, kv...)...)
			}
			add(l("requests_total"), true)
			add(l("requests_total", "code", "500"), true)
			add(l("queue"), false)
			for _, le := range []string{"0.1", "0.5", "1", "5", "+Inf"} {
				add(l("latency_bucket", "le", le), true)
			}
		}
	}
	// A histogram whose buckets are scraped together and stay
	// monotonic, as real ones do (latency_bucket's are not: their
	// buckets are independent counters).
	les := []string{"0.1", "0.5", "1", "5", "+Inf"}
	for _, job := range []string{"a", "b"} {
		for inst := range 2 {
			counts := make([]float64, len(les))
			for ts := base + rng.Int64N(600_000); ts <= base+6*3600_000; ts += 15_000 {
				if rng.IntN(300) == 0 {
					clear(counts) // a restart
				}
				for range rng.IntN(5) {
					le := rng.IntN(len(les))
					for k := le; k < len(les); k++ {
						counts[k]++
					}
				}
				for k, le := range les {
					lset := labels.FromStrings("__name__", "lat_bucket", "job", job, "instance", fmt.Sprint(inst), "le", le)
					_, err := app.Append(0, lset, ts, counts[k])
					require.NoError(t, err)
				}
			}
		}
	}
	// Two series with the same labels but their names: a bare function
	// of both is the engine's "same labelset" error.
	add(labels.FromStrings("__name__", "dup_a", "job", "x"), false)
	add(labels.FromStrings("__name__", "dup_b", "job", "x"), false)
	require.NoError(t, app.Commit())
}

// pushdownQueries are the queries the differential test draws from.
func pushdownQueries(rng *rand.Rand) []string {
	windows := []string{"30s", "1m", "2m", "5m", "17m", "1h"}
	funcs := []string{"rate", "increase", "delta", "irate", "idelta", "resets", "changes", "deriv",
		"max_over_time", "min_over_time", "sum_over_time", "count_over_time", "avg_over_time",
		"stddev_over_time", "stdvar_over_time", "present_over_time"}
	aggs := []string{"sum", "min", "max", "count", "avg"}
	groupings := []string{"", " by (job)", " without (instance)", " by (le, job)", " without (code, instance)", " by ()"}
	metrics := []string{"requests_total", "queue", "latency_bucket", `{__name__=~"requests_total|queue"}`, `requests_total{code!="500"}`}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	var qs []string
	for range 80 {
		inner := fmt.Sprintf("%s(%s[%s])", pick(funcs), pick(metrics), pick(windows))
		qs = append(qs, inner, fmt.Sprintf("%s%s (%s)", pick(aggs), pick(groupings), inner))
	}
	return append(qs,
		`histogram_quantile(0.95, sum by (le, job) (rate(latency_bucket[5m])))`,
		`histogram_quantile(0.95, sum by (le, job) (rate(lat_bucket[5m])))`,
		`histogram_quantile(0.5, sum without (instance) (increase(lat_bucket[2m])))`,
		`histogram_quantile(1, sum by (le) (rate(lat_bucket[1m])))`,
		`histogram_quantile(0, (sum by (le, instance) (rate(lat_bucket[30s]))))`,
		`histogram_quantile(0.9, sum by (job) (rate(lat_bucket[5m])))`,
		`histogram_quantile(0.9, sum by (le) (rate(lat_bucket[5m]))) > 0.2`,
		`histogram_quantile(1.5, sum by (le) (rate(lat_bucket[5m])))`,
		`histogram_quantile(0.99, sum by (le) (rate(lat_bucket[5m]))) / histogram_quantile(0.5, sum by (le) (rate(lat_bucket[5m])))`,
		`histogram_quantile(0.95, sum by (le) (rate(latency_bucket[5m]))) + histogram_quantile(0.95, sum by (le) (rate(lat_bucket[5m])))`,
		`histogram_quantile(0.5, sum by (le) (rate(latency_bucket[1m])))`,
		`max_over_time(queue[1h])`,
		`sum(rate(requests_total{code="500"}[5m])) / sum(rate(requests_total[5m]))`,
		`sum by (job) (rate(requests_total[5m])) > 0.5`,
		`rate(requests_total[5m]) + on(job, instance) group_left max_over_time(queue[10m])`,
		`max_over_time(dup_a[5m]) or max_over_time(dup_b[5m])`,
		`max_over_time({__name__=~"dup_.*"}[5m])`,
		`sum(sum_over_time({__name__=~"dup_.*"}[5m]))`,
		`sum(rate(requests_total[5m] offset 3m))`,
		`max_over_time(rate(requests_total[1m])[10m:1m])`,
		`sum(rate(requests_total[5m] @ 5000))`,
		`sum by (__name__) (rate(requests_total[5m]))`,
		`topk(2, rate(requests_total[5m]))`,
		`label_replace(rate(requests_total[5m]), "n", "$1", "__name__", "(.*)")`,
		`sum((rate(requests_total[5m])))`,
		`sum(rate(requests_total[5m])) by (job)`,
	)
}

// TestPushdownDifferential runs random data through the aggregation
// pushdown and through Prometheus' engine alone, for many queries,
// ranges, steps and windows, and requires the same answers bit for bit:
// the same series, the same points, the same values (NaN as NaN), the
// same warnings and errors. The pushdown does every float operation the
// engine does, in the engine's order, so no tolerance is needed. Both
// run on Prometheus' TSDB (with the test suite's language features and
// with the appliance's) and on the appliance's storage.
func TestPushdownDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 2026))
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixMilli()
	queries := pushdownQueries(rng)
	steps := []time.Duration{7 * time.Second, 15 * time.Second, time.Minute, 3 * time.Minute, 17 * time.Minute, time.Hour}

	tsdb := promqltest.NewBuiltinTestStorage(t)
	pushdownData(t, tsdb.Appender(context.Background()), rand.New(rand.NewPCG(1, 2)), base)
	db := storagetest.Open(t)
	pushdownData(t, db.Appender(context.Background()), rand.New(rand.NewPCG(1, 2)), base)

	for _, c := range []struct {
		name string
		st   storage.Queryable
		f    features
	}{
		{"tsdb", tsdb, features{}},
		{"tsdb-test-features", tsdb, testFeatures},
		{"appliance-storage", db.Raw(), features{}},
		// The tiered querier visits raw series on every core
		// (SeriesVisitor) instead of selecting them.
		{"appliance-tiered", db, features{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			on := newEngine(Options{SplitParallelism: 1}, nil, nil, c.f)
			off := newEngine(Options{SplitParallelism: 1, NoPushdown: true}, nil, nil, c.f)
			t.Cleanup(func() { _ = on.Close(); _ = off.Close() })
			for i, qs := range queries {
				step := steps[rng.IntN(len(steps))]
				start := time.UnixMilli(base + rng.Int64N(5*3600_000))
				end := start.Add(time.Duration(rng.Int64N(int64(7*time.Hour/step))) * step)
				want := runRange(t, off, c.st, qs, start, end, step)
				got := runRange(t, on, c.st, qs, start, end, step)
				requireSameResult(t, want, got, "query %d %s over [%s, %s] at %s", i, qs, start, end, step)
			}
			require.Positive(t, on.pushed.Load())
			if c.name == "appliance-tiered" {
				require.Positive(t, on.visited.Load(), "raw reads are visited")
			}
			if !c.f.delayedNameRemoval {
				require.Positive(t, on.fellBack.Load(), "the dup_ queries fall back")
			}
			t.Logf("%d queries: %d pushed down (%d reads visited), %d fell back", len(queries), on.pushed.Load(), on.visited.Load(), on.fellBack.Load())
		})
	}
}

// rangeResult is a range query's answer in a comparable form: values as
// their bits, so that NaN equals NaN and -0 differs from 0.
type rangeResult struct {
	Err      string
	Series   []string
	Warnings []string
}

func runRange(t *testing.T, e *Engine, st storage.Queryable, qs string, start, end time.Time, step time.Duration) rangeResult {
	t.Helper()
	ctx := context.Background()
	q, err := e.NewRangeQuery(ctx, st, nil, qs, start, end, step)
	require.NoError(t, err, qs)
	defer q.Close()
	res := q.Exec(ctx)
	var out rangeResult
	warns, infos := res.Warnings.AsStrings(qs, 0, 0)
	out.Warnings = append(warns, infos...)
	slices.Sort(out.Warnings)
	if res.Err != nil {
		out.Err = res.Err.Error()
		return out
	}
	m, err := res.Matrix()
	require.NoError(t, err)
	for _, s := range m {
		line := s.Metric.String()
		for _, p := range s.Floats {
			line += fmt.Sprintf(" %d:%x", p.T, math.Float64bits(p.F))
		}
		require.Empty(t, s.Histograms)
		out.Series = append(out.Series, line)
	}
	return out
}

// requireSameResult is require.Equal with a short message: the first
// series that differs, cut.
func requireSameResult(t *testing.T, want, got rangeResult, format string, args ...any) {
	t.Helper()
	cut := func(s string) string {
		if len(s) > 300 {
			return s[:300] + "..."
		}
		return s
	}
	msg := fmt.Sprintf(format, args...)
	require.Equal(t, want.Err, got.Err, msg)
	require.Equal(t, want.Warnings, got.Warnings, msg)
	require.Equal(t, len(want.Series), len(got.Series), "%s: series", msg)
	for i := range want.Series {
		if want.Series[i] != got.Series[i] {
			w, g := want.Series[i], got.Series[i]
			j := 0
			for j < len(w) && j < len(g) && w[j] == g[j] {
				j++
			}
			from := max(0, j-80)
			require.Failf(t, "different series", "%s: series %d differs at byte %d:\nwant %s\ngot  %s", msg, i, j, cut(w[from:]), cut(g[from:]))
		}
	}
}

// TestSlidingExtreme: the sliding max and min, and the scan of one
// window (windowExtreme), give Prometheus'
// max_over_time and min_over_time bit for bit on every window of random
// points full of NaN, ±Inf, 0 and -0 and ties, or leave the window to the
// function (NaNs only).
func TestSlidingExtreme(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	vals := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1, 1, 2, -3}
	for _, name := range []string{"max_over_time", "min_over_time"} {
		fn := promql.FunctionCalls[name]
		args := parser.Expressions{&parser.MatrixSelector{VectorSelector: &parser.VectorSelector{}}}
		for range 200 {
			pts := make([]promql.FPoint, 1+rng.IntN(60))
			for i := range pts {
				pts[i] = promql.FPoint{T: int64(i), F: vals[rng.IntN(len(vals))]}
			}
			vs := make([]float64, len(pts))
			for i, p := range pts {
				vs[i] = p.F
			}
			ext := slidingExtreme{max: name == "max_over_time"}
			lo, hi := 0, 0
			for hi < len(pts) {
				for n := 1 + rng.IntN(4); n > 0 && hi < len(pts); n-- {
					ext.push(vs, hi)
					hi++
				}
				lo = min(hi-1, lo+rng.IntN(4))
				enh := &promql.EvalNodeHelper{}
				want, _ := fn(nil, promql.Matrix{{Floats: pts[lo:hi]}}, args, enh)
				require.Len(t, want, 1)
				got, ok := ext.at(vs, lo)
				scan, scanOK := windowExtreme(vs[lo:hi], ext.max)
				require.Equal(t, ok, scanOK)
				require.Equal(t, math.Float64bits(got), math.Float64bits(scan), "scan of %v", pts[lo:hi])
				if !ok {
					for _, p := range pts[lo:hi] {
						require.True(t, math.IsNaN(p.F), "a window with a number is answered")
					}
					continue
				}
				require.Equal(t, math.Float64bits(want[0].F), math.Float64bits(got), "%s of %v", name, pts[lo:hi])
			}
		}
	}
}

// TestPushdownHistogramQuantile: histogram_quantile of a pushed
// aggregation is evaluated by the pushdown when its buckets are
// monotonic, and left to the engine (over the pushed aggregation) when
// some must be forced monotonic, whose annotation the engine counts its
// own way; both answer as the engine alone.
func TestPushdownHistogramQuantile(t *testing.T) {
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).UnixMilli()
	st := promqltest.NewBuiltinTestStorage(t)
	pushdownData(t, st.Appender(context.Background()), rand.New(rand.NewPCG(1, 2)), base)
	on := New(Options{SplitParallelism: 1}, nil, nil)
	off := New(Options{SplitParallelism: 1, NoPushdown: true}, nil, nil)
	t.Cleanup(func() { _ = on.Close(); _ = off.Close() })
	start, end := time.UnixMilli(base+3600_000), time.UnixMilli(base+5*3600_000)
	for _, c := range []struct {
		qs      string
		aggOnly bool
	}{
		{`histogram_quantile(0.95, sum by (le, job) (rate(lat_bucket[5m])))`, false},
		{`histogram_quantile(0.95, sum by (le, job) (rate(latency_bucket[5m])))`, true},
	} {
		ctx := context.Background()
		q, err := on.newPushdownQuery(ctx, nil, st, nil, c.qs, start, end, time.Minute)
		require.NoError(t, err)
		require.NotNil(t, q)
		res := q.Exec(ctx)
		require.NoError(t, res.Err)
		require.Equal(t, c.aggOnly, q.(*pushdownQuery).useAggOnly, c.qs)
		if c.aggOnly {
			_, infos := res.Warnings.AsStrings(c.qs, 0, 0)
			require.NotEmpty(t, infos, "forced monotonic")
		}
		q.Close()
		requireSameResult(t, runRange(t, off, st, c.qs, start, end, time.Minute), runRange(t, on, st, c.qs, start, end, time.Minute), "%s", c.qs)
	}
}

// TestCounterRate: the pushdown's rate and increase of a window without
// a reset give Prometheus' rate and increase bit for bit, on random
// windows: irregular timestamps, windows that start or end away from
// the range's edges, counters starting below 0 or at 0, flat ones, NaN;
// and on windows of a few repeated shapes (a steady scrape interval)
// with random values, through one counterRate per range, so that its
// kept shape is used for values it was not computed with.
func TestCounterRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, name := range []string{"rate", "increase"} {
		fn := promql.FunctionCalls[name]
		var ranges []int64
		for range 6 {
			rangeMs := int64(1+rng.IntN(600)) * 1000
			if rng.IntN(4) == 0 {
				rangeMs += rng.Int64N(1000) // not whole seconds
			}
			ranges = append(ranges, rangeMs)
		}
		rates := make(map[int64]*counterRate)
		for range 20000 {
			rangeMs := ranges[rng.IntN(len(ranges))]
			ms := &parser.MatrixSelector{VectorSelector: &parser.VectorSelector{}, Range: time.Duration(rangeMs) * time.Millisecond}
			c := rates[rangeMs]
			if c == nil {
				c = &counterRate{isRate: name == "rate", rangeMs: rangeMs, rangeSeconds: ms.Range.Seconds()}
				rates[rangeMs] = c
			}
			args := parser.Expressions{ms}
			ts := rng.Int64N(1e12)
			steady := rng.IntN(2) == 0
			n := 2 + rng.IntN(40)
			interval := int64(0)
			if steady {
				n = 2 + rng.IntN(3)
				interval = rangeMs/int64(n+rng.IntN(2)) - int64(rng.IntN(2))
			}
			pts := make([]promql.FPoint, n)
			t0 := ts - rangeMs + 1 + rng.Int64N(rangeMs/2+1)
			if steady {
				t0 = ts - rangeMs + []int64{1, interval / 3, interval / 2, interval}[rng.IntN(4)]
			}
			v := []float64{0, -5, rng.Float64() * 1e6, 3, 0.25}[rng.IntN(5)]
			for i := range pts {
				pts[i] = promql.FPoint{T: t0, F: v}
				if steady {
					t0 += interval
				} else {
					t0 += 1 + rng.Int64N(rangeMs/int64(n)+1)
				}
				if rng.IntN(3) > 0 {
					v += math.Floor(rng.Float64() * []float64{100, 1, 1e7}[rng.IntN(3)])
				}
				if rng.IntN(200) == 0 {
					v = math.NaN()
				}
			}
			for n > 0 && pts[n-1].T > ts {
				n--
			}
			if n < 2 {
				continue
			}
			pts = pts[:n]
			vs := make([]float64, n)
			for i, p := range pts {
				vs[i] = p.F
			}
			if r := countResets(nil, vs); r[n-1] != r[0] {
				continue // the function's own path
			}
			enh := &promql.EvalNodeHelper{Ts: ts}
			want, _ := fn(nil, promql.Matrix{{Floats: pts}}, args, enh)
			require.Len(t, want, 1)
			got := c.at(pts[0], pts[n-1], n-1, ts)
			require.Equal(t, math.Float64bits(want[0].F), math.Float64bits(got), "%s over %dms at %d of %v", name, rangeMs, ts, pts)
		}
		// Two samples 15 s apart, the first 16 s into a 60 s window
		// (below the threshold of 16.5 s): durationToZero (15 s × 10/9.5)
		// is above the sampled interval and below durationToStart.
		ms := &parser.MatrixSelector{VectorSelector: &parser.VectorSelector{}, Range: time.Minute}
		c := &counterRate{isRate: name == "rate", rangeMs: 60000, rangeSeconds: 60}
		for _, first := range []float64{10, 100, 10} {
			pts := []promql.FPoint{{T: 16000, F: first}, {T: 31000, F: first + 9.5}}
			want, _ := fn(nil, promql.Matrix{{Floats: pts}}, parser.Expressions{ms}, &promql.EvalNodeHelper{Ts: 60000})
			got := c.at(pts[0], pts[1], 1, 60000)
			require.Equal(t, math.Float64bits(want[0].F), math.Float64bits(got), "%s from %v", name, first)
		}
	}
}

// countResets returns, for each point, how many counter resets (a value
// below the one before it, as extrapolatedRate counts them) happened up
// to it.
func countResets(dst []int32, vs []float64) []int32 {
	dst = slices.Grow(dst[:0], len(vs))[:len(vs)]
	var n int32
	for i := range vs {
		if i > 0 && vs[i] < vs[i-1] {
			n++
		}
		dst[i] = n
	}
	return dst
}
