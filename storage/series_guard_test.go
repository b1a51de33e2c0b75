package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

func openGuardedDB(t *testing.T, dir string, limit int, now func() time.Time, reg prometheus.Registerer) *DB {
	t.Helper()
	opts := DefaultOptions()
	opts.Path = dir
	opts.MaxSeries = limit
	opts.Registerer = reg
	if now != nil {
		opts.Now = now
	}
	db, err := Open(opts)
	require.NoError(t, err)
	return db
}

// TestSeriesGuardRefusesNewSeriesOnly: at storage.max_series a new series
// is refused (ErrSeriesLimit, matching ErrOutOfBounds so a scrape skips it),
// counted for its target, while the series already there keep taking
// samples; rule results are never refused.
func TestSeriesGuardRefusesNewSeriesOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	db := openGuardedDB(t, t.TempDir(), 3, nil, reg)
	t.Cleanup(func() { require.NoError(t, db.Close()) })

	ts := time.Now().UnixMilli()
	app := db.AppenderV2(context.Background())
	for i := range 3 {
		_, err := app.Append(0, labels.FromStrings("__name__", "ok", "job", "good", "i", fmt.Sprint(i)), 0, ts, 1, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())

	app = db.AppenderV2(context.Background())
	bad := labels.FromStrings("__name__", "req", "job", "bad", "instance", "h:1", "request_id", "x")
	booked := db.names.newNameBytes.Load()
	_, err := app.Append(0, bad, 0, ts+1000, 1, nil, nil, promstorage.AOptions{})
	require.ErrorIs(t, err, ErrSeriesLimit)
	require.Equal(t, booked, db.names.newNameBytes.Load(), "a refused series books no index space")
	require.ErrorIs(t, err, promstorage.ErrOutOfBounds)
	require.Contains(t, err.Error(), "storage.max_series")
	// An existing series still flows, in the same commit.
	_, err = app.Append(0, labels.FromStrings("__name__", "ok", "job", "good", "i", "0"), 0, ts+1000, 2, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NoError(t, app.Commit())

	// Rule results (the v1 appender) are the appliance's own: counted, not refused.
	v1 := db.Appender(context.Background())
	_, err = v1.Append(0, labels.FromStrings("__name__", "ALERTS", "alertname", "x"), ts+1000, 1)
	require.NoError(t, err)
	require.NoError(t, v1.Commit())
	own := db.Own().AppenderV2(context.Background())
	_, err = own.Append(0, labels.FromStrings("__name__", "ALERTS", "alertname", "y"), 0, ts+1000, 1, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NoError(t, own.Commit())

	st := db.SeriesLimit()
	require.Equal(t, 3, st.Limit)
	require.Equal(t, 5, st.Active)
	require.Len(t, st.Refusals, 1)
	require.Equal(t, TargetKey{Job: "bad", Instance: "h:1"}, st.Refusals[0].TargetKey)
	require.EqualValues(t, 1, st.Refusals[0].Samples)
	require.Contains(t, st.Refusals[0].Example, `request_id="x"`)
	require.Equal(t, 1.0, testutil.ToFloat64(db.guard.refusedC.WithLabelValues("bad", "h:1")))

	q, err := db.Querier(ts-1, ts+2000)
	require.NoError(t, err)
	defer q.Close()
	ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "ok"))
	n := 0
	for ss.Next() {
		n++
	}
	require.NoError(t, ss.Err())
	require.Equal(t, 3, n)
	ss = q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "req"))
	require.False(t, ss.Next(), "the refused series was stored")
}

// TestSeriesGuardForgetsIdleSeries: a series without samples for a whole
// generation stops counting, so a new one is admitted in its place.
func TestSeriesGuardForgetsIdleSeries(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	db := openGuardedDB(t, t.TempDir(), 1, clock, nil)
	t.Cleanup(func() { require.NoError(t, db.Close()) })

	put := func(name string) error {
		app := db.AppenderV2(context.Background())
		_, err := app.Append(0, labels.FromStrings("__name__", name), 0, now.UnixMilli(), 1, nil, nil, promstorage.AOptions{})
		require.NoError(t, app.Commit())
		return err
	}
	require.NoError(t, put("a"))
	require.ErrorIs(t, put("b"), ErrSeriesLimit)
	now = now.Add(guardGeneration) // a is in the previous generation: still active
	require.ErrorIs(t, put("b"), ErrSeriesLimit)
	require.NoError(t, put("a")) // seen again: moves to the current one
	now = now.Add(guardGeneration)
	require.ErrorIs(t, put("b"), ErrSeriesLimit)
	now = now.Add(guardGeneration) // a idle for a whole generation
	require.NoError(t, put("b"))
	require.Equal(t, 1, db.SeriesLimit().Active)
}

// TestSeriesGuardReplayIsNeverRefused: samples acknowledged before a
// restart come back from the WAL even past the limit, and count.
func TestSeriesGuardReplayIsNeverRefused(t *testing.T) {
	crashed, fresh := t.TempDir(), t.TempDir()
	db := openTestDB(t, crashed, nil)
	ts := time.Now().UnixMilli()
	app := db.AppenderV2(WithSyncCommit(context.Background()))
	for i := range 5 {
		_, err := app.Append(0, labels.FromStrings("__name__", "m", "i", fmt.Sprint(i)), 0, ts, 1, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	copyWAL(t, crashed, fresh) // what a kill -9 leaves

	db = openGuardedDB(t, fresh, 2, nil, nil)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	require.Equal(t, 5, db.SeriesLimit().Active)
	app = db.AppenderV2(context.Background())
	_, err := app.Append(0, labels.FromStrings("__name__", "m", "i", "new"), 0, ts, 1, nil, nil, promstorage.AOptions{})
	require.ErrorIs(t, err, ErrSeriesLimit)
	_, err = app.Append(0, labels.FromStrings("__name__", "m", "i", "3"), 0, ts+1, 1, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NoError(t, app.Commit())
}

// BenchmarkSeriesGuardAdmit is the guard's cost per sample of a known
// series (the hot path of every append with storage.max_series set).
func BenchmarkSeriesGuardAdmit(b *testing.B) {
	g := newSeriesGuard(1_000_000, time.Now())
	const n = 10_000
	for i := range uint64(n) {
		g.admit(i*2654435761, false)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if !g.admit(uint64(i%n)*2654435761, false) {
			b.Fatal("refused a known series")
		}
	}
}
