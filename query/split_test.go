package query

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/stats"
	"github.com/stretchr/testify/require"
)

// TestSplitRangeQueries: a long range query split into parts returns
// exactly what the unsplit query returns, for series that exist in only
// some parts, aggregations, histograms of rates, subqueries, `@` and
// errors; `@ start()`/`@ end()` queries and short ones are not split.
func TestSplitRangeQueries(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 1m
  http_requests_total{job="a",instance="1"} 0+3x1000
  http_requests_total{job="a",instance="2"} 0+5x400 0+5x600
  http_requests_total{job="0",instance="1"} _x500 0+7x500
  latency_bucket{le="0.1"} 0+1x1000
  latency_bucket{le="1"}   0+4x1000
  latency_bucket{le="+Inf"} 0+5x1000
  queue{instance="1"} 1 5 2 9 3 7 1 0 4 4 8 6 2 1 0 3 9 9 2 5 1x980
`)
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	whole := New(Options{SplitParallelism: 1}, nil, nil)
	split := New(Options{SplitParallelism: 3}, nil, nil)
	// The ranges here are hours: parts of any length (minRangePerPart is
	// checked below).
	split.minSplitRange = 0
	start, end, step := time.Unix(600, 0), time.Unix(59_400, 0), 60*time.Second // 981 steps

	for _, qs := range []string{
		`http_requests_total`,
		`rate(http_requests_total[5m])`,
		`sum by (job) (increase(http_requests_total[10m]))`,
		`histogram_quantile(0.9, sum by (le) (rate(latency_bucket[5m])))`,
		`topk(1, queue)`,
		`max_over_time(queue[7m])`,
		`avg_over_time(rate(http_requests_total[5m])[30m:2m])`,
		`queue @ 3000`,
		`time() - timestamp(queue)`,
		`absent(nonexistent)`,
		`http_requests_total{job="0"} offset 1h`,
	} {
		t.Run(qs, func(t *testing.T) {
			require.Equal(t, 3, split.splitParts(mustParse(t, split, qs), start, end, step))
			want := rangeQuery(t, whole, st, qs, start, end, step)
			got := rangeQuery(t, split, st, qs, start, end, step)
			require.Equal(t, want, got)
		})
	}

	// Parts of at least minRangePerPart: 7 days run whole, 30 days in
	// parts of 7.5 days, 90 days in three.
	def := New(Options{SplitParallelism: 3}, nil, nil)
	now := time.Unix(90*86400, 0)
	for days, want := range map[int]int{1: 1, 7: 1, 14: 2, 30: 3, 90: 3} {
		rng := time.Duration(days) * 24 * time.Hour
		require.Equal(t, want, def.splitParts(mustParse(t, def, `queue`), now.Add(-rng), now, rng/500), "%d days", days)
	}

	// Not split: too few steps, or a value tied to the range's ends.
	require.Equal(t, 1, split.splitParts(mustParse(t, split, `queue`), start, start.Add(150*step), step))
	require.Equal(t, 1, split.splitParts(mustParse(t, split, `queue @ end()`), start, end, step))
	require.Equal(t, 1, split.splitParts(mustParse(t, split, `rate(queue[5m] @ start())`), start, end, step))
	require.Equal(t, 1, split.splitParts(mustParse(t, split, `max_over_time(queue[5m:1m] @ end())`), start, end, step))
	require.Equal(t, 1, whole.splitParts(mustParse(t, whole, `queue`), start, end, step))
	// Durations and functions of the query's range (found by
	// TestPromQLCompliance: each part would see its own range).
	exp := newEngine(Options{SplitParallelism: 3}, nil, nil, testFeatures)
	exp.minSplitRange = 0
	for _, qs := range []string{
		`rate(queue[step()])`, `queue offset range()`, `max_over_time(queue[2 * step()])`,
		`queue offset min_of(range(), 8s)`, `avg_over_time(queue[5m:step()])`,
		`step()`, `vector(range())`, `queue + end()`, `start()`,
	} {
		require.Equal(t, 1, exp.splitParts(mustParse(t, exp, qs), start, end, step), qs)
	}
	require.Equal(t, 3, exp.splitParts(mustParse(t, exp, `rate(queue[5m] offset (1h + 5m))`), start, end, step))

	// Errors and limits reach the caller as the unsplit query's would.
	small := New(Options{SplitParallelism: 2, MaxSamples: 10}, nil, nil)
	small.minSplitRange = 0
	q, err := small.NewRangeQuery(ctx, st, nil, `http_requests_total[1h]`, start, end, step)
	require.Error(t, err, "a range vector is refused before the split")
	require.Nil(t, q)
	// (Not a query the pushdown takes: those run whole, pushesDown.)
	q, err = small.NewRangeQuery(ctx, st, nil, `quantile_over_time(0.5, http_requests_total[1h])`, start, end, step)
	require.NoError(t, err)
	_, isSplit := q.(deadlineQuery).Query.(*splitQuery)
	require.True(t, isSplit)
	res := q.Exec(ctx)
	var tooMany promql.ErrTooManySamples
	require.ErrorAs(t, res.Err, &tooMany)
	q.Close()
	// One the pushdown takes runs whole: it uses every core itself.
	q, err = small.NewRangeQuery(ctx, st, nil, `sum(sum_over_time(http_requests_total[1h]))`, start, end, step)
	require.NoError(t, err)
	_, isSplit = q.(deadlineQuery).Query.(*splitQuery)
	require.False(t, isSplit)
	q.Close()
}

func mustParse(t *testing.T, e *Engine, qs string) parser.Expr {
	t.Helper()
	expr, err := e.parser.ParseExpr(qs)
	require.NoError(t, err)
	return expr
}

func rangeQuery(t *testing.T, e *Engine, st storage.Queryable, qs string, start, end time.Time, step time.Duration) promql.Matrix {
	t.Helper()
	ctx := context.Background()
	q, err := e.NewRangeQuery(ctx, st, nil, qs, start, end, step)
	require.NoError(t, err)
	defer q.Close()
	require.Equal(t, qs, q.String())
	res := q.Exec(ctx)
	require.NoError(t, res.Err)
	m, err := res.Matrix()
	require.NoError(t, err)
	// What the HTTP API renders for stats=all.
	require.NotNil(t, stats.NewQueryStats(q.Stats()))
	// Copy: Close recycles the points.
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		out[i] = promql.Series{Metric: s.Metric, Floats: append([]promql.FPoint(nil), s.Floats...), Histograms: append([]promql.HPoint(nil), s.Histograms...)}
	}
	return out
}
