package downsample

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aiserve/appliance/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// TestManySeriesInOneMinute: more series in one window than the query
// cap. The downsampler pages through them (storage's RollupPageSize), so
// every window is rolled up in one pass, and the lag metric that the
// DownsamplingBehind alert reads (rules/packs/appliance.yml: > 300s on the
// 1m tier) is above its threshold while the downsampler is behind and
// back below it after the pass.
//
// CI size: 5,000 series, pages of 1,000, a query cap of 1,000.
// DOWNSAMPLE_SERIES=1500000 runs the size with the default page
// size and cap (1,000,000): see the report for the numbers.
func TestManySeriesInOneMinute(t *testing.T) {
	n, page, maxSeries := 5000, 1000, 1000
	if s := os.Getenv("DOWNSAMPLE_SERIES"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err)
		page, maxSeries = 0, 0 // the defaults
	}
	opts := storage.DefaultOptions()
	opts.Path = t.TempDir()
	opts.RollupPageSize = page
	opts.MaxSeriesPerQuery = maxSeries
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })

	// One minute of samples, two per series, an hour ago.
	minute := time.Now().Add(-time.Hour).Truncate(time.Minute)
	write := func(m time.Time) {
		began := time.Now()
		const batch = 50_000
		app := db.AppenderV2(context.Background())
		b := labels.NewScratchBuilder(2)
		for i := range n {
			b.Reset()
			b.Add(labels.MetricName, "tokens_in_flight")
			b.Add("seq", strconv.Itoa(i))
			ls := b.Labels()
			for _, off := range []time.Duration{20 * time.Second, 50 * time.Second} {
				_, err := app.Append(0, ls, 0, m.Add(off).UnixMilli(), float64(i%97), nil, nil, promstorage.AOptions{})
				require.NoError(t, err)
			}
			if (i+1)%batch == 0 {
				require.NoError(t, app.Commit())
				app = db.AppenderV2(context.Background())
			}
		}
		require.NoError(t, app.Commit())
		db.Flush()
		t.Logf("wrote %d series in %s", n, time.Since(began).Round(time.Millisecond))
	}
	write(minute)

	// The downsampler's clock is 10 minutes past the minute: it is behind.
	now := minute.Add(10 * time.Minute)
	var began time.Time
	reg := prometheus.NewRegistry()
	ds, err := New(db, Options{Now: func() time.Time { return now }, Registerer: reg})
	require.NoError(t, err)
	defer ds.Close()
	// New starts at the raw retention's start; pretend the downsampler
	// was at the minute's start when it stopped.
	ds.wm[storage.Tier1m], ds.wm[storage.Tier5m] = minute.UnixMilli(), minute.Truncate(5*time.Minute).UnixMilli()
	db.SetRolledUpTo(storage.Tier1m, minute)
	db.SetRolledUpTo(storage.Tier5m, minute.Truncate(5*time.Minute))
	lag := func(tier string) float64 {
		return gaugeValue(t, reg, "appliance_downsample_lag_seconds", tier)
	}
	require.Greater(t, lag("1m"), 300.0, "DownsamplingBehind's condition holds while behind")

	began = time.Now()
	require.NoError(t, ds.Step(context.Background()))
	took := time.Since(began)
	require.LessOrEqual(t, lag("1m"), 120.0, "caught up: one window plus the delay")
	require.True(t, ds.Watermark(storage.Tier1m).After(minute.Add(time.Minute)))
	rows := testutil.ToFloat64(ds.metrics.rows.WithLabelValues("1m"))
	require.Equal(t, float64(4*n), rows, "max, negmin, sum and count of every series")
	require.Zero(t, testutil.ToFloat64(ds.metrics.errors.WithLabelValues("1m")))
	t.Logf("one pass rolled up %d series (%d rows into 1m, %g into 5m) in %s", n, int(rows),
		testutil.ToFloat64(ds.metrics.rows.WithLabelValues("5m")), took.Round(time.Millisecond))

	// The next minute, the rollup series exist: the steady state.
	write(minute.Add(10 * time.Minute))
	now = minute.Add(12 * time.Minute)
	began = time.Now()
	require.NoError(t, ds.Step(context.Background()))
	took = time.Since(began)
	require.LessOrEqual(t, lag("1m"), 120.0)
	require.Equal(t, float64(8*n), testutil.ToFloat64(ds.metrics.rows.WithLabelValues("1m")))
	t.Logf("the next minute's pass: %s", took.Round(time.Millisecond))
}

// gaugeValue returns the value of gauge name{tier=tier} in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, tier string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tier" && l.GetValue() == tier {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{tier=%q}", name, tier)
	return 0
}
