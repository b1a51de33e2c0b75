package downsample

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	promrules "github.com/prometheus/prometheus/rules"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/rules"
	"github.com/aiserve/appliance/rules/rulefile"
	"github.com/aiserve/appliance/storage"
)

// TestLagAlertFiresWhileBehindAndResolves is issue 11's "1.5 million
// series in one minute" at CI size, end to end through the real rule: one
// minute holds more series than the query cap (5,000 against 1,000), the
// downsampler is stopped for ten minutes after it (as the wedged one was),
// the appliance's self-scrape stores appliance_downsample_lag_seconds every
// 15 s into the same storage and the appliance pack's DownsamplingBehind,
// compiled as the appliance loads it, is evaluated every 15 s with the
// query engine. It fires while the downsampler is behind; one pass then
// rolls every window of both tiers up (every series' four aggregates in
// 1m and in 5m), and the alert resolves at the next evaluation. The
// clock is a variable the test moves.
//
// `go run ./bench/rollup` runs the same at 1.5 million series in real
// time and prints how long after its close each window was rolled up.
func TestLagAlertFiresWhileBehindAndResolves(t *testing.T) {
	const n = 5000
	opts := storage.DefaultOptions()
	opts.Path = t.TempDir()
	opts.RollupPageSize = 1000
	opts.MaxSeriesPerQuery = 1000
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })

	minute := time.Now().Add(-time.Hour).Truncate(5 * time.Minute)
	app := db.AppenderV2(context.Background())
	b := labels.NewScratchBuilder(2)
	for i := range n {
		b.Reset()
		b.Add(labels.MetricName, "tokens_in_flight")
		b.Add("seq", strconv.Itoa(i))
		for _, off := range []time.Duration{5, 20, 35, 50} {
			_, err := app.Append(0, b.Labels(), 0, minute.Add(off*time.Second).UnixMilli(), float64(i%97), nil, nil, promstorage.AOptions{})
			require.NoError(t, err)
		}
	}
	require.NoError(t, app.Commit())

	now := minute.Add(time.Minute)
	reg := prometheus.NewRegistry()
	ds, err := New(db, Options{Now: func() time.Time { return now }, Registerer: reg})
	require.NoError(t, err)
	defer ds.Close()
	// Where the downsampler stood when it stopped: at the minute's start.
	ds.wm[storage.Tier1m], ds.wm[storage.Tier5m] = minute.UnixMilli(), minute.UnixMilli()
	db.SetRolledUpTo(storage.Tier1m, minute)
	db.SetRolledUpTo(storage.Tier5m, minute)

	alert := downsamplingBehind(t)
	eng := query.New(query.Options{}, nil, nil)
	qf := promrules.EngineQueryFunc(eng, db)
	// tick is one self-scrape of the lag and one evaluation of the rule
	// at now.
	tick := func() promrules.AlertState {
		t.Helper()
		scrapeLag(t, reg, db, now)
		_, err := alert.Eval(context.Background(), 0, now, qf, nil, 0)
		require.NoError(t, err)
		st := promrules.StateInactive
		for _, a := range alert.ActiveAlerts() {
			st = max(st, a.State)
		}
		return st
	}

	// Stopped: the lag grows past five windows and stays there for the
	// rule's 2 minutes.
	var states []promrules.AlertState
	for now.Before(minute.Add(10 * time.Minute)) {
		if st := tick(); len(states) == 0 || states[len(states)-1] != st {
			states = append(states, st)
		}
		now = now.Add(15 * time.Second)
	}
	require.Equal(t, []promrules.AlertState{promrules.StateInactive, promrules.StatePending, promrules.StateFiring}, states,
		"DownsamplingBehind goes pending past 300 s of lag and fires 2 minutes later")

	// One pass catches up through every series, past the cap.
	require.NoError(t, ds.Step(context.Background()))
	require.Zero(t, testutil.ToFloat64(ds.metrics.errors.WithLabelValues("1m"))+testutil.ToFloat64(ds.metrics.errors.WithLabelValues("5m")))
	// The four aggregates of every series, and of the two lag series the
	// self-scrape stored: nine 1m windows (M+1m to M+9m; the pass rolls up
	// to M+9m) and one 5m window.
	require.Equal(t, float64(4*n+2*4*9), testutil.ToFloat64(ds.metrics.rows.WithLabelValues("1m")), "every series' window in 1m")
	require.Equal(t, float64(4*n+2*4), testutil.ToFloat64(ds.metrics.rows.WithLabelValues("5m")), "every series' window in 5m")
	require.True(t, !ds.Watermark(storage.Tier5m).Before(minute.Add(5*time.Minute)), "the 5m window is rolled up")
	require.LessOrEqual(t, gaugeValue(t, reg, "appliance_downsample_lag_seconds", "1m"), 120.0)

	now = now.Add(15 * time.Second)
	require.Equal(t, promrules.StateInactive, tick(), "resolved once caught up")
	// The self-scrape's own samples landed below the watermark (as late
	// data) and are rolled up at the next pass like any other.
	require.NoError(t, ds.Step(context.Background()))
	require.Zero(t, testutil.ToFloat64(ds.metrics.errors.WithLabelValues("1m")))
}

// downsamplingBehind returns the appliance pack's DownsamplingBehind rule as
// the appliance evaluates it (rulefile's compiled form, warm-up included).
func downsamplingBehind(t *testing.T) *promrules.AlertingRule {
	t.Helper()
	data, ok := rules.Pack("appliance")
	require.True(t, ok)
	f, errs := rulefile.Parse(data)
	require.Empty(t, errs)
	groups, _ := f.Compile()
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "DownsamplingBehind" {
				continue
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			require.NoError(t, err)
			return promrules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", false, nil)
		}
	}
	t.Fatal("no DownsamplingBehind in the appliance pack")
	return nil
}

// scrapeLag stores the registry's appliance_downsample_lag_seconds at now
// as the appliance's self-scrape (job "appliance") does.
func scrapeLag(t *testing.T, reg *prometheus.Registry, db *storage.DB, now time.Time) {
	t.Helper()
	app := db.AppenderV2(context.Background())
	for _, tier := range []string{"1m", "5m"} {
		ls := labels.FromStrings(labels.MetricName, "appliance_downsample_lag_seconds", "instance", "localhost:9090", "job", "appliance", "tier", tier)
		_, err := app.Append(0, ls, 0, now.UnixMilli(), gaugeValue(t, reg, "appliance_downsample_lag_seconds", tier), nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
}
