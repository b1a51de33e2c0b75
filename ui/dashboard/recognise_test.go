package dashboard

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/scrape/local"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/storage/storagetest"
)

// The recogniser tests load each fixture into the real storage at several
// timestamps 30 s apart (counters growing, so rates work), resolve every
// embedded dashboard from what storage holds, compare the panels that
// appear with the table below, and run every query of every panel through
// the real query engine: each must return data.

const (
	loadSteps = 11
	loadStep  = 30 * time.Second
)

// store is one fixture's storage.
type store struct {
	db         *storage.DB
	start, end time.Time
}

func openStore(t testing.TB) *store {
	t.Helper()
	db := storagetest.Open(t)
	end := time.Now().Add(-time.Minute).Truncate(time.Second)
	return &store{db: db, start: end.Add(-(loadSteps - 1) * loadStep), end: end}
}

func (s *store) at(i int) time.Time { return s.start.Add(time.Duration(i) * loadStep) }

// loadFixture appends the fixture's families at every step with job and
// instance set as a scrape would, and up = 1. Counters, histograms and
// summaries' _sum/_count grow by 10% of their value per step.
func (s *store) loadFixture(t testing.TB, path, job, instance string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	s.loadText(t, f, job, instance)
}

// loadText is loadFixture of a text-format body.
func (s *store) loadText(t testing.TB, body io.Reader, job, instance string) {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(body)
	require.NoError(t, err)
	type row struct {
		family  string
		typ     model.MetricType
		ls      labels.Labels
		v       float64
		counter bool
	}
	var rows []row
	for name, mf := range fams {
		typ := model.MetricType(strings.ToLower(mf.GetType().String()))
		for _, m := range mf.GetMetric() {
			base := []string{"job", job, "instance", instance}
			for _, lp := range m.GetLabel() {
				base = append(base, lp.GetName(), lp.GetValue())
			}
			add := func(n string, v float64, counter bool, kv ...string) {
				ls := labels.FromStrings(append(append([]string{labels.MetricName, n}, base...), kv...)...)
				rows = append(rows, row{family: name, typ: typ, ls: ls, v: v, counter: counter})
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue(), true)
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue(), false)
			case dto.MetricType_UNTYPED:
				add(name, m.GetUntyped().GetValue(), false)
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", float64(b.GetCumulativeCount()), true, "le", formatLe(b.GetUpperBound()))
				}
				add(name+"_bucket", float64(h.GetSampleCount()), true, "le", "+Inf")
				add(name+"_sum", h.GetSampleSum(), true)
				add(name+"_count", float64(h.GetSampleCount()), true)
			case dto.MetricType_SUMMARY:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					add(name, q.GetValue(), false, "quantile", formatLe(q.GetQuantile()))
				}
				add(name+"_sum", sm.GetSampleSum(), true)
				add(name+"_count", float64(sm.GetSampleCount()), true)
			}
		}
	}
	up := labels.FromStrings(labels.MetricName, "up", "job", job, "instance", instance)
	for i := range loadSteps {
		app := s.db.AppenderV2(context.Background())
		ts := s.at(i).UnixMilli()
		for _, r := range rows {
			v := r.v
			if r.counter {
				v *= 1 + 0.1*float64(i)
			}
			_, err := app.Append(0, r.ls, 0, ts, v, nil, nil, promstorage.AOptions{
				MetricFamilyName: r.family, Metadata: metadata.Metadata{Type: r.typ},
			})
			require.NoError(t, err)
		}
		_, err := app.Append(0, up, 0, ts, 1, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
		require.NoError(t, app.Commit())
	}
	s.db.Flush()
}

func formatLe(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// loadProbe writes the series of an llm probe run every step, as package
// probe names them (probe/series.go), with one failure.
func (s *store) loadProbe(t *testing.T, name string) {
	t.Helper()
	for i := range loadSteps {
		app := s.db.AppenderV2(context.Background())
		ts := s.at(i).UnixMilli()
		add := func(v float64, kv ...string) {
			ls := labels.FromStrings(append([]string{"probe", name}, kv...)...)
			_, err := app.Append(0, ls, 0, ts, v, nil, nil, promstorage.AOptions{MetricFamilyName: ls.Get(labels.MetricName)})
			require.NoError(t, err)
		}
		if i == 3 {
			add(0, labels.MetricName, "probe_success", "reason", "timeout")
		} else {
			add(1, labels.MetricName, "probe_success")
		}
		add(0.8+0.01*float64(i), labels.MetricName, "probe_duration_seconds")
		add(200, labels.MetricName, "probe_http_status_code")
		add(0.12, labels.MetricName, "probe_ttft_seconds")
		add(0.02, labels.MetricName, "probe_tpot_seconds")
		add(16, labels.MetricName, "probe_output_tokens")
		add(20, labels.MetricName, "probe_tokens_per_second")
		add(0.5, labels.MetricName, "probe_ttft_threshold_seconds")
		add(2, labels.MetricName, "probe_duration_threshold_seconds")
		for _, ph := range []string{"resolve", "connect", "tls", "processing", "transfer"} {
			add(0.01, labels.MetricName, "probe_http_duration_seconds", "phase", ph)
		}
		add(float64(s.end.Add(60*24*time.Hour).Unix()), labels.MetricName, "probe_ssl_earliest_cert_expiry")
		require.NoError(t, app.Commit())
	}
	s.db.Flush()
}

// countingAppendable counts committed rounds of the local reader.
type countingAppendable struct {
	promstorage.AppendableV2
	mu      sync.Mutex
	commits int
	done    chan struct{}
	want    int
}

type countingAppender struct {
	promstorage.AppenderV2
	c *countingAppendable
}

func (c *countingAppendable) AppenderV2(ctx context.Context) promstorage.AppenderV2 {
	return countingAppender{c.AppendableV2.AppenderV2(ctx), c}
}

func (a countingAppender) Append(ref promstorage.SeriesRef, ls labels.Labels, st, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts promstorage.AOptions) (promstorage.SeriesRef, error) {
	return a.AppenderV2.Append(ref, ls, st, t, v, h, fh, opts)
}

func (a countingAppender) Commit() error {
	err := a.AppenderV2.Commit()
	a.c.mu.Lock()
	a.c.commits++
	if a.c.commits == a.c.want {
		close(a.c.done)
	}
	a.c.mu.Unlock()
	return err
}

// loadLocal runs the appliance's own readings (package scrape/local): the
// host's real /proc, a /sys tree with one thermal zone and one hwmon
// sensor, and an nvidia-smi that prints the fixture's query row. Its clock
// steps 30 s per round; the test waits for the rounds, not for time.
func (s *store) loadLocal(t *testing.T) {
	t.Helper()
	sys := t.TempDir()
	zone := filepath.Join(sys, "class", "thermal", "thermal_zone0")
	hw := filepath.Join(sys, "class", "hwmon", "hwmon0")
	require.NoError(t, os.MkdirAll(zone, 0o755))
	require.NoError(t, os.MkdirAll(hw, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(zone, "type"), []byte("cpu-thermal\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(zone, "temp"), []byte("51000\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(hw, "name"), []byte("coretemp\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(hw, "temp1_input"), []byte("48000\n"), 0o644))
	csv, err := filepath.Abs("../../testdata/nvidia-smi-query.csv")
	if _, serr := os.Stat(csv); serr != nil {
		csv, err = filepath.Abs("../../scrape/local/testdata/nvidia-smi-query.csv")
	}
	require.NoError(t, err)
	bin := t.TempDir()
	smi := filepath.Join(bin, "nvidia-smi")
	require.NoError(t, os.WriteFile(smi, []byte("#!/bin/sh\ncat '"+csv+"'\n"), 0o755))

	ca := &countingAppendable{AppendableV2: s.db, done: make(chan struct{}), want: loadSteps}
	var (
		mu sync.Mutex
		i  int
	)
	opts := local.DefaultOptions()
	opts.SysPath = sys
	opts.NvidiaSMI = smi
	opts.Instance = "box"
	opts.Interval = time.Millisecond
	opts.Appendable = ca
	opts.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		ts := s.at(i)
		i++
		return ts
	}
	r, err := local.New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	<-ca.done
	cancel()
	require.NoError(t, <-errc)
	s.db.Flush()
}

// shown is every panel a dashboard shows, as "row/panel".
func shown(d *Dashboard) []string {
	var out []string
	for _, r := range d.Rows {
		row := r.ID
		for _, p := range r.Panels {
			out = append(out, row+"/"+p.ID)
		}
	}
	return out
}

// runPanels runs every query of every panel of d over the loaded range
// and requires data from each.
func (s *store) runPanels(t *testing.T, eng *query.Engine, id string, d *Dashboard, allowEmpty []string) {
	t.Helper()
	for _, r := range d.Rows {
		sel := ""
		switch {
		case r.Service != nil:
			sel = r.Service.Selector
		case d.Service != nil:
			sel = d.Service.Selector
		}
		for _, p := range r.Panels {
			for _, q := range p.Queries {
				expr := strings.NewReplacer("$sel", sel, "$__rate_interval", "2m", "$__interval", "30s", "$__range", "5m").Replace(q.Expr)
				require.NotContains(t, expr, "$", "%s/%s: a placeholder is left", d.ID, p.ID)
				require.NotContains(t, expr, "{{", "%s/%s: a metric key is left", d.ID, p.ID)
				qry, err := eng.NewRangeQuery(context.Background(), s.db, nil, expr, s.at(4), s.end, loadStep)
				require.NoError(t, err, "%s/%s: %s", d.ID, p.ID, expr)
				res := qry.Exec(context.Background())
				require.NoError(t, res.Err, "%s/%s: %s", d.ID, p.ID, expr)
				m, err := res.Matrix()
				require.NoError(t, err)
				qry.Close()
				if slices.Contains(allowEmpty, "*") || slices.Contains(allowEmpty, id+"/"+p.ID) {
					continue
				}
				require.NotEmpty(t, m, "%s/%s (%s): no data from %s", d.ID, p.ID, q.Legend, expr)
				n := 0
				for _, ser := range m {
					for _, pt := range ser.Floats {
						if !math.IsNaN(pt.F) {
							n++
						}
					}
				}
				require.Positive(t, n, "%s/%s (%s): only NaN from %s", d.ID, p.ID, q.Legend, expr)
			}
		}
	}
}

type recogniserCase struct {
	name  string
	load  func(t *testing.T, s *store)
	want  map[string][]string // dashboard id → panels shown
	empty []string            // dashboard/panel whose queries may return nothing or NaN (idle)
	// probes are the configured probes the services are matched with.
	probes []ProbeTarget
}

func fixture(name string) string { return filepath.Join("..", "..", "testdata", name) }

func TestRecogniserFixtures(t *testing.T) {
	cat, err := NewCatalog()
	require.NoError(t, err)
	eng := query.New(query.Options{}, nil, nil)
	for _, c := range recogniserCases {
		t.Run(c.name, func(t *testing.T) {
			s := openStore(t)
			c.load(t, s)
			inv, err := cat.Discover(context.Background(), s.db, s.start.UnixMilli(), s.end.UnixMilli(), c.probes)
			require.NoError(t, err)
			got := map[string][]string{}
			for _, def := range cat.Embedded() {
				// The model page once per service, the others once.
				filters := []Filter{{}}
				if def.Scope == ScopeService {
					filters = filters[:0]
					for _, svc := range inv.Services {
						filters = append(filters, Filter{Job: svc.Job, Model: svc.Model})
					}
				}
				for _, f := range filters {
					d := cat.Resolve(def, inv, f)
					id := def.ID
					if d.Service != nil {
						id += " " + d.Service.ID()
					}
					if p := shown(d); len(p) > 0 {
						got[id] = p
					}
					s.runPanels(t, eng, id, d, c.empty)
				}
			}
			if c.want == nil {
				ids := make([]string, 0, len(got))
				for id := range got {
					ids = append(ids, id)
				}
				sort.Strings(ids)
				for _, id := range ids {
					fmt.Printf("%s %s: %q\n", c.name, id, got[id])
				}
				t.Fatal("no expectation")
			}
			require.Equal(t, c.want, got)
		})
	}
}

// recogniserCases is the table of which panels each fixture fills.
var recogniserCases = []recogniserCase{
	{
		// A box as the demo runs it: vLLM with its probe, a GPU exporter.
		name: "vllm+probe+dcgm",
		load: func(t *testing.T, s *store) {
			s.loadFixture(t, fixture("vllm.prom"), "vllm", "127.0.0.1:8000")
			s.loadFixture(t, fixture("dcgm-exporter.prom"), "dcgm", "127.0.0.1:9400")
			s.loadProbe(t, "chat")
		},
		probes: []ProbeTarget{{Name: "chat", URL: "http://localhost:8000/v1/chat/completions", Model: "llama-3.1-8b-q4"}},
		want: map[string][]string{
			"overview":                   join(panels("vllm:llama-3.1-8b-q4", "probe_availability", "probe_latency", "requests_rate", "error_ratio", "e2e_quantiles", "e2e_gap", "e2e_gap_ratio", "ttft_tpot_p95", "queue_length", "gpu_util", "gpu_memory", "alerts_firing", "targets_down")),
			"model vllm/llama-3.1-8b-q4": join(panels("latency", "ttft", "tpot", "itl", "e2e", "queue_time", "phases"), panels("load", "running_waiting", "kv_cache", "tokens_rate"), panels("outcomes", "finish_reasons", "preemptions", "prefix_cache_hit_ratio"), panels("heatmaps", "ttft_heatmap", "tpot_heatmap", "itl_heatmap", "e2e_heatmap", "queue_time_heatmap")),
			"probes":                     join(panels("probes", "availability", "failures", "e2e", "ttft", "tpot", "http_phases", "http_status", "cert_expiry")),
			"hardware":                   join(panels("gpu", "gpu_util", "gpu_memory", "gpu_temp", "gpu_power", "gpu_clocks", "gpu_throttle")),
		},
	},
	{
		name: "vllm-0.11",
		load: func(t *testing.T, s *store) { s.loadFixture(t, fixture("vllm.prom"), "vllm", "127.0.0.1:8000") },
		want: map[string][]string{
			"model vllm/llama-3.1-8b-q4": join(panels("latency", "ttft", "tpot", "itl", "e2e", "queue_time", "phases"), panels("load", "running_waiting", "kv_cache", "tokens_rate"), panels("outcomes", "finish_reasons", "preemptions", "prefix_cache_hit_ratio"), panels("heatmaps", "ttft_heatmap", "tpot_heatmap", "itl_heatmap", "e2e_heatmap", "queue_time_heatmap")),
			"overview":                   join(panels("vllm:llama-3.1-8b-q4", "requests_rate", "error_ratio", "e2e_quantiles", "e2e_gap", "e2e_gap_ratio", "ttft_tpot_p95", "queue_length", "alerts_firing", "targets_down")),
		},
	},
	{
		name: "vllm-0.12",
		load: func(t *testing.T, s *store) {
			s.loadFixture(t, fixture("vllm-qwen-0.12.prom"), "vllm", "127.0.0.1:8001")
		},
		want: map[string][]string{
			"model vllm/qwen2.5-7b-instruct": join(panels("latency", "ttft", "tpot", "itl", "e2e", "queue_time", "phases"), panels("load", "running_waiting", "kv_cache", "tokens_rate"), panels("outcomes", "finish_reasons", "preemptions", "prefix_cache_hit_ratio"), panels("heatmaps", "ttft_heatmap", "tpot_heatmap", "itl_heatmap", "e2e_heatmap", "queue_time_heatmap")),
			"overview":                       join(panels("vllm:qwen2.5-7b-instruct", "requests_rate", "error_ratio", "e2e_quantiles", "e2e_gap", "e2e_gap_ratio", "ttft_tpot_p95", "queue_length", "alerts_firing", "targets_down")),
		},
	},
	{
		name: "vllm-idle",
		load: func(t *testing.T, s *store) { s.loadFixture(t, fixture("vllm-idle.prom"), "vllm", "127.0.0.1:8000") },
		want: map[string][]string{
			"model vllm/llama-3.1-8b-q4": join(panels("latency", "ttft", "tpot", "itl", "e2e", "queue_time", "phases"), panels("load", "running_waiting", "kv_cache", "tokens_rate"), panels("outcomes", "finish_reasons", "preemptions", "prefix_cache_hit_ratio"), panels("heatmaps", "ttft_heatmap", "tpot_heatmap", "itl_heatmap", "e2e_heatmap", "queue_time_heatmap")),
			"overview":                   join(panels("vllm:llama-3.1-8b-q4", "requests_rate", "e2e_quantiles", "e2e_gap", "e2e_gap_ratio", "ttft_tpot_p95", "queue_length", "alerts_firing", "targets_down")),
		},
		empty: []string{"*"},
	},
	{
		name: "tgi",
		load: func(t *testing.T, s *store) { s.loadFixture(t, fixture("tgi.prom"), "tgi", "127.0.0.1:3000") },
		want: map[string][]string{
			"model tgi": join(panels("latency", "tpot", "e2e", "queue_time", "phases"), panels("load", "running_waiting", "tokens_rate"), panels("outcomes", "finish_reasons"), panels("heatmaps", "tpot_heatmap", "e2e_heatmap", "queue_time_heatmap")),
			"overview":  join(panels("tgi", "requests_rate", "error_ratio", "e2e_quantiles", "e2e_gap", "e2e_gap_ratio", "ttft_tpot_p95", "queue_length", "alerts_firing", "targets_down")),
		},
	},
	{
		name: "triton",
		load: func(t *testing.T, s *store) { s.loadFixture(t, fixture("triton.prom"), "triton", "127.0.0.1:8002") },
		want: map[string][]string{
			"hardware":                       join(panels("gpu", "gpu_util", "gpu_memory", "gpu_power")),
			"model triton/bge-small-en-v1.5": join(panels("latency", "ttft", "e2e", "queue_time", "phases"), panels("load", "running_waiting"), panels("outcomes", "finish_reasons"), panels("heatmaps", "ttft_heatmap")),
			"model triton/llama-3.1-8b-q4":   join(panels("latency", "ttft", "e2e", "queue_time", "phases"), panels("load", "running_waiting"), panels("outcomes", "finish_reasons"), panels("heatmaps", "ttft_heatmap")),
			"overview":                       join(panels("triton:bge-small-en-v1.5", "requests_rate", "error_ratio", "e2e_quantiles", "ttft_tpot_p95", "queue_length", "gpu_util", "gpu_memory", "alerts_firing", "targets_down"), panels("triton:llama-3.1-8b-q4", "requests_rate", "error_ratio", "e2e_quantiles", "ttft_tpot_p95", "queue_length", "gpu_util", "gpu_memory", "alerts_firing", "targets_down")),
		},
	},
	{
		name: "sglang",
		load: func(t *testing.T, s *store) { s.loadFixture(t, fixture("sglang.prom"), "sglang", "127.0.0.1:30000") },
		want: map[string][]string{
			"model sglang/qwen2.5-7b-instruct": join(panels("latency", "ttft", "itl", "e2e"), panels("load", "running_waiting", "kv_cache", "tokens_rate"), panels("outcomes", "finish_reasons", "prefix_cache_hit_ratio"), panels("heatmaps", "ttft_heatmap", "itl_heatmap", "e2e_heatmap")),
			"overview":                         join(panels("sglang:qwen2.5-7b-instruct", "requests_rate", "error_ratio", "e2e_quantiles", "e2e_gap", "e2e_gap_ratio", "ttft_tpot_p95", "queue_length", "alerts_firing", "targets_down")),
		},
	},
	{
		name: "fastapi",
		load: func(t *testing.T, s *store) { s.loadFixture(t, fixture("fastapi.prom"), "fastapi", "127.0.0.1:8080") },
		want: map[string][]string{
			"model fastapi/bge-m3":          join(panels("latency", "e2e"), panels("load", "running_waiting", "tokens_rate"), panels("outcomes", "finish_reasons"), panels("heatmaps", "e2e_heatmap")),
			"model fastapi/llama-3.1-8b-q4": join(panels("latency", "e2e"), panels("load", "running_waiting", "tokens_rate"), panels("outcomes", "finish_reasons"), panels("heatmaps", "e2e_heatmap")),
			"overview":                      join(panels("fastapi:bge-m3", "requests_rate", "error_ratio", "e2e_quantiles", "e2e_gap", "e2e_gap_ratio", "alerts_firing", "targets_down"), panels("fastapi:llama-3.1-8b-q4", "requests_rate", "error_ratio", "e2e_quantiles", "e2e_gap", "e2e_gap_ratio", "alerts_firing", "targets_down")),
		},
		empty: []string{"model fastapi/bge-m3/tokens_rate"},
	},
	{
		name: "dcgm",
		load: func(t *testing.T, s *store) {
			s.loadFixture(t, fixture("dcgm-exporter.prom"), "dcgm", "127.0.0.1:9400")
		},
		want: map[string][]string{
			"hardware": join(panels("gpu", "gpu_util", "gpu_memory", "gpu_temp", "gpu_power", "gpu_clocks", "gpu_throttle")),
			"overview": join(panels("box", "gpu_util", "gpu_memory", "alerts_firing", "targets_down")),
		},
	},
	{
		name: "local-readings",
		load: func(t *testing.T, s *store) { s.loadLocal(t) },
		want: map[string][]string{
			"hardware": join(panels("gpu", "gpu_util", "gpu_memory", "gpu_temp", "gpu_power", "gpu_clocks", "gpu_throttle"), panels("host", "host_cpu", "host_memory", "host_load", "host_disk", "host_disk_io", "host_network", "host_temp")),
			"overview": join(panels("box", "gpu_util", "gpu_memory", "alerts_firing")),
		},
	},
	{
		name: "probes",
		load: func(t *testing.T, s *store) { s.loadProbe(t, "chat") },
		want: map[string][]string{
			"overview": join(panels("box", "probe_availability", "probe_latency", "alerts_firing")),
			"probes":   join(panels("probes", "availability", "failures", "e2e", "ttft", "tpot", "http_phases", "http_status", "cert_expiry")),
		},
	},
}

func panels(row string, ids ...string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = row + "/" + id
	}
	return out
}

func join(parts ...[]string) []string { return slices.Concat(parts...) }
