package harness

// Figure is a row of a [Comparison] that gets a ratio: a measure for which
// lower is better, which a system's result R may lack.
type Figure[R any] struct {
	Name  string
	Value func(r R) (float64, bool) // false: the result has no such figure
	Unit  func(v float64) string    // formats a value for its cell
}

// Detail is a row of a [Comparison] that explains the figures; it gets no
// ratio.
type Detail[R any] struct {
	Name string
	Cell func(r R) string
}

// Comparison is the main table of a side-by-side report: a column per
// system, a row per figure with a ratio in the last column, then a row per
// detail.
type Comparison[R any] struct {
	Title   func(r R) string // header of a result's column: its system
	Corner  string           // header of the first column, over the row names
	Missing string           // cell of a figure a result lacks
	Figures []Figure[R]
	Details []Detail[R]

	// RatioHeader heads the ratio column; the table has none when it is
	// empty. Ratio fills the column from one figure's values, have[i]
	// false where the i-th result lacks the figure.
	RatioHeader string
	Ratio       func(vals []float64, have []bool) string
}

// Table renders the comparison of results, a column each.
func (c *Comparison[R]) Table(results []R) Table {
	t := Table{Header: []string{c.Corner}}
	for _, r := range results {
		t.Header = append(t.Header, c.Title(r))
	}
	if c.RatioHeader != "" {
		t.Header = append(t.Header, c.RatioHeader)
	}
	for _, f := range c.Figures {
		row := []string{f.Name}
		vals := make([]float64, len(results))
		have := make([]bool, len(results))
		for i, r := range results {
			vals[i], have[i] = f.Value(r)
			if !have[i] {
				row = append(row, c.Missing)
				continue
			}
			row = append(row, f.Unit(vals[i]))
		}
		if c.RatioHeader != "" {
			row = append(row, c.Ratio(vals, have))
		}
		t.AddRow(row...)
	}
	for _, d := range c.Details {
		row := []string{d.Name}
		for _, r := range results {
			row = append(row, d.Cell(r))
		}
		t.AddRow(row...)
	}
	return t
}
