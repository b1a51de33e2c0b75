package harness

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Table is a Markdown table whose columns are padded so that it also reads
// well as plain text in a terminal.
type Table struct {
	Header []string
	Rows   [][]string
}

// AddRow appends a row; cells beyond the header are dropped, missing ones
// are empty.
func (t *Table) AddRow(cells ...string) {
	row := make([]string, len(t.Header))
	copy(row, cells)
	t.Rows = append(t.Rows, row)
}

// Markdown renders the table. The first column is left-aligned, the others
// (figures) right-aligned.
func (t *Table) Markdown() string {
	width := make([]int, len(t.Header))
	for i, h := range t.Header {
		width[i] = max(3, utf8.RuneCountInString(h))
	}
	for _, r := range t.Rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i == 0 {
				fmt.Fprintf(&b, " %s%s |", c, pad)
			} else {
				fmt.Fprintf(&b, " %s%s |", pad, c)
			}
		}
		b.WriteString("\n")
	}
	line(t.Header)
	b.WriteString("|")
	for i := range t.Header {
		if i == 0 {
			fmt.Fprintf(&b, " %s |", strings.Repeat("-", width[i]))
		} else {
			fmt.Fprintf(&b, " %s: |", strings.Repeat("-", width[i]-1))
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		line(r)
	}
	return b.String()
}

// Bytes formats n with a binary unit: "512 B", "1.5 KiB", "230.4 MiB".
func Bytes(n float64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%.0f B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	i := -1
	for n >= unit && i < len(units)-1 {
		n /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}
