package storage

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

// TestAdaptForTiers: the query rewrite follows the coarsest tier the plan
// reads (here capped by max_source_resolution, with both rollup tiers
// covering the last hour).
func TestAdaptForTiers(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.Now = func() time.Time { return now }
	db, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	db.SetRolledUpTo(Tier1m, now)
	db.SetRolledUpTo(Tier5m, now)
	p := parser.NewParser(parser.Options{})

	f := func(limit Tier, in, want string, wantLookback time.Duration) {
		t.Helper()
		expr, err := p.ParseExpr(in)
		require.NoError(t, err)
		ctx := WithMaxSourceResolution(context.Background(), limit)
		lb, ok := db.AdaptForTiers(ctx, expr, now.Add(-time.Hour), now, time.Hour, 5*time.Minute)
		require.Equal(t, limit != TierRaw, ok)
		require.Equal(t, want, expr.String())
		require.Equal(t, wantLookback, lb)
	}
	// Raw: untouched.
	f(TierRaw, `rate(x[1m])`, `rate(x[1m])`, 5*time.Minute)
	f(TierRaw, `count_over_time(x[1m])`, `count_over_time(x[1m])`, 5*time.Minute)
	// 1m: windows of at least 2m; the default 5m lookback suffices.
	f(Tier1m, `rate(x[1m]) + rate(y[5m])`, `rate(x[2m]) + rate(y[5m])`, 5*time.Minute)
	// 5m: windows of at least 10m, lookback 10m, count_over_time sums the
	// stored counts.
	f(Tier5m, `sum by (le) (rate(x_bucket[5m]))`, `sum by (le) (rate(x_bucket[10m]))`, 10*time.Minute)
	f(Tier5m, `count_over_time(up{job="a"}[1h])`, `sum_over_time(up{__rollup__="count",job="a"}[1h])`, 10*time.Minute)
	f(Tier5m, `max_over_time(x[30m:1m])`, `max_over_time(x[30m:1m])`, 10*time.Minute)

	// A 20-minute step prefers 1m (step/5), but whole 5m windows of a
	// counter's rate read the 5m tier, unwidened, as they would read 1m.
	expr0, err := p.ParseExpr(`sum by (le) (rate(x_bucket[5m]))`)
	require.NoError(t, err)
	lb0, ok0 := db.AdaptForTiers(WithMaxSourceResolution(context.Background(), Tier5m), expr0, now.Add(-time.Hour), now, 20*time.Minute, 5*time.Minute)
	require.True(t, ok0)
	require.Equal(t, `sum by (le) (rate(x_bucket{__rollup__="5m"}[5m]))`, expr0.String())
	require.Equal(t, 10*time.Minute, lb0)

	// An instant query prefers raw, which covers the last week: untouched.
	expr, err := p.ParseExpr(`rate(x[1m])`)
	require.NoError(t, err)
	lb, ok := db.AdaptForTiers(context.Background(), expr, now, now, 0, 5*time.Minute)
	require.False(t, ok)
	require.Equal(t, 5*time.Minute, lb)
	require.Equal(t, `rate(x[1m])`, expr.String())
}
