package query

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"
)

// TestStepReads: a range query whose windows are shorter than its step
// reads only the samples in them (the others never reach the engine)
// and answers exactly as Prometheus' engine reading everything, for
// rates, gauges, offsets, steps not aligned to the data, lookback reads
// and a series that ends; queries with subqueries or `@` read all.
func TestStepReads(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 15s
  http_requests_total{job="a"} 0+3x2000
  http_requests_total{job="b"} 0+5x800 0+5x1200
  queue{job="a"} 1 5 2 9 3 7 1 0 4 4 8 6 2 1 0 3 9 9 2 5 1x1980
  short{job="a"} 1x300
`)
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	ours := New(Options{SplitParallelism: 2}, nil, nil)
	start, end, step := time.Unix(1200, 0), time.Unix(29_000, 0), 17*time.Minute+3*time.Second
	for _, qs := range []string{
		`rate(http_requests_total[5m])`,
		`sum by (job) (increase(http_requests_total[2m] offset 7m))`,
		`max_over_time(queue[3m])`,
		`queue`,
		`short`,
		`count_over_time(short[1m])`,
		`queue - queue offset -3m`,
		`rate(http_requests_total[30m])`, // window longer than the step
		`max_over_time(rate(http_requests_total[1m])[5m:1m])`,
		`queue @ 5000`,
	} {
		t.Run(qs, func(t *testing.T) {
			// Prometheus' engine under ours, reading everything.
			pq, err := ours.Engine.NewRangeQuery(ctx, st, nil, qs, start, end, step)
			require.NoError(t, err)
			defer pq.Close()
			res := pq.Exec(ctx)
			require.NoError(t, res.Err)
			m, err := res.Matrix()
			require.NoError(t, err)
			want := make(promql.Matrix, len(m))
			for i, s := range m {
				want[i] = promql.Series{Metric: s.Metric, Floats: s.Floats, Histograms: s.Histograms}
			}
			got := rangeQuery(t, ours, st, qs, start, end, step)
			require.Equal(t, want, got)
		})
	}
	require.False(t, stepReadable(mustParse(t, ours, `max_over_time(rate(http_requests_total[1m])[5m:1m])`)))
	require.False(t, stepReadable(mustParse(t, ours, `queue @ 5000`)))
	require.True(t, stepReadable(mustParse(t, ours, `sum(rate(http_requests_total[1m] offset 1h)) / sum(queue)`)))

	// What the engine is given: the samples in the windows only.
	sq := ours.withStepReads(st, `rate(http_requests_total[5m])`, start, end, step, 5*time.Minute)
	_, wrapped := sq.(stepQueryable)
	require.True(t, wrapped)
	count := func(q storage.Queryable) int {
		qr, err := q.Querier(start.UnixMilli()-300_000, end.UnixMilli())
		require.NoError(t, err)
		defer qr.Close()
		ss := qr.Select(ctx, true, &storage.SelectHints{Start: start.UnixMilli() - 300_000 + 1, End: end.UnixMilli(), Step: step.Milliseconds(), Range: 300_000},
			labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "http_requests_total"))
		n := 0
		var it chunkenc.Iterator
		for ss.Next() {
			it = ss.At().Iterator(it)
			for it.Next() != chunkenc.ValNone {
				n++
			}
			require.Equal(t, chunkenc.ValNone, it.Seek(end.UnixMilli()+1))
		}
		require.NoError(t, ss.Err())
		return n
	}
	all, kept := count(st), count(sq)
	// 5m of each 17m03s window: 20 samples a step, 2 series, 28 steps.
	require.Equal(t, 2*20*28, kept)
	require.Greater(t, all, 3*kept)
}

func TestStepWindows(t *testing.T) {
	sq := stepQueryable{start: 100_000, end: 1_000_000, step: 60_000, lookback: 30_000}
	// rate(x[20s] offset 5s)
	w, ok := sq.windows(&storage.SelectHints{Start: 100_000 - 5_000 - 20_000 + 1, End: 995_000, Step: 60_000, Range: 20_000})
	require.True(t, ok)
	require.Equal(t, stepWindows{First: 95_000, Step: 60_000, Last: 995_000, Window: 20_000}, w)
	// An instant selector reads the lookback.
	w, ok = sq.windows(&storage.SelectHints{Start: 100_000 - 30_000 + 1, End: 1_000_000, Step: 60_000})
	require.True(t, ok)
	require.Equal(t, int64(30_000), w.Window)
	// A window as long as the step reads everything; other steps, label
	// reads and hints that do not fit the query's range are left alone.
	for _, h := range []*storage.SelectHints{
		{Start: 100_000 - 60_000 + 1, End: 1_000_000, Step: 60_000, Range: 60_000},
		{Start: 100_000 - 20_000 + 1, End: 1_000_000, Step: 30_000, Range: 20_000},
		{Start: 100_000 - 20_000 + 1, End: 1_000_000, Step: 60_000, Range: 20_000, Func: "series"},
		{Start: 100_000 - 20_000, End: 1_000_000, Step: 60_000, Range: 20_000},
		nil,
	} {
		_, ok := sq.windows(h)
		require.False(t, ok, "%+v", h)
	}
	require.True(t, (&stepWindows{First: 100, Step: 50, Last: 200, Window: 10}).Keep(191))
	require.False(t, (&stepWindows{First: 100, Step: 50, Last: 200, Window: 10}).Keep(190))
	require.False(t, (&stepWindows{First: 100, Step: 50, Last: 200, Window: 10}).Keep(201))
}
