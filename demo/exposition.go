package demo

import (
	"math"
	"strconv"
)

// Buckets, copied from vLLM 0.11 `vllm/v1/metrics/loggers.py` through the
// fixture shared/fixtures/vllm.prom. Tests compare them with the fixture.
var (
	ttftBuckets = newBucketLayout(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560)
	itlBuckets = newBucketLayout(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
		0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80)
	requestTimeBuckets = newBucketLayout(0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30,
		40, 50, 60, 120, 240, 480, 960, 1920, 7680)
	// 1-2-5 series up to max_model_len 8192.
	tokenBuckets     = newBucketLayout(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
	iterationBuckets = newBucketLayout(1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
	paramsNBuckets   = newBucketLayout(1, 2, 5, 10, 20)
	// prometheus-fastapi-instrumentator v8 defaults.
	httpHighrBuckets = newBucketLayout(0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5,
		2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5, 10, 30, 60)
	httpHandlerBuckets = newBucketLayout(0.1, 0.5, 1)
)

// bucketLayout is the immutable part of a histogram: upper bounds, their
// text as prometheus_client prints them, and their logarithms for the bulk
// log-normal draws.
type bucketLayout struct {
	le     []float64
	leText []string // "+Inf" last
	logLe  []float64
}

func newBucketLayout(le ...float64) *bucketLayout {
	b := &bucketLayout{le: le}
	for _, v := range le {
		b.leText = append(b.leText, string(appendPyFloat(nil, v)))
		b.logLe = append(b.logLe, math.Log(v))
	}
	b.leText = append(b.leText, "+Inf")
	return b
}

// appendPyFloat appends v the way prometheus_client 0.2x (floatToGoString)
// prints it: Python's repr, switched to Go-style exponents from 1e6 up
// ("2.172179e+06", and "1.17e+010" for ten digits, a quirk the fixtures
// keep). Integral values print with ".0".
func appendPyFloat(dst []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(dst, "+Inf"...)
	case math.IsInf(v, -1):
		return append(dst, "-Inf"...)
	case math.IsNaN(v):
		return append(dst, "NaN"...)
	}
	// Fast path: most samples are counts below a million.
	if v == math.Trunc(v) && v > -1e6 && v < 1e6 {
		if v == 0 {
			return append(dst, "0.0"...)
		}
		dst = strconv.AppendInt(dst, int64(v), 10)
		return append(dst, '.', '0')
	}
	var buf [40]byte
	e := strconv.AppendFloat(buf[:0], v, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	ePos := 0
	for ePos < len(e) && e[ePos] != 'e' {
		ePos++
	}
	exp := 0
	for _, c := range e[ePos+2:] {
		exp = exp*10 + int(c-'0')
	}
	if e[ePos+1] == '-' {
		exp = -exp
	}
	if exp < -4 || exp >= 16 {
		// Python's repr uses the same exponent form as Go here.
		if neg {
			dst = append(dst, '-')
		}
		return append(dst, e...)
	}
	var digits [24]byte
	nd := 0
	for _, c := range e[:ePos] {
		if c != '.' {
			digits[nd] = c
			nd++
		}
	}
	d := digits[:nd]
	if neg {
		dst = append(dst, '-')
	}
	if exp < 0 {
		dst = append(dst, '0', '.')
		for i := 0; i < -exp-1; i++ {
			dst = append(dst, '0')
		}
		return append(dst, d...)
	}
	intLen := exp + 1
	if !neg && intLen > 6 {
		// Go-style: mantissa with trailing zeros and dot stripped, "e+0" and
		// the exponent as Python prints it (so 1e10 gives "e+010").
		dst = append(dst, d[0])
		rest := d[1:]
		for len(rest) > 0 && rest[len(rest)-1] == '0' {
			rest = rest[:len(rest)-1]
		}
		if len(rest) > 0 {
			dst = append(dst, '.')
			dst = append(dst, rest...)
		}
		dst = append(dst, "e+0"...)
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	for i := 0; i < intLen; i++ {
		if i < len(d) {
			dst = append(dst, d[i])
		} else {
			dst = append(dst, '0')
		}
	}
	dst = append(dst, '.')
	if len(d) > intLen {
		return append(dst, d[intLen:]...)
	}
	return append(dst, '0')
}

// appendLabelValue appends s escaped as a label value in text format 0.0.4.
func appendLabelValue(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '"':
			dst = append(dst, '\\', '"')
		case '\n':
			dst = append(dst, '\\', 'n')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// segment is one piece of a precompiled page: static text, then (when val
// is set) the current value of a sample and a newline. Pointers refer into
// the instance's state, which is allocated once and only ever zeroed, so a
// render is a walk over the segments with no map lookups and no label
// formatting.
type segment struct {
	text []byte
	val  *float64
}

// pageBuilder compiles families into segments, merging adjacent static text.
type pageBuilder struct {
	segs    []segment
	pending []byte
	series  int
}

func (b *pageBuilder) static(s string) { b.pending = append(b.pending, s...) }

func (b *pageBuilder) header(name, help, typ string) {
	b.static("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

// sample adds `name{labels} <val>`. labels is the already formatted text
// between the braces, or "" for none.
func (b *pageBuilder) sample(name, labels string, val *float64) {
	b.pending = append(b.pending, name...)
	if labels != "" {
		b.pending = append(b.pending, '{')
		b.pending = append(b.pending, labels...)
		b.pending = append(b.pending, '}')
	}
	b.pending = append(b.pending, ' ')
	b.segs = append(b.segs, segment{text: b.pending, val: val})
	b.pending = nil
	b.series++
}

// histogram adds the buckets, _count and _sum of one child. before and after
// are the sorted labels that go either side of le ("engine=\"0\"" and
// "model_name=\"m\"" for vLLM).
func (b *pageBuilder) histogram(name, before, after string, h *histogram) {
	for i, le := range h.layout.leText {
		l := "le=\"" + le + "\""
		if before != "" {
			l = before + "," + l
		}
		if after != "" {
			l += "," + after
		}
		b.sample(name+"_bucket", l, &h.cum[i])
	}
	labels := joinLabels(before, after)
	b.sample(name+"_count", labels, &h.cum[len(h.cum)-1])
	b.sample(name+"_sum", labels, &h.sum)
}

func (b *pageBuilder) finish() []segment {
	if len(b.pending) > 0 {
		b.segs = append(b.segs, segment{text: b.pending})
		b.pending = nil
	}
	return b.segs
}

func joinLabels(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// renderSegments appends the page. Runs of equal values are common (the
// _created samples, the upper buckets of a histogram, zeros), so the text of
// the previous value is reused when the next one is equal: this took the
// two-model page from 78 to 33 µs (BenchmarkRenderInstance).
func renderSegments(dst []byte, segs []segment) []byte {
	var (
		prev     = math.NaN()
		prevText []byte
		scratch  [40]byte
	)
	for i := range segs {
		s := &segs[i]
		dst = append(dst, s.text...)
		if s.val == nil {
			continue
		}
		if v := *s.val; v != prev {
			prevText = appendPyFloat(scratch[:0], v)
			prev = v
		}
		dst = append(dst, prevText...)
		dst = append(dst, '\n')
	}
	return dst
}
