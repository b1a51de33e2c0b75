package unittest

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
)

// alertItem is a firing alert as a test sees it.
type alertItem struct {
	Labels, Annotations labels.Labels
}

type alertList []alertItem

func (l alertList) sort() {
	sort.SliceStable(l, func(i, j int) bool {
		if c := labels.Compare(l[i].Labels, l[j].Labels); c != 0 {
			return c < 0
		}
		return labels.Compare(l[i].Annotations, l[j].Annotations) < 0
	})
}

func (l alertList) equal(o alertList) bool {
	if len(l) != len(o) {
		return false
	}
	for i := range l {
		if !labels.Equal(l[i].Labels, o[i].Labels) || !labels.Equal(l[i].Annotations, o[i].Annotations) {
			return false
		}
	}
	return true
}

func (l alertList) String() string {
	if len(l) == 0 {
		return "[]"
	}
	var b strings.Builder
	b.WriteString("[")
	for i, a := range l {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n" + strconv.Itoa(i) + ":" + indent("\nLabels:"+a.Labels.String()+"\nAnnotations:"+a.Annotations.String(), "  "))
	}
	b.WriteString("\n]")
	return b.String()
}

// sampleItem is a sample of a promql_expr_test, expected or got.
type sampleItem struct {
	Labels labels.Labels
	Value  float64
	// Histogram is the native histogram in the test notation, or "".
	Histogram string
}

type sampleList []sampleItem

func (l sampleList) sort() {
	sort.SliceStable(l, func(i, j int) bool { return labels.Compare(l[i].Labels, l[j].Labels) < 0 })
}

// equal compares as promtool does: values exactly (NaN equals nothing), or
// with fuzzy_compare within one float64 step.
func (l sampleList) equal(o sampleList, fuzzy bool) bool {
	if len(l) != len(o) {
		return false
	}
	for i := range l {
		a, b := l[i], o[i]
		if !labels.Equal(a.Labels, b.Labels) || a.Histogram != b.Histogram {
			return false
		}
		if a.Value == b.Value {
			continue
		}
		if !fuzzy || (math.Nextafter(a.Value, math.Inf(-1)) != b.Value && math.Nextafter(a.Value, math.Inf(1)) != b.Value) {
			return false
		}
	}
	return true
}

func (l sampleList) String() string {
	if len(l) == 0 {
		return "nil"
	}
	parts := make([]string, len(l))
	for i, s := range l {
		if s.Histogram != "" {
			parts[i] = s.Labels.String() + " " + s.Histogram
		} else {
			parts[i] = s.Labels.String() + " " + strconv.FormatFloat(s.Value, 'E', -1, 64)
		}
	}
	return strings.Join(parts, ", ")
}
