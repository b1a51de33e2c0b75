package explain

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// engineQuerier is the Querier over Prometheus' engine and a real test
// storage.
type engineQuerier struct {
	eng *promql.Engine
	q   storage.Queryable
}

func (e engineQuerier) Instant(ctx context.Context, expr string, at time.Time) ([]Sample, error) {
	qry, err := e.eng.NewInstantQuery(ctx, e.q, nil, expr, at)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("%s: %w", expr, res.Err)
	}
	if s, ok := res.Value.(promql.Scalar); ok {
		return []Sample{{Value: s.V}}, nil
	}
	v, err := res.Vector()
	if err != nil {
		return nil, err
	}
	var out []Sample
	for _, s := range v {
		m := s.Metric.Map()
		delete(m, labels.MetricName)
		out = append(out, Sample{Labels: m, Value: s.F})
	}
	return out, nil
}

func (e engineQuerier) Range(ctx context.Context, expr string, from, to time.Time, step time.Duration) ([]Series, error) {
	qry, err := e.eng.NewRangeQuery(ctx, e.q, nil, expr, from, to, step)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("%s: %w", expr, res.Err)
	}
	m, err := res.Matrix()
	if err != nil {
		return nil, err
	}
	var out []Series
	for _, s := range m {
		var ps []Point
		for _, p := range s.Floats {
			ps = append(ps, Point{T: time.UnixMilli(p.T), V: p.F})
		}
		out = append(out, Series{Labels: s.Metric.Map(), Points: ps})
	}
	return out, nil
}

// A request every 5 s for 20 minutes; from 15:00 (index 180) the queue
// holds each one 6 s more (0.1 s → 6.1 s) and 20 requests wait with the
// KV cache full, while decode and the GPU stay as they were.
const queueScene = `
load 5s
  e2e_bucket{le="1"}    0x239
  e2e_bucket{le="5"}    0+1x179 180x59
  e2e_bucket{le="10"}   0+1x239
  e2e_bucket{le="+Inf"} 0+1x239
  e2e_sum               0+2x179 360+8x59
  e2e_count             0+1x239
  queue_sum             0+0.1x179 18+6.1x59
  queue_count           0+1x239
  decode_sum            0+1.9x239
  decode_count          0+1x239
  waiting               0x179 20x59
  kv                    0.5x179 0.98x59
  gpu                   40x239
`

func hist(name string) Measure {
	return Measure{Name: name,
		Mean: "sum(rate(" + name + "_sum[$__window])) / sum(rate(" + name + "_count[$__window]))",
		P95:  "histogram_quantile(0.95, sum by (le) (rate(" + name + "_bucket[$__window])))"}
}

func sceneSpec() Spec {
	total := hist("e2e")
	total.Name = "server"
	return Spec{
		Service: "test", Engine: "vllm", Total: &total,
		Phases: []Measure{{Name: "queue", Mean: hist("queue").Mean}, {Name: "decode", Mean: hist("decode").Mean}},
		Signals: []Signal{
			{ID: "gpu_util", Title: "GPU utilisation", Unit: "percent", Floor: 10, Expr: "avg_over_time(gpu[$__window])", Chart: "gpu"},
			{ID: "kv_cache", Title: "KV cache", Unit: "ratio", Floor: 0.1, Expr: "avg_over_time(kv[$__window])", Chart: "kv"},
			{ID: "waiting", Title: "requests waiting", Unit: "short", Floor: 1, Expr: "avg_over_time(waiting[$__window])", Chart: "waiting"},
		},
	}
}

func newQuerier(t *testing.T, scene string) engineQuerier {
	st := promqltest.LoadedStorage(t, scene)
	t.Cleanup(func() { st.Close() })
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	return engineQuerier{eng: eng, q: st}
}

func TestExplainFindsTheQueue(t *testing.T) {
	q := newQuerier(t, queueScene)
	now := time.Unix(1195, 0)
	r, err := Explain(context.Background(), q, sceneSpec(), Options{Now: now, Lookback: 19 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, StatusRise, r.Status, r.Summary)
	require.True(t, r.Detected)
	require.InDelta(t, 900, r.At, 60, "the rise is found near 15:00")
	require.Equal(t, "queue", r.Grew)
	require.InDelta(t, 0.1, float64(r.Phases[0].Before), 0.01)
	// The after window starts a step before the first risen point.
	require.InDelta(t, 6.1, float64(r.Phases[0].After), 0.5)
	require.InDelta(t, 1, float64(r.Phases[0].Share), 0.02)
	require.InDelta(t, 0, float64(r.Phases[1].Delta), 0.01)
	require.InDelta(t, 4.8, float64(r.P95.Before), 0.01)
	require.InDelta(t, 9.75, float64(r.P95.After), 0.05)
	require.Len(t, r.Signals, 3)
	require.Equal(t, "waiting", r.Signals[0].ID)
	require.Equal(t, "kv_cache", r.Signals[1].ID)
	require.True(t, r.Signals[0].Moved && r.Signals[1].Moved)
	require.False(t, r.Signals[2].Moved, "the GPU did not move")
	require.Contains(t, r.Signals[1].Link, "/explore?expr=kv")
	require.Regexp(t, `^P95 4.8 s → 9.\d+ s since `+time.Unix(int64(r.At), 0).UTC().Format("15:04")+
		` UTC; queue time accounts for 100% of the rise \(mean 100 ms → 5.\d+ s\); (19\.\d+|20) requests waiting \(was 0\), KV cache 9\d(\.\d)?% \(was 50%\)$`, r.Summary)
}

func TestExplainSteadyAndGivenTime(t *testing.T) {
	q := newQuerier(t, queueScene)
	r, err := Explain(context.Background(), q, sceneSpec(), Options{Now: time.Unix(850, 0), Lookback: 10 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, StatusSteady, r.Status, r.Summary)
	require.Equal(t, "", r.Grew)
	require.Contains(t, r.Summary, "P95 steady at 4.8 s")

	// An alert that started at 15:00 gives the time.
	r, err = Explain(context.Background(), q, sceneSpec(), Options{Now: time.Unix(1195, 0), At: time.Unix(900, 0)})
	require.NoError(t, err)
	require.Equal(t, StatusRise, r.Status)
	require.False(t, r.Detected)
	require.Equal(t, "queue", r.Grew)
	require.InDelta(t, 1, float64(r.Phases[0].Share), 0.02)

	// An alert that fired at 18:20, after its for: duration: the rise
	// before it is found.
	r, err = Explain(context.Background(), q, sceneSpec(), Options{Now: time.Unix(1195, 0), At: time.Unix(1100, 0), Lookback: 19 * time.Minute})
	require.NoError(t, err)
	require.True(t, r.Detected)
	require.InDelta(t, 900, r.At, 60)
	require.Equal(t, "queue", r.Grew)
}

func TestExplainWithoutPhasesSaysWhatIsMissing(t *testing.T) {
	q := newQuerier(t, queueScene)
	spec := sceneSpec()
	spec.Phases = nil
	spec.Missing = []string{"vllm:request_queue_time_seconds (queue)"}
	r, err := Explain(context.Background(), q, spec, Options{Now: time.Unix(1195, 0), Lookback: 19 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, StatusRise, r.Status)
	require.Contains(t, r.Summary, "no phase metrics, so the time cannot be split (missing: vllm:request_queue_time_seconds (queue); phase metrics: vllm exports none")

	spec.Total = nil
	r, err = Explain(context.Background(), q, spec, Options{Now: time.Unix(1195, 0)})
	require.NoError(t, err)
	require.Equal(t, StatusNoData, r.Status)
}

func TestBreakdownMeansAddUp(t *testing.T) {
	q := newQuerier(t, queueScene)
	r, err := Breakdown(context.Background(), q, sceneSpec(), BreakdownOptions{From: time.Unix(600, 0), To: time.Unix(1195, 0), Step: 15 * time.Second})
	require.NoError(t, err)
	require.Len(t, r.Phases, 2)
	require.NotNil(t, r.Total)
	last := len(r.Total.Mean) - 1
	require.InDelta(t, float64(r.Total.Mean[last][1]), float64(r.Phases[0].Mean[last][1]+r.Phases[1].Mean[last][1]), 1e-9)
	require.InDelta(t, 8, float64(r.Total.Mean[last][1]), 1e-9)
	require.Contains(t, r.Note, "Means add up, percentiles do not")
}

func TestCompareQuantilesAreHistogramQuantiles(t *testing.T) {
	q := newQuerier(t, `
load 5s
  lat_bucket{model_version="v1",le="0.5"}  0+3x100
  lat_bucket{model_version="v1",le="1"}    0+8x100
  lat_bucket{model_version="v1",le="2"}    0+10x100
  lat_bucket{model_version="v1",le="+Inf"} 0+10x100
  lat_bucket{model_version="v2",le="0.5"}  0+1x100
  lat_bucket{model_version="v2",le="1"}    0+2x100
  lat_bucket{model_version="v2",le="2"}    0+9x100
  lat_bucket{model_version="v2",le="+Inf"} 0+10x100
`)
	from, to := time.Unix(100, 0), time.Unix(500, 0)
	r, err := Compare(context.Background(), q, "lat", Side{Name: "v1", Matchers: `model_version="v1"`, From: from, To: to},
		Side{Name: "v2", Matchers: `model_version="v2"`, From: from, To: to})
	require.NoError(t, err)
	for _, side := range []struct {
		d Distribution
		v string
	}{{r.A, "v1"}, {r.B, "v2"}} {
		for _, qq := range Quantiles {
			want, err := scalar(context.Background(), q, fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(lat_bucket{model_version=%q}[400s])))`, qq.Q, side.v), to)
			require.NoError(t, err)
			require.InDelta(t, want, float64(side.d.Quantiles[qq.Name]), 1e-9, "%s %s", side.v, qq.Name)
		}
	}
	require.Equal(t, [][2]Num{{0.5, 0.3}, {1, 0.8}, {2, 1}}, round(r.A.CDF))
	require.Equal(t, [][2]Num{{0.5, 0.1}, {1, 0.2}, {2, 0.9}}, round(r.B.CDF))
	require.Greater(t, float64(r.Deltas["p50"]), 0.0)
	require.Contains(t, r.Text["p50"], "P50")

	_, err = Compare(context.Background(), q, "lat{x}", Side{}, Side{})
	require.ErrorIs(t, err, ErrBadMetric)
}

func round(cdf [][2]Num) [][2]Num {
	out := make([][2]Num, len(cdf))
	for i, p := range cdf {
		out[i] = [2]Num{p[0], Num(float64(int(float64(p[1])*1000+0.5)) / 1000)}
	}
	return out
}

// Two steps up: decode at 10:00 (e2e 2 s → 4 s), then the queue at 16:40
// (4 s → 10 s). The most recent is explained.
const twoStepScene = `
load 5s
  e2e_bucket{le="1"}    0x239
  e2e_bucket{le="2.5"}  0+1x119 120x119
  e2e_bucket{le="5"}    0+1x199 200x39
  e2e_bucket{le="10"}   0+1x239
  e2e_bucket{le="+Inf"} 0+1x239
  e2e_sum               0+2x119 240+4x79 560+10x39
  e2e_count             0+1x239
  queue_sum             0+0.1x199 20+6.1x39
  queue_count           0+1x239
  decode_sum            0+1.9x119 228+3.9x119
  decode_count          0+1x239
  waiting               0x199 20x39
  kv                    0.5x239
  gpu                   40x239
`

func TestExplainTheLatestRise(t *testing.T) {
	q := newQuerier(t, twoStepScene)
	r, err := Explain(context.Background(), q, sceneSpec(), Options{Now: time.Unix(1195, 0), Lookback: 19 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, StatusRise, r.Status, r.Summary)
	require.InDelta(t, 1000, r.At, 60, r.Summary)
	require.Equal(t, "queue", r.Grew, r.Summary)
	require.Equal(t, "waiting", r.Signals[0].ID)
	require.InDelta(t, 20, float64(r.Signals[0].After), 0.01, "the gauge now")
}

// TestExplainSeesTheCurrentSecond: a rise whose first sample landed
// within the current second (at 600.3 s, asked at 600.8 s) is in the
// answer, as it is in a query at that time: the series ends at now to
// the millisecond, not at the whole second before it.
func TestExplainSeesTheCurrentSecond(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 5s
  e2e_bucket{le="1"}    0+1x120
  e2e_bucket{le="10"}   0+1x120
  e2e_bucket{le="+Inf"} 0+1x120
  e2e_sum               0+0.5x120
  e2e_count             0+1x120
  queue_sum             0+0.1x120
  queue_count           0+1x120
  decode_sum            0+0.4x120
  decode_count          0+1x120
`)
	t.Cleanup(func() { st.Close() })
	// At 600.3 s a burst of 100 requests that waited 6 s each.
	app := st.Appender(context.Background())
	ms := int64(600300)
	for _, s := range []struct {
		ls labels.Labels
		v  float64
	}{
		{labels.FromStrings("__name__", "e2e_bucket", "le", "1"), 121},
		{labels.FromStrings("__name__", "e2e_bucket", "le", "10"), 221},
		{labels.FromStrings("__name__", "e2e_bucket", "le", "+Inf"), 221},
		{labels.FromStrings("__name__", "e2e_sum"), 60.5 + 650},
		{labels.FromStrings("__name__", "e2e_count"), 221},
		{labels.FromStrings("__name__", "queue_sum"), 12.1 + 610},
		{labels.FromStrings("__name__", "queue_count"), 221},
		{labels.FromStrings("__name__", "decode_sum"), 48.4 + 40},
		{labels.FromStrings("__name__", "decode_count"), 221},
	} {
		_, err := app.Append(0, s.ls, ms, s.v)
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	q := engineQuerier{eng: eng, q: st}
	spec := sceneSpec()
	spec.Signals = nil
	now := time.UnixMilli(600800)
	r, err := Explain(context.Background(), q, spec, Options{Now: now, Lookback: 10 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, StatusRise, r.Status, r.Summary)
	require.Equal(t, "queue", r.Grew, r.Summary)
	last := r.P95Series[len(r.P95Series)-1]
	require.Equal(t, Num(600.8), last[0], "the series ends at now")
}
