package ui

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/parser/posrange"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/stats"
	apiv1 "github.com/prometheus/prometheus/web/api/v1"
	"github.com/stretchr/testify/require"
)

// TestMatrixCodec: matrixCodec writes the bytes Prometheus' JSONCodec
// writes, for random matrices of awkward values and labels, with and
// without stats and warnings, and for answers it leaves to JSONCodec.
func TestMatrixCodec(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	values := []float64{0, math.Copysign(0, -1), 1, -1, 12, 0.5, 1e-7, -1e-7, 1e-6, 9.99e-7, 1e21, 1e21 - 65536, -1e21, 1e20,
		math.Inf(1), math.Inf(-1), math.NaN(), math.Float64frombits(0x7ff0000000000002), // a stale marker
		1 << 53, 1<<53 - 1, -(1<<53 - 1), 1 << 54, 123456789.125, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1 + 0.2}
	strs := []string{"", "a", "vllm:e2e", `q"uote`, `back\slash`, "<html>&", "ünï", "\u2028", "\x00\x1f", "\xff\xfe", "tab\t"}
	value := func() float64 {
		switch r.IntN(3) {
		case 0:
			return values[r.IntN(len(values))]
		case 1:
			return float64(r.IntN(2000) - 1000)
		}
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
	}
	ts := func() int64 {
		switch r.IntN(4) {
		case 0:
			return -r.Int64N(1e12)
		case 1:
			return r.Int64N(1e6) * 1000
		}
		return r.Int64N(2e12)
	}
	matrix := func() promql.Matrix {
		m := make(promql.Matrix, r.IntN(5)+1)
		grid := r.IntN(2) == 0 // series on one step grid, some points missing
		base := ts()
		for i := range m {
			b := labels.NewScratchBuilder(0)
			for range r.IntN(4) {
				b.Add(strs[r.IntN(len(strs))]+string(rune('a'+r.IntN(26))), strs[r.IntN(len(strs))])
			}
			b.Sort()
			m[i].Metric = b.Labels()
			for k := range r.IntN(8) {
				t := ts()
				if grid {
					t = base + int64(k+r.IntN(2))*1500
				}
				m[i].Floats = append(m[i].Floats, promql.FPoint{T: t, F: value()})
			}
		}
		return m
	}
	encode := func(resp *apiv1.Response) (want, got []byte) {
		t.Helper()
		want, err := apiv1.JSONCodec{}.Encode(resp)
		require.NoError(t, err)
		got, err = matrixCodec{}.Encode(resp)
		require.NoError(t, err)
		return want, got
	}
	for i := range 3000 {
		resp := &apiv1.Response{Status: "success"}
		qd := &apiv1.QueryData{ResultType: parser.ValueTypeMatrix, Result: matrix()}
		if i%3 == 1 {
			qd.Stats = stats.NewQueryStats(&stats.Statistics{Timers: stats.NewQueryTimers(), Samples: stats.NewQuerySamples(true)})
		}
		if i%4 == 2 {
			var a annotations.Annotations
			a.Add(annotations.NewBadBucketLabelWarning("m", "x", posrange.PositionRange{}))
			resp.Warnings, resp.Infos = a.AsStrings("q", 10, 10)
		}
		resp.Data = qd
		if i%5 == 3 {
			resp.Data = *qd
		}
		want, got := encode(resp)
		require.Equal(t, string(want), string(got), "answer %d", i)
	}

	// Answers JSONCodec writes as they are: other kinds, an empty
	// matrix, native histograms.
	h := &histogram.FloatHistogram{Count: 3, Sum: 1.5, Schema: 0, PositiveSpans: []histogram.Span{{Offset: 0, Length: 1}}, PositiveBuckets: []float64{3}}
	for _, data := range []any{
		&apiv1.QueryData{ResultType: parser.ValueTypeMatrix, Result: promql.Matrix{}},
		&apiv1.QueryData{ResultType: parser.ValueTypeVector, Result: promql.Vector{{Metric: labels.FromStrings("a", "b"), T: 1500, F: 2}}},
		&apiv1.QueryData{ResultType: parser.ValueTypeMatrix, Result: promql.Matrix{{Metric: labels.FromStrings("a", "b"), Histograms: []promql.HPoint{{T: 1, H: h}}}}},
		[]string{"up"},
		nil,
	} {
		want, got := encode(&apiv1.Response{Status: "success", Data: data})
		require.Equal(t, string(want), string(got))
	}
}

// BenchmarkMatrixCodec: a 1-hour chart of 18 series at 15 s (the tiers
// bench's max queue answer), by JSONCodec and by matrixCodec.
func BenchmarkMatrixCodec(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	m := make(promql.Matrix, 18)
	for i := range m {
		m[i].Metric = labels.FromStrings("__name__", "vllm:num_requests_waiting", "instance", "10.0.0.1:8000", "model_name", "llama")
		for k := range 241 {
			m[i].Floats = append(m[i].Floats, promql.FPoint{T: 1796222400000 + int64(k)*15000, F: float64(r.IntN(40))})
		}
	}
	resp := &apiv1.Response{Status: "success", Data: &apiv1.QueryData{ResultType: parser.ValueTypeMatrix, Result: m}}
	for _, c := range []struct {
		name  string
		codec apiv1.Codec
	}{{"JSONCodec", apiv1.JSONCodec{}}, {"matrixCodec", matrixCodec{}}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.codec.Encode(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
