package demo

import "math"

// histogram keeps cumulative bucket counts, as they are exposed, so that a
// render reads them directly. cum has one entry per bound plus +Inf; the
// last entry is also _count.
type histogram struct {
	layout *bucketLayout
	cum    []float64
	sum    float64
}

func newHistogram(l *bucketLayout) histogram {
	return histogram{layout: l, cum: make([]float64, len(l.le)+1)}
}

// observe adds w observations of v.
func (h *histogram) observe(v, w float64) {
	if w <= 0 {
		return
	}
	i := 0
	for i < len(h.layout.le) && v > h.layout.le[i] {
		i++
	}
	for ; i < len(h.cum); i++ {
		h.cum[i] += w
	}
	h.sum += v * w
}

// observeLogNormal adds n observations drawn in bulk from a log-normal
// distribution with parameters mu and sigma (of the logarithm), with sum as
// their total. Each bucket gets round(n·CDF(le)), which keeps the buckets
// cumulative and integral whatever n is, at a cost of at most one Erfc per
// bucket: this is how a scrape after ten idle minutes stays as cheap as one
// after five seconds. twin, if not nil, gets the same observations (vLLM
// observes inter-token latency into two families); it must share h's layout.
func (h *histogram) observeLogNormal(n, mu, sigma, sum float64, twin *histogram) {
	if n <= 0 {
		return
	}
	for i, lg := range h.layout.logLe {
		z := (lg - mu) / sigma
		var c float64
		switch {
		case z < -8:
			continue
		case z > 8:
			c = n
		default:
			c = math.Round(n * 0.5 * math.Erfc(-z/math.Sqrt2))
		}
		h.cum[i] += c
		if twin != nil {
			twin.cum[i] += c
		}
	}
	h.cum[len(h.cum)-1] += n
	h.sum += sum
	if twin != nil {
		twin.cum[len(twin.cum)-1] += n
		twin.sum += sum
	}
}

func (h *histogram) count() float64 { return h.cum[len(h.cum)-1] }

func (h *histogram) reset() {
	clear(h.cum)
	h.sum = 0
}
