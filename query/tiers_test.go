package query

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/storage"
)

// TestForTiers: the engine hands the parsed query to the storage's tier
// planner (a real storage.DB whose rollup tiers cover the last hour) and
// runs what it returns; the rewrite itself is storage's and tested there
// (TestAdaptForTiers).
func TestForTiers(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	sopts := storage.DefaultOptions()
	sopts.Path = t.TempDir()
	sopts.Now = func() time.Time { return now }
	db, err := storage.Open(sopts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	db.SetRolledUpTo(storage.Tier1m, now)
	db.SetRolledUpTo(storage.Tier5m, now)

	e := New(Options{}, nil, nil)
	f := func(limit storage.Tier, opts promql.QueryOpts, in, want string, wantLookback time.Duration) {
		t.Helper()
		ctx := storage.WithMaxSourceResolution(context.Background(), limit)
		got, opts, _ := e.prepare(ctx, db, opts, in, now.Add(-time.Hour), now, time.Hour)
		require.Equal(t, want, got)
		lb := time.Duration(0)
		if opts != nil {
			lb = opts.LookbackDelta()
		}
		require.Equal(t, wantLookback, lb)
	}
	// Raw: untouched.
	f(storage.TierRaw, nil, `rate(x[1m])`, `rate(x[1m])`, 0)
	// 1m: windows of at least 2m; the default 5m lookback suffices.
	f(storage.Tier1m, nil, `rate(x[1m]) + rate(y[5m])`, `rate(x[2m]) + rate(y[5m])`, 0)
	// 5m: the query's options carry the wider lookback, and keep the
	// caller's others.
	f(storage.Tier5m, nil, `count_over_time(up{job="a"}[1h])`, `sum_over_time(up{__rollup__="count",job="a"}[1h])`, 10*time.Minute)
	f(storage.Tier5m, promql.NewPrometheusQueryOpts(true, time.Minute, nil), `x`, `x`, 10*time.Minute)
	f(storage.Tier5m, promql.NewPrometheusQueryOpts(true, 20*time.Minute, nil), `x`, `x`, 20*time.Minute)
	// What the appliance wires in (storage.remote_query's Queryable over
	// the DB) plans the same.
	hub := (*RemoteQuery)(nil).Queryable(db)
	got, _, _ := e.prepare(storage.WithMaxSourceResolution(context.Background(), storage.Tier5m), hub, nil, `count_over_time(up[1h])`, now.Add(-time.Hour), now, time.Hour)
	require.Equal(t, `sum_over_time(up{__rollup__="count"}[1h])`, got)
	// Unparseable: passed on for the engine to report.
	f(storage.Tier5m, nil, `rate(x[`, `rate(x[`, 0)

	ctx := storage.WithMaxSourceResolution(context.Background(), storage.Tier5m)
	_, opts, _ := e.prepare(ctx, db, promql.NewPrometheusQueryOpts(true, time.Minute, nil), `x`, now.Add(-time.Hour), now, time.Hour)
	require.True(t, opts.EnablePerStepStats())

	// A Queryable without tiers (rules read storage.DB.Raw) gets the
	// query unchanged.
	got, opts, _ = e.prepare(ctx, db.Raw(), promql.NewPrometheusQueryOpts(false, time.Minute, nil), `count_over_time(x[1m])`, now, now, 0)
	require.Equal(t, `count_over_time(x[1m])`, got)
	require.Equal(t, time.Minute, opts.LookbackDelta())
	got, _, _ = e.prepare(ctx, promstorage.QueryableFunc(func(int64, int64) (promstorage.Querier, error) { return promstorage.NoopQuerier(), nil }), nil, `count_over_time(x[1m])`, now, now, 0)
	require.Equal(t, `count_over_time(x[1m])`, got)
}
