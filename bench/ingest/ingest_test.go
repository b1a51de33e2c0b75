package main

import (
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/prometheus/config"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/bench/harness"
)

// The scrape config is read by Prometheus, VictoriaMetrics and the
// appliance; Prometheus' own loader is the reference for its syntax.
func TestScrapeConfigLoadsInPrometheus(t *testing.T) {
	b := scrapeConfig([]string{"127.0.0.1:9001", "127.0.0.1:9002"}, 5*time.Second)
	cfg, err := config.Load(string(b), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Len(t, cfg.ScrapeConfigs, 1)
	sc := cfg.ScrapeConfigs[0]
	require.Equal(t, "vllm", sc.JobName)
	require.Equal(t, 5*time.Second, time.Duration(sc.ScrapeInterval))
	require.Equal(t, 5*time.Second, time.Duration(sc.ScrapeTimeout))
	require.Len(t, sc.ServiceDiscoveryConfigs, 1)
}

func TestRatioUsesBestAnchor(t *testing.T) {
	mk := func(name string, peak uint64) *result {
		only, err := harness.SelectSystems(name, systems)
		require.NoError(t, err)
		return &result{sys: only[0], peakRSS: peak}
	}
	rep := &report{results: []*result{mk("prometheus", 400), mk("victoriametrics", 200), mk("appliance", 100)}}
	require.Contains(t, rep.markdown(), "0.50×")
}

// sizeFleet must land near the series asked for, counted the way the
// report counts them.
func TestSizeFleet(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" { // CI runs them, -short or not
		t.Skip("waits 15 s for the probe fleet to settle")
	}
	ctx := t.Context()
	o := options{models: 1, targetSeries: 5000, seed: 1}
	opts, err := sizeFleet(ctx, o)
	require.NoError(t, err)
	f, err := harness.StartFleet(ctx, opts)
	require.NoError(t, err)
	defer f.Stop()
	n, err := harness.SeriesPerScrape(ctx, &http.Client{Timeout: 10 * time.Second}, f.Targets())
	require.NoError(t, err)
	require.InEpsilon(t, 5000, n, 0.15, "series in a fleet of %d instances", opts.Instances)
	require.NoError(t, f.Stop())
}
