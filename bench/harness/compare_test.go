package harness

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestComparisonTable(t *testing.T) {
	type res struct {
		title string
		cpu   float64 // 0: not measured
	}
	cmp := Comparison[res]{
		Title:   func(r res) string { return r.title },
		Corner:  "metric",
		Missing: "—",
		Figures: []Figure[res]{{
			Name:  "CPU s",
			Value: func(r res) (float64, bool) { return r.cpu, r.cpu > 0 },
			Unit:  func(v float64) string { return fmt.Sprintf("%.1f s", v) },
		}},
		Details: []Detail[res]{{Name: "note", Cell: func(r res) string { return r.title[:1] }}},
	}
	results := []res{{"A", 4}, {"B", 0}, {"C", 1}}

	tb := cmp.Table(results)
	require.Equal(t, []string{"metric", "A", "B", "C"}, tb.Header)
	require.Equal(t, [][]string{{"CPU s", "4.0 s", "—", "1.0 s"}, {"note", "A", "B", "C"}}, tb.Rows)

	cmp.RatioHeader = "C ÷ A"
	cmp.Ratio = func(vals []float64, have []bool) string {
		require.Equal(t, []bool{true, false, true}, have)
		return fmt.Sprintf("%.2f×", vals[2]/vals[0])
	}
	tb = cmp.Table(results)
	require.Equal(t, "C ÷ A", tb.Header[4])
	require.Equal(t, []string{"CPU s", "4.0 s", "—", "1.0 s", "0.25×"}, tb.Rows[0])
	require.Equal(t, []string{"note", "A", "B", "C", ""}, tb.Rows[1], "details get no ratio")
}
