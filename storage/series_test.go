package storage

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/decimal"
	"github.com/stretchr/testify/require"
)

// TestSortAndDedup checks the in-order fast paths of sortAndDedup against
// the rule written out plainly: sorted by timestamp, the largest value of
// equal timestamps, a staleness marker only when all of them are one.
func TestSortAndDedup(t *testing.T) {
	stale := decimal.StaleNaN
	cases := []struct {
		name   string
		ts     []int64
		vs     []float64
		wantTs []int64
		wantVs []float64
	}{
		{"empty", nil, nil, nil, nil},
		{"one", []int64{5}, []float64{1}, []int64{5}, []float64{1}},
		{"in order", []int64{1, 2, 3}, []float64{3, 2, 1}, []int64{1, 2, 3}, []float64{3, 2, 1}},
		{"duplicate at the end", []int64{1, 2, 2}, []float64{1, 5, 7}, []int64{1, 2}, []float64{1, 7}},
		{"duplicate first", []int64{1, 1, 2, 3}, []float64{9, 4, 1, 2}, []int64{1, 2, 3}, []float64{9, 1, 2}},
		{"out of order", []int64{3, 1, 2}, []float64{3, 1, 2}, []int64{1, 2, 3}, []float64{1, 2, 3}},
		{"duplicate, then out of order", []int64{1, 1, 3, 2}, []float64{1, 2, 3, 4}, []int64{1, 2, 3}, []float64{2, 4, 3}},
		{"stale loses", []int64{1, 1}, []float64{stale, 4}, []int64{1}, []float64{4}},
		{"stale when all are", []int64{1, 1}, []float64{stale, stale}, []int64{1}, []float64{stale}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &series{ts: slices.Clone(c.ts), vs: slices.Clone(c.vs)}
			s.sortAndDedup()
			require.Equal(t, c.wantTs, s.ts)
			require.Len(t, s.vs, len(c.wantVs))
			for i := range c.wantVs {
				require.Equal(t, math.Float64bits(c.wantVs[i]), math.Float64bits(s.vs[i]), "value %d", i)
			}
		})
	}

	// Random reads: runs of blocks that overlap or not (up to 16, as parts
	// of a tier that overlap give), with duplicates and staleness markers,
	// against the rule applied to every sample of a timestamp.
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var ts []int64
		var vs []float64
		for range r.IntN(16) + 1 {
			t0 := r.Int64N(200)
			for k := range r.IntN(30) {
				ts = append(ts, t0+int64(k)*int64(r.IntN(3)))
				v := float64(r.IntN(5))
				if r.IntN(8) == 0 {
					v = stale
				}
				vs = append(vs, v)
			}
		}
		want := map[int64]float64{}
		for i, t := range ts {
			v, ok := want[t]
			switch {
			case !ok:
				want[t] = vs[i]
			case decimal.IsStaleNaN(vs[i]):
			case decimal.IsStaleNaN(v) || vs[i] > v:
				want[t] = vs[i]
			}
		}
		s := &series{ts: ts, vs: vs}
		s.sortAndDedup()
		require.True(t, slices.IsSorted(s.ts))
		require.Len(t, s.ts, len(want))
		for i, t0 := range s.ts {
			require.Equal(t, math.Float64bits(want[t0]), math.Float64bits(s.vs[i]), "at %d", t0)
		}
	}
}
