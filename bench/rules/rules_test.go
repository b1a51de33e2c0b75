package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/config"
)

func TestSyntheticTargetsServeGrowingCounters(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Unix(1000, 0).UnixNano())
	s, err := startSynthetic(3, func() time.Time { return time.Unix(0, now.Load()) })
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.Len(t, s.Targets(), syntheticTargets)
	require.Equal(t, syntheticRules*3*syntheticTargets, s.Series())

	scrape := func() map[string]float64 {
		resp, err := http.Get("http://" + s.Targets()[0] + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		require.NoError(t, err)
		fam := fams["synthetic_requests_total"]
		require.NotNil(t, fam)
		out := map[string]float64{}
		for _, m := range fam.Metric {
			var key []string
			for _, l := range m.Label {
				key = append(key, l.GetName()+"="+l.GetValue())
			}
			slices.Sort(key)
			out[strings.Join(key, ",")] = m.GetCounter().GetValue()
		}
		return out
	}
	first := scrape()
	require.Len(t, first, syntheticRules*3)
	require.Contains(t, first, "code=202,grp=g186")
	now.Add(int64(15 * time.Second))
	second := scrape()
	for k, v := range first {
		require.Greater(t, second[k], v, k)
	}
	n, err := harness.CountSeries(context.Background(), http.DefaultClient, "http://"+s.Targets()[1]+"/metrics")
	require.NoError(t, err)
	require.Equal(t, syntheticRules*3, n)
}

// Both systems get 200 rules in the same groups; Prometheus' file is
// what its own parser accepts, the appliance's config what `check` does.
func TestBothSystemsGetTheSameRules(t *testing.T) {
	sc := scrapeSetup{interval: 15 * time.Second, vllm: []string{"127.0.0.1:1"}, synthetic: []string{"127.0.0.1:2"}}
	counts := map[string][2]int{}
	for _, sys := range systems {
		dir := t.TempDir()
		path, err := sys.config(dir, sc)
		require.NoError(t, err)
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Contains(t, string(raw), "evaluation_interval: 15s")
		require.Contains(t, string(raw), `- "127.0.0.1:2"`)
		switch sys.Name {
		case "prometheus":
			counts[sys.Name] = countRules(t, filepath.Join(dir, "prometheus.rules.yml"))
		case "appliance":
			cfg, err := config.LoadFile(path)
			require.NoError(t, err)
			require.Equal(t, packs, cfg.RulePacks)
			c := countRules(t, filepath.Join(dir, "synthetic.rules.yml"))
			// The packs: vllm 8 (one rule escalates into two), targets 3,
			// gpu 3; and the built-in warm-up group.
			counts[sys.Name] = [2]int{c[0] + len(packs) + 1, c[1] + 14 + 1}
		}
	}
	groups := len(packs) + 1 + (syntheticRules+rulesPerGroup-1)/rulesPerGroup
	require.Equal(t, [2]int{groups, 202}, counts["prometheus"])
	require.Equal(t, counts["prometheus"], counts["appliance"])
}

// countRules parses a rule file as Prometheus does and returns its groups
// and rules.
func countRules(t *testing.T, path string) [2]int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	rgs, errs := rulefmt.Parse(data, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	n := 0
	for _, g := range rgs.Groups {
		n += len(g.Rules)
	}
	return [2]int{len(rgs.Groups), n}
}

func TestRoundFigures(t *testing.T) {
	c0 := counters{durSum: 10, iterations: 140}
	c1 := counters{durSum: 16, iterations: 280} // 10 rounds of 14 groups
	rounds, mean := roundFigures(c0, c1, 14)
	require.InDelta(t, 10, rounds, 1e-9)
	require.Equal(t, 600*time.Millisecond, mean)
	rounds, mean = roundFigures(c1, c1, 14)
	require.Zero(t, rounds)
	require.Zero(t, mean)
}

func TestReportShowsRatio(t *testing.T) {
	prom, app := systems[0], systems[1]
	require.Equal(t, []string{"prometheus", "appliance"}, []string{prom.Name, app.Name})
	rep := &report{
		opts: options{instances: 50, interval: 15 * time.Second, warmup: 7 * time.Minute, duration: 5 * time.Minute},
		results: []*result{
			{sys: prom, rounds: 20, window: 5 * time.Minute, meanRound: 800 * time.Millisecond, cpuShare: 0.2, peakRSS: 1 << 30, sampled: []time.Duration{time.Second}},
			{sys: app, rounds: 20, window: 5 * time.Minute, meanRound: 400 * time.Millisecond, cpuShare: 0.1, peakRSS: 1 << 29},
		},
	}
	md := rep.markdown()
	require.Contains(t, md, "| time per evaluation round (mean)")
	require.Contains(t, md, "800 ms")
	require.Contains(t, md, "0.50×")
	require.Contains(t, md, "appliance ÷ Prometheus "+harness.PrometheusVersion)
}
