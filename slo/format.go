package slo

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The report's number formats. They are fixed, so that the same data
// always renders to the same bytes, and chosen to read well: attainment
// with three decimals of a percent (99.000% against an objective of 99%
// says whether it held), latencies with three significant digits.

// fmtPct prints a share as a percentage with three decimals: 99.123%.
func fmtPct(v *float64) string {
	if v == nil {
		return "–"
	}
	return strconv.FormatFloat(round(*v*100, 3), 'f', 3, 64) + "%"
}

// fmtObjective prints an objective as written: 99%, 99.5%.
func fmtObjective(v float64) string {
	return strconv.FormatFloat(round(v*100, 6), 'f', -1, 64) + "%"
}

// fmtPP prints the change between two shares in percentage points.
func fmtPP(a, b *float64) string {
	if a == nil || b == nil {
		return "–"
	}
	d := round((*a-*b)*100, 3)
	if d == 0 {
		return "±0.000 pp"
	}
	return signed(strconv.FormatFloat(d, 'f', 3, 64)) + " pp"
}

// fmtSeconds prints a latency with three significant digits, in ms under
// a second: 850 ms, 1.5 s, 0.15 ms.
func fmtSeconds(v float64) string {
	v = sig(v, 3) // 0.99999 s prints 1 s, not 1000 ms
	switch {
	case v == 0:
		return "0 s"
	case v < 1:
		return strconv.FormatFloat(sig(v*1000, 3), 'f', -1, 64) + " ms"
	}
	return strconv.FormatFloat(sig(v, 3), 'f', -1, 64) + " s"
}

// fmtLE prints a bucket bound in seconds the way fmtSeconds does.
func fmtLE(le string) string {
	v, err := strconv.ParseFloat(le, 64)
	if err != nil {
		return le
	}
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return fmtSeconds(v)
}

// fmtChange prints the relative change from b to a: +12.3%.
func fmtChange(a, b *float64) string {
	if a == nil || b == nil || *b == 0 {
		return "–"
	}
	d := round((*a / *b - 1)*100, 1)
	if d == 0 {
		return "±0.0%"
	}
	return signed(strconv.FormatFloat(d, 'f', 1, 64)) + "%"
}

// fmtCount prints a number of events, rounded to a whole number.
func fmtCount(v float64) string { return strconv.FormatFloat(math.Round(v), 'f', 0, 64) }

// fmtDuration prints an incident's length: 1h05m, 12m, 2d03h.
func fmtDuration(d time.Duration) string {
	d = d.Round(time.Minute)
	days, h, m := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case days > 0:
		return strconv.Itoa(days) + "d" + pad2(h) + "h"
	case h > 0:
		return strconv.Itoa(h) + "h" + pad2(m) + "m"
	}
	return strconv.Itoa(m) + "m"
}

func pad2(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

func signed(s string) string {
	if strings.HasPrefix(s, "-") {
		return "−" + s[1:]
	}
	return "+" + s
}

func round(v float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	r := math.Round(v*p) / p
	if r == 0 {
		return 0 // no "-0"
	}
	return r
}

// sig rounds v to n significant digits.
func sig(v float64, n int) float64 {
	if v == 0 {
		return 0
	}
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', n, 64), 64)
	return f
}

// approx prefixes "≈ " to an approximate figure.
func approx(s string, is bool) string {
	if is && s != "–" {
		return "≈ " + s
	}
	return s
}
