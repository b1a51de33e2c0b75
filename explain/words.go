package explain

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// FormatValue writes v in unit: "1.5 s", "850 ms", "98%" (ratio), "84 °C".
func FormatValue(v float64, unit string) string {
	if !finite(v) {
		return "–"
	}
	switch unit {
	case "s":
		switch a := math.Abs(v); {
		case a == 0:
			return "0 s"
		case a < 1:
			return trim(v*1000, 3) + " ms"
		default:
			return trim(v, 3) + " s"
		}
	case "ratio":
		return trim(v*100, 2) + "%"
	case "percent":
		return trim(v, 2) + "%"
	case "celsius":
		return trim(v, 3) + " °C"
	case "reqps":
		return trim(v, 2) + "/s"
	default:
		return trim(v, 3)
	}
}

// trim prints v with about sig significant digits, no exponent, no
// trailing zeros.
func trim(v float64, sig int) string {
	if v == 0 {
		return "0"
	}
	digits := sig - 1 - int(math.Floor(math.Log10(math.Abs(v))))
	digits = max(0, digits)
	s := fmt.Sprintf("%.*f", digits, v)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// signalText says a signal's level: "KV cache 98% (was 70%)", "23
// requests waiting (was 0)".
func signalText(title, unit string, b, a float64) string {
	if unit == "short" && strings.HasPrefix(title, "requests ") {
		return fmt.Sprintf("%s %s (was %s)", FormatValue(a, unit), title, FormatValue(b, unit))
	}
	return fmt.Sprintf("%s %s (was %s)", title, FormatValue(a, unit), FormatValue(b, unit))
}

// summary says the report in one line.
func summary(r *Report, o Options) string {
	var parts []string
	at := time.UnixMilli(int64(r.At * 1000)).UTC().Format("15:04 UTC")
	p95 := "P95"
	pb, pa := float64(r.P95.Before), float64(r.P95.After)
	if !finite(pb) && !finite(pa) {
		p95, pb, pa = "mean", float64(r.Mean.Before), float64(r.Mean.After)
	}
	switch r.Status {
	case StatusRise:
		parts = append(parts, fmt.Sprintf("%s %s → %s since %s", p95, FormatValue(pb, "s"), FormatValue(pa, "s"), at))
	default:
		parts = append(parts, fmt.Sprintf("%s steady at %s (no rise in the last %s; the last %s against the %s before)",
			p95, FormatValue(pa, "s"), o.Lookback, dur(r.After.To-r.After.From), dur(r.Before.To-r.Before.From)))
	}
	if len(r.Phases) == 0 {
		parts = append(parts, "no phase metrics, so the time cannot be split (missing: "+strings.Join(r.Missing, "; ")+")")
	} else if r.Grew != "" {
		top := r.Phases[0]
		if sh := float64(top.Share); finite(sh) {
			parts = append(parts, fmt.Sprintf("%s time accounts for %.0f%% of the rise (mean %s → %s)", top.Name, 100*sh,
				FormatValue(float64(top.Before), "s"), FormatValue(float64(top.After), "s")))
		} else {
			parts = append(parts, fmt.Sprintf("%s time grew most (mean %s → %s)", top.Name,
				FormatValue(float64(top.Before), "s"), FormatValue(float64(top.After), "s")))
		}
	}
	var moved []string
	for _, s := range r.Signals {
		if s.Moved && len(moved) < 3 {
			moved = append(moved, s.Text)
		}
	}
	if len(moved) > 0 {
		parts = append(parts, strings.Join(moved, ", "))
	} else if r.Status == StatusRise {
		parts = append(parts, "no other signal moved")
	}
	return strings.Join(parts, "; ")
}

func dur(sec float64) string {
	return time.Duration(math.Round(sec) * float64(time.Second)).String()
}

// versionChange compares the values of the version labels in the two
// windows; false when the service's series carry none.
func versionChange(ctx context.Context, q Querier, spec Spec, before, after [2]time.Time) (SignalChange, bool, error) {
	if spec.Version == "" || len(spec.VersionLabels) == 0 {
		return SignalChange{}, false, nil
	}
	read := func(w [2]time.Time) ([]string, error) {
		expr := "group by (" + strings.Join(spec.VersionLabels, ", ") + ") (" + fill(spec.Version, w[1].Sub(w[0])) + ")"
		v, err := q.Instant(ctx, expr, w[1])
		if err != nil {
			return nil, err
		}
		var out []string
		for _, s := range v {
			var parts []string
			for _, l := range spec.VersionLabels {
				if s.Labels[l] != "" {
					parts = append(parts, l+"="+s.Labels[l])
				}
			}
			if len(parts) > 0 {
				out = append(out, strings.Join(parts, ","))
			}
		}
		sort.Strings(out)
		return slices.Compact(out), nil
	}
	b, err := read(before)
	if err != nil {
		return SignalChange{}, false, err
	}
	a, err := read(after)
	if err != nil {
		return SignalChange{}, false, err
	}
	if len(a) == 0 && len(b) == 0 {
		return SignalChange{}, false, nil
	}
	var added []string
	for _, v := range a {
		if !slices.Contains(b, v) {
			added = append(added, v)
		}
	}
	c := SignalChange{ID: "version", Title: "version", Unit: "short", Before: Num(len(b)), After: Num(len(a)), Score: 0}
	if len(added) > 0 {
		c.Moved, c.Score = true, Num(10)
		c.Text = "version " + strings.Join(added, " ") + " appeared (was " + orNone(strings.Join(b, " ")) + ")"
	} else {
		c.Text = "version unchanged (" + strings.Join(a, " ") + ")"
	}
	return c, true, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
