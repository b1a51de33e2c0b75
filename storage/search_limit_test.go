package storage

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// TestSearchLimitedParts: a labels-only Select with a limit returns the
// limit's series when more than the series cap match, through every kind
// of part: a family split by a high-cardinality label, one by a label
// with few values, and series without the split label.
func TestSearchLimitedParts(t *testing.T) {
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.MaxSeriesPerQuery = 50
	db, err := Open(opts)
	require.NoError(t, err)
	defer db.Close()
	app := db.AppenderV2(context.Background())
	add := func(ls labels.Labels) {
		_, err := app.Append(0, ls, 0, baseTime, 1, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	for i := range 300 {
		add(labels.FromStrings("__name__", "p_one", "job", "j"+strconv.Itoa(i%2), "i", strconv.Itoa(i)))
	}
	for i := range 40 {
		add(labels.FromStrings("__name__", "p_two", "pod", strconv.Itoa(i)))
	}
	require.NoError(t, app.Commit())
	db.Flush()
	q, err := db.Querier(baseTime-1000, baseTime+1000)
	require.NoError(t, err)
	m := labels.MustNewMatcher(labels.MatchRegexp, "__name__", "p_.*")
	count := func(limit int) (int, error) {
		ss := q.Select(context.Background(), true, &promstorage.SelectHints{Func: "series", Limit: limit, Start: baseTime - 1000, End: baseTime + 1000}, m)
		n := 0
		seen := map[string]bool{}
		for ss.Next() {
			k := ss.At().Labels().String()
			require.False(t, seen[k], "%s twice", k)
			seen[k] = true
			n++
		}
		return n, ss.Err()
	}
	_, err = count(0)
	require.ErrorIs(t, err, ErrQueryTooLarge, "without a limit the cap applies")
	for _, limit := range []int{1, 49, 51, 200, 301, 339, 340, 1000} {
		n, err := count(limit)
		require.NoError(t, err, "limit %d", limit)
		require.Equal(t, min(limit, 340), n, "limit %d", limit)
	}

	// A matcher on the label the parts are split by (i) holds in every
	// part; p_two's series have no i and match none.
	m2 := labels.MustNewMatcher(labels.MatchRegexp, "i", "1.*")
	ss := q.Select(context.Background(), true, &promstorage.SelectHints{Func: "series", Limit: 100, Start: baseTime - 1000, End: baseTime + 1000}, m, m2)
	n := 0
	for ss.Next() {
		require.True(t, strings.HasPrefix(ss.At().Labels().Get("i"), "1"), "%s", ss.At().Labels())
		n++
	}
	require.NoError(t, ss.Err())
	require.Equal(t, 100, n, "111 series match, i in 1, 10-19, 100-199")
}

// BenchmarkSeriesLimitMillion: /api/v1/series?limit=10 over 1,000,000
// matching series (SERIES_LIMIT_BENCH_SERIES to change the count), with
// the default cap of 1,000,000 series a query. Setting up takes minutes.
func BenchmarkSeriesLimitMillion(b *testing.B) {
	n := 1_000_001
	if s := os.Getenv("SERIES_LIMIT_BENCH_SERIES"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(b, err)
	}
	db := openTestDB(b, b.TempDir(), nil)
	for start := 0; start < n; start += 100_000 {
		app := db.AppenderV2(context.Background())
		for i := start; i < min(n, start+100_000); i++ {
			_, err := app.Append(0, labels.FromStrings("__name__", "bench_wide", "i", strconv.Itoa(i)), 0, baseTime, 1, nil, nil, promstorage.AOptions{})
			require.NoError(b, err)
		}
		require.NoError(b, app.Commit())
	}
	db.Flush()
	q, err := db.Querier(baseTime-1000, baseTime+1000)
	require.NoError(b, err)
	for name, m := range map[string]*labels.Matcher{
		"name":   labels.MustNewMatcher(labels.MatchEqual, "__name__", "bench_wide"),
		"regexp": labels.MustNewMatcher(labels.MatchRegexp, "__name__", "bench_.*"),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ss := q.Select(context.Background(), true, &promstorage.SelectHints{Func: "series", Limit: 11, Start: baseTime - 1000, End: baseTime + 1000}, m)
				got := 0
				for ss.Next() {
					got++
				}
				require.NoError(b, ss.Err())
				require.Equal(b, 11, got)
			}
		})
	}
}
