package query

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// tiered is a Queryable that reports a fixed resolution.
type tiered struct {
	storage.Queryable
	res time.Duration
}

func (p tiered) CoarsestResolution(context.Context, int64, int64, time.Duration) time.Duration {
	return p.res
}

func TestForTiers(t *testing.T) {
	e := New(Options{}, nil, nil)
	now := time.Now()
	f := func(res time.Duration, in, want string, wantLookback time.Duration) {
		t.Helper()
		got, opts := e.forTiers(context.Background(), tiered{res: res}, nil, in, now.Add(-time.Hour), now, time.Hour)
		require.Equal(t, want, got)
		lb := time.Duration(0)
		if opts != nil {
			lb = opts.LookbackDelta()
		}
		require.Equal(t, wantLookback, lb)
	}
	// Raw: untouched.
	f(0, `rate(x[1m])`, `rate(x[1m])`, 0)
	// 1m: windows of at least 2m; the default 5m lookback suffices.
	f(time.Minute, `rate(x[1m]) + rate(y[5m])`, `rate(x[2m]) + rate(y[5m])`, 0)
	// 5m: windows of at least 10m, lookback 10m, count_over_time sums the
	// stored counts.
	f(5*time.Minute, `sum by (le) (rate(x_bucket[5m]))`, `sum by (le) (rate(x_bucket[10m]))`, 10*time.Minute)
	f(5*time.Minute, `count_over_time(up{job="a"}[1h])`, `sum_over_time(up{__rollup__="count",job="a"}[1h])`, 10*time.Minute)
	f(5*time.Minute, `max_over_time(x[30m:1m])`, `max_over_time(x[30m:1m])`, 10*time.Minute)
	// Unparseable: passed on for the engine to report.
	f(5*time.Minute, `rate(x[`, `rate(x[`, 0)

	// A Queryable without tiers (rules read storage.DB.Raw) gets the
	// query unchanged.
	got, opts := e.forTiers(context.Background(), storage.QueryableFunc(func(int64, int64) (storage.Querier, error) { return storage.NoopQuerier(), nil }), promql.NewPrometheusQueryOpts(false, time.Minute, nil), `count_over_time(x[1m])`, now, now, 0)
	require.Equal(t, `count_over_time(x[1m])`, got)
	require.Equal(t, time.Minute, opts.LookbackDelta())
}
