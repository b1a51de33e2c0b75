package storagetest

import (
	"context"
	"math"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/storage"
)

// Open opens a DB with storage.DefaultOptions in a fresh t.TempDir() and
// closes it when the test ends.
func Open(t testing.TB) *storage.DB {
	t.Helper()
	return OpenOptions(t, storage.DefaultOptions())
}

// OpenOptions opens a DB with opts; an empty opts.Path is a fresh
// t.TempDir(). The DB is closed when the test ends, and a failing Close
// fails the test.
func OpenOptions(t testing.TB, opts storage.Options) *storage.DB {
	t.Helper()
	if opts.Path == "" {
		opts.Path = t.TempDir()
	}
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// Sample is one float sample read back: its timestamp in milliseconds and
// its value (a staleness marker is value.StaleNaN, bit for bit).
type Sample struct {
	T int64
	V float64
}

// Select returns, for every series the selector matches (a PromQL series
// selector such as `{job="vllm"}` or `up{instance=~".+"}`), its samples of
// all time in time order, keyed by the series' labels as
// labels.Labels.String prints them: `{__name__="up", job="vllm"}`.
func Select(t testing.TB, db *storage.DB, selector string) map[string][]Sample {
	t.Helper()
	ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(selector)
	require.NoError(t, err, "selector %s", selector)
	db.Flush()
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close()) }()
	ss := q.Select(context.Background(), true, nil, ms...)
	out := map[string][]Sample{}
	var it chunkenc.Iterator
	for ss.Next() {
		s := ss.At()
		key := s.Labels().String()
		it = s.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			require.Equal(t, chunkenc.ValFloat, vt, "series %s", key)
			ts, v := it.At()
			out[key] = append(out[key], Sample{T: ts, V: v})
		}
		require.NoError(t, it.Err(), "series %s", key)
	}
	require.NoError(t, ss.Err())
	return out
}

// Last returns the last sample's value of every series the selector
// matches, keyed as in Select.
func Last(t testing.TB, db *storage.DB, selector string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, ss := range Select(t, db, selector) {
		if len(ss) > 0 {
			out[k] = ss[len(ss)-1].V
		}
	}
	return out
}
