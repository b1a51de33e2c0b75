package rules

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"
	"github.com/prometheus/prometheus/promql"
	promrules "github.com/prometheus/prometheus/rules"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/teststorage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/storage"
)

// BenchmarkRuleRound times one evaluation round of 200 rules (the vllm,
// targets and gpu packs compiled, over 50 simulated vLLM instances with
// two models each, plus synthetic recording and alerting rules) on about
// 100,000 series with 10 minutes of 15s samples, side by side:
//
//   - appliance: Prometheus' rules manager over the appliance's query
//     engine and raw tier, in the steady state: the rules ran while the
//     samples arrived, as in an appliance up for more than recentSpan
//     (16 minutes), so their selectors read the in-memory recent window;
//   - appliance-cold: the same, with the samples loaded before any rule
//     ran, as in the first 16 minutes after a start: every selector
//     searches VictoriaMetrics;
//   - prometheus: the same manager, the same rules, the same samples, over
//     Prometheus v0.316.0's engine and TSDB, as Prometheus runs them
//     (sequentially within a group: its concurrent-rule-eval is an opt-in
//     feature flag).
//
// cpu-%-at-15s is the time of a round as a share of a 15s evaluation
// interval on one core. Compare the rows by their ratio, from one run:
//
//	go test ./rules/ -run '^$' -bench RuleRound -benchtime 5x
//
// The data set is built once per process (about a minute on 2 cores).
func BenchmarkRuleRound(b *testing.B) {
	d := benchDataSet(b)
	b.Run("appliance", func(b *testing.B) {
		var now atomic.Int64
		// Before the data: the first round turns the rules' metric
		// names hot, so the window keeps everything loaded after it.
		now.Store(d.base.Add(-6 * time.Minute).UnixMilli())
		db := d.openAppliance(b, func() time.Time { return time.UnixMilli(now.Load()) })
		groups := loadBenchGroups(b, d, db.Raw(), db, query.New(query.Options{}, nil, nil))
		evalRound(groups, d.base.Add(-6*time.Minute))
		now.Store(d.end().UnixMilli())
		require.NoError(b, d.load(db.AppenderV2(context.Background())))
		db.Flush()
		benchRounds(b, groups, d.end())
		n, bytes := db.RecentWindowStats()
		b.ReportMetric(float64(n), "window-series")
		b.ReportMetric(float64(bytes)/(1<<20), "window-MiB")
	})
	b.Run("appliance-cold", func(b *testing.B) {
		db := d.openAppliance(b, nil)
		require.NoError(b, d.load(db.AppenderV2(context.Background())))
		db.Flush()
		groups := loadBenchGroups(b, d, db.Raw(), db, query.New(query.Options{}, nil, nil))
		benchRounds(b, groups, d.end())
	})
	b.Run("prometheus", func(b *testing.B) {
		st := d.prometheus(b)
		eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: 2 * time.Minute, LookbackDelta: 5 * time.Minute})
		benchRounds(b, loadBenchGroups(b, d, st, st, eng), d.end())
	})
}

const (
	benchInstances     = 50
	benchSyntheticGrps = 187 // 200 rules minus the 13 of the packs
	benchPerGroup      = 486 // synthetic series per rule: ~91k in all
	benchSamples       = 41  // 10 minutes at 15s
	benchStep          = 15 * time.Second
)

type benchData struct {
	base   time.Time
	series []labels.Labels
	values func(i, j int) float64
	rules  string
}

var (
	benchOnce sync.Once
	benchSet  *benchData
	benchErr  error
)

func benchDataSet(b *testing.B) *benchData {
	benchOnce.Do(func() { benchSet, benchErr = buildBenchData() })
	require.NoError(b, benchErr)
	return benchSet
}

func buildBenchData() (*benchData, error) {
	d := &benchData{base: time.Now().Add(-benchSamples * benchStep).Truncate(benchStep)}
	histos := map[string][]string{
		"vllm:e2e_request_latency_seconds_bucket":       {"0.3", "0.5", "0.8", "1", "1.5", "2", "2.5", "5", "10", "15", "20", "30", "40", "50", "60", "120", "240", "480", "960", "1920", "7680", "+Inf"},
		"vllm:time_to_first_token_seconds_bucket":       {"0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1", "2.5", "5", "7.5", "10", "20", "40", "80", "160", "640", "2560", "+Inf"},
		"vllm:time_per_output_token_seconds_bucket":     {"0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75", "1", "2.5", "5", "7.5", "10", "20", "40", "80", "+Inf"},
		"vllm:request_queue_time_seconds_bucket":        {"0.3", "0.5", "0.8", "1", "1.5", "2", "2.5", "5", "10", "15", "20", "30", "40", "50", "60", "120", "240", "480", "960", "1920", "7680", "+Inf"},
		"vllm:request_inference_time_seconds_bucket":    {"0.3", "0.5", "0.8", "1", "1.5", "2", "2.5", "5", "10", "15", "20", "30", "40", "50", "60", "+Inf"},
		"vllm:request_prefill_time_seconds_bucket":      {"0.3", "0.5", "0.8", "1", "1.5", "2", "2.5", "5", "10", "+Inf"},
		"vllm:request_generation_tokens_bucket":         {"1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "2000", "5000", "+Inf"},
		"vllm:request_prompt_tokens_bucket":             {"1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "2000", "5000", "+Inf"},
		"vllm:iteration_tokens_total_bucket":            {"1", "8", "16", "32", "64", "128", "256", "512", "1024", "2048", "+Inf"},
		"vllm:request_max_num_generation_tokens_bucket": {"1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "+Inf"},
	}
	kind := []int{} // 0 counter, 1 gauge
	add := func(k int, kv ...string) {
		d.series = append(d.series, labels.FromStrings(kv...))
		kind = append(kind, k)
	}
	for i := range benchInstances {
		inst := fmt.Sprintf("10.0.%d.%d:8000", i/200, i%200)
		add(1, "__name__", "up", "job", "vllm", "instance", inst)
		add(1, "__name__", "process_start_time_seconds", "job", "vllm", "instance", inst)
		for _, model := range []string{"llama-3.1-8b-instruct", "qwen2.5-7b-instruct"} {
			for name, les := range histos {
				for _, le := range les {
					add(0, "__name__", name, "job", "vllm", "instance", inst, "model_name", model, "le", le)
				}
			}
			for _, r := range []string{"stop", "length", "abort"} {
				add(0, "__name__", "vllm:request_success_total", "job", "vllm", "instance", inst, "model_name", model, "finished_reason", r)
			}
			add(1, "__name__", "vllm:num_requests_waiting", "job", "vllm", "instance", inst, "model_name", model)
			add(1, "__name__", "vllm:kv_cache_usage_perc", "job", "vllm", "instance", inst, "model_name", model)
		}
	}
	for g := range benchSyntheticGrps {
		for s := range benchPerGroup {
			add(0, "__name__", "synthetic_requests_total", "grp", fmt.Sprintf("g%d", g),
				"instance", fmt.Sprintf("s%d", s%27), "code", fmt.Sprintf("%d", 200+s/27))
		}
	}
	d.values = func(i, j int) float64 {
		if kind[i] == 1 {
			if strings.HasPrefix(d.series[i].Get("__name__"), "process_start") {
				return float64(d.base.Add(-time.Hour).Unix())
			}
			return float64((i+j)%7) / 7
		}
		return float64(j * (1 + i%13))
	}

	var rules strings.Builder
	rules.WriteString("groups:\n")
	for g := range benchSyntheticGrps {
		if g%20 == 0 {
			fmt.Fprintf(&rules, "  - name: synthetic-%d\n    rules:\n", g/20)
		}
		sel := fmt.Sprintf(`synthetic_requests_total{grp="g%d"}`, g)
		if g%2 == 0 {
			fmt.Fprintf(&rules, "      - record: grp:synthetic_requests:rate5m_g%d\n        expr: sum by (instance) (rate(%s[5m]))\n", g, sel)
		} else {
			fmt.Fprintf(&rules, "      - alert: SyntheticErrors%d\n        expr: sum by (instance) (rate(%s[5m])) > 1e9\n        for: 5m\n        labels: {severity: P2}\n", g, sel)
		}
	}
	d.rules = rules.String()
	return d, nil
}

func (d *benchData) load(app promstorage.AppenderV2) error {
	for j := range benchSamples {
		ts := d.base.Add(time.Duration(j) * benchStep).UnixMilli()
		for i, ls := range d.series {
			if _, err := app.Append(0, ls, 0, ts, d.values(i, j), nil, nil, promstorage.AOptions{}); err != nil {
				return err
			}
		}
	}
	return app.Commit()
}

// end is the time of the rounds: just after the last sample.
func (d *benchData) end() time.Time { return d.base.Add(benchSamples * benchStep) }

// openAppliance opens an empty store; now nil is the wall clock.
func (d *benchData) openAppliance(b *testing.B, now func() time.Time) *storage.DB {
	opts := storage.DefaultOptions()
	opts.Path = b.TempDir()
	if now != nil {
		opts.Now = now
	}
	db, err := storage.Open(opts)
	require.NoError(b, err)
	b.Cleanup(func() { _ = db.Close() })
	return db
}

func (d *benchData) prometheus(b *testing.B) *teststorage.TestStorage {
	st := teststorage.New(b)
	b.Cleanup(func() { _ = st.Close() })
	require.NoError(b, d.load(st.AppenderV2(context.Background())))
	return st
}

// loadBenchGroups loads the 200 rules into a manager over q and app.
func loadBenchGroups(b *testing.B, d *benchData, q promstorage.Queryable, app promstorage.AppendableV2, eng promql.QueryEngine) []*promrules.Group {
	m := New(Options{Queryable: q, Appendable: app, Engine: eng, Notifier: discard{}})
	f := filepath.Join(b.TempDir(), "synthetic.rules.yml")
	require.NoError(b, os.WriteFile(f, []byte(d.rules), 0o644))
	ids, err := sources([]string{f}, []string{"vllm", "targets", "gpu"})
	require.NoError(b, err)
	staged, err := m.loader.stage(ids)
	require.NoError(b, err)
	m.loader.swap(staged)
	groups, errs := m.m.LoadGroups(benchStep, labels.EmptyLabels(), "", nil, false, ids...)
	require.Empty(b, errs)
	n := 0
	for _, g := range groups {
		n += len(g.Rules())
	}
	require.Equal(b, 200, n, "rules in a round")
	out := slices.Collect(maps.Values(groups))
	slices.SortFunc(out, func(a, b *promrules.Group) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

// evalRound evaluates every group once, one after another, as a single
// core would.
func evalRound(groups []*promrules.Group, ts time.Time) {
	for _, g := range groups {
		g.Eval(context.Background(), ts)
	}
}

func benchRounds(b *testing.B, groups []*promrules.Group, ts time.Time) {
	evalRound(groups, ts) // the first round creates the output series
	for _, g := range groups {
		for _, r := range g.Rules() {
			require.NoError(b, r.LastError(), "rule %s", r.Name())
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		evalRound(groups, ts.Add(time.Duration(i+1)*time.Millisecond))
	}
	b.StopTimer()
	perRound := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(100*perRound.Seconds()/benchStep.Seconds(), "cpu-%-at-15s")
}

type discard struct{}

func (discard) Send(...*notifier.Alert) {}
