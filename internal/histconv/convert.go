package histconv

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
)

// Defaults of Options.
const (
	// DefaultMaxBuckets is client_golang's recommended
	// NativeHistogramMaxBucketNumber: a histogram within what a client
	// keeps by default is converted at its own resolution.
	DefaultMaxBuckets = 160
	// DefaultMaxSeries bounds the per-series memory of emitted bounds:
	// about 100 bytes plus 8 per bound each.
	DefaultMaxSeries = 100_000
)

// Reasons of appliance_native_histograms_dropped_total.
const (
	ReasonInvalid        = "invalid"
	ReasonTooManyBuckets = "too_many_buckets"
)

// maxExponentialSchema is the finest schema Prometheus stores; schemas
// 9..52 are reserved and lowered to it, as Prometheus' scrape does.
const maxExponentialSchema = 8

// minExponentialSchema is the coarsest schema (buckets grow by 2^16).
const minExponentialSchema = -4

// Options configure a Converter.
type Options struct {
	// MaxBuckets bounds the finite bounds emitted per histogram; more
	// lower the histogram's resolution. 0 takes DefaultMaxBuckets.
	MaxBuckets int
	// MaxSeries bounds the series whose bounds are remembered; 0 takes
	// DefaultMaxSeries.
	MaxSeries int
	// Registerer receives the converter's counters; nil registers none.
	Registerer prometheus.Registerer
}

// DefaultOptions returns the options with their defaults.
func DefaultOptions() Options {
	return Options{MaxBuckets: DefaultMaxBuckets, MaxSeries: DefaultMaxSeries}
}

// Converter turns native histograms into their classic form and
// remembers, per series, the bounds it emitted. It is safe for concurrent
// use.
type Converter struct {
	maxBuckets int
	maxSeries  int

	mu sync.Mutex
	// cur and prev are two generations of remembered series: when cur
	// holds maxSeries/2 it becomes prev, and series not seen since are
	// forgotten with it.
	cur, prev map[uint64]*seriesBounds

	converted prometheus.Counter
	dropped   *prometheus.CounterVec
}

// seriesBounds is what a series emitted last. It is never changed once
// stored; a conversion stores a new one.
type seriesBounds struct {
	schema        int32
	zeroThreshold float64
	bounds        []float64 // ascending, finite; +Inf is implied
}

// New builds a Converter.
func New(opts Options) *Converter {
	if opts.MaxBuckets <= 0 {
		opts.MaxBuckets = DefaultMaxBuckets
	}
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = DefaultMaxSeries
	}
	c := &Converter{
		maxBuckets: opts.MaxBuckets,
		maxSeries:  opts.MaxSeries,
		cur:        map[uint64]*seriesBounds{},
		prev:       map[uint64]*seriesBounds{},
		converted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "appliance_native_histograms_converted_total",
			Help: "Native histograms (remote write, scrapes) stored as classic _bucket, _count and _sum series.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appliance_native_histograms_dropped_total",
			Help: "Native histograms dropped instead of stored, by reason (invalid: fails validation; too_many_buckets: over the bound even at the coarsest schema). The rest of their request or scrape is stored.",
		}, []string{"reason"}),
	}
	for _, r := range []string{ReasonInvalid, ReasonTooManyBuckets} {
		c.dropped.WithLabelValues(r)
	}
	if opts.Registerer != nil {
		c.converted = register(opts.Registerer, c.converted)
		c.dropped = register(opts.Registerer, c.dropped)
	}
	return c
}

// register registers col, or returns the collector already registered
// under its name (a second converter on one registry shares the counts).
func register[C prometheus.Collector](reg prometheus.Registerer, col C) C {
	if err := reg.Register(col); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return col
}

// Classic is a native histogram in classic form.
type Classic struct {
	// Bounds are the le values, ascending; the last is +Inf.
	Bounds []float64
	// Cumulative holds the count of observations <= each bound.
	Cumulative []float64
	Count, Sum float64
}

// DropError is a histogram that cannot be converted; Reason is one of the
// Reason constants.
type DropError struct {
	Reason string
	Err    error
}

func (e *DropError) Error() string { return e.Err.Error() }
func (e *DropError) Unwrap() error { return e.Err }

// Convert converts h or fh (one of them non-nil) of the series whose
// labels hash to key. A stale marker (a stale NaN sum) yields stale
// markers for every bound the series had, and forgets them. A histogram
// that cannot be converted is counted and returned as a *DropError.
func (c *Converter) Convert(key uint64, h *histogram.Histogram, fh *histogram.FloatHistogram) (Classic, error) {
	cl, err := c.convert(key, h, fh)
	if err != nil {
		var de *DropError
		if errors.As(err, &de) {
			c.dropped.WithLabelValues(de.Reason).Inc()
		}
		return Classic{}, err
	}
	c.converted.Inc()
	return cl, nil
}

func (c *Converter) convert(key uint64, h *histogram.Histogram, fh *histogram.FloatHistogram) (Classic, error) {
	if h != nil {
		if value.IsStaleNaN(h.Sum) {
			return c.stale(key), nil
		}
		if err := h.Validate(); err != nil {
			return Classic{}, &DropError{ReasonInvalid, fmt.Errorf("invalid native histogram: %w", err)}
		}
		fh = h.ToFloat(nil)
	} else {
		if fh == nil {
			return Classic{}, &DropError{ReasonInvalid, errors.New("no histogram")}
		}
		if value.IsStaleNaN(fh.Sum) {
			return c.stale(key), nil
		}
		if err := fh.Validate(); err != nil {
			return Classic{}, &DropError{ReasonInvalid, fmt.Errorf("invalid native histogram: %w", err)}
		}
	}
	if fh.UsesCustomBuckets() {
		return c.customBuckets(key, fh)
	}
	if fh.Schema > maxExponentialSchema {
		var err error
		if fh, err = fh.CopyToSchema(maxExponentialSchema); err != nil {
			return Classic{}, &DropError{ReasonInvalid, fmt.Errorf("lower schema %d: %w", fh.Schema, err)}
		}
	}

	prev := c.lookup(key)
	if prev != nil && prev.zeroThreshold == fh.ZeroThreshold && prev.schema < fh.Schema && prev.schema != histogram.CustomBucketsSchema {
		// This series was lowered before: stay at that resolution so its
		// bounds do not flip between scrapes.
		fh, _ = fh.CopyToSchema(prev.schema)
	}
	var bounds []float64
	for {
		populated := populatedBounds(fh)
		if prev != nil && prev.schema == fh.Schema && prev.zeroThreshold == fh.ZeroThreshold {
			if u := union(populated, prev.bounds); len(u) <= c.maxBuckets {
				bounds = u
				break
			}
		}
		if len(populated) <= c.maxBuckets {
			bounds = populated
			break
		}
		if fh.Schema <= minExponentialSchema {
			return Classic{}, &DropError{ReasonTooManyBuckets, fmt.Errorf("native histogram has %d populated bucket bounds at schema %d, more than %d", len(populated), fh.Schema, c.maxBuckets)}
		}
		fh, _ = fh.CopyToSchema(fh.Schema - 1)
	}
	c.remember(key, &seriesBounds{schema: fh.Schema, zeroThreshold: fh.ZeroThreshold, bounds: bounds})
	return Classic{
		Bounds:     append(slices.Clip(bounds), math.Inf(1)),
		Cumulative: cumulative(fh, bounds),
		Count:      fh.Count,
		Sum:        fh.Sum,
	}, nil
}

// customBuckets converts a histogram of the custom-buckets schema: every
// custom bound, as the classic histogram it came from had.
func (c *Converter) customBuckets(key uint64, fh *histogram.FloatHistogram) (Classic, error) {
	counts, count, sum, err := histogram.ClassicBucketCounts(fh, nil)
	if err != nil {
		return Classic{}, &DropError{ReasonInvalid, fmt.Errorf("invalid custom-buckets histogram: %w", err)}
	}
	if len(fh.CustomValues) > c.maxBuckets {
		return Classic{}, &DropError{ReasonTooManyBuckets, fmt.Errorf("custom-buckets histogram has %d bounds, more than %d", len(fh.CustomValues), c.maxBuckets)}
	}
	bounds := slices.Clone(fh.CustomValues)
	c.remember(key, &seriesBounds{schema: histogram.CustomBucketsSchema, bounds: bounds})
	return Classic{Bounds: append(slices.Clip(bounds), math.Inf(1)), Cumulative: counts, Count: count, Sum: sum}, nil
}

// stale is the classic form of a stale marker: stale markers for every
// bound the series had.
func (c *Converter) stale(key uint64) Classic {
	stale := math.Float64frombits(value.StaleNaN)
	bounds := append(slices.Clip(c.Forget(key)), math.Inf(1))
	cum := make([]float64, len(bounds))
	for i := range cum {
		cum[i] = stale
	}
	return Classic{Bounds: bounds, Cumulative: cum, Count: stale, Sum: stale}
}

// Bounds returns the finite bounds the series of key emitted last, or nil
// when it is not (or no longer) known. The slice must not be changed.
func (c *Converter) Bounds(key uint64) []float64 {
	if s := c.lookup(key); s != nil {
		return slices.Clip(s.bounds) // an append by the caller copies
	}
	return nil
}

// Known reports whether key is a native histogram series the converter
// remembers.
func (c *Converter) Known(key uint64) bool { return c.lookup(key) != nil }

// Forget drops what the converter remembers of the series of key and
// returns its finite bounds (nil when it knew none).
func (c *Converter) Forget(key uint64) []float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.cur[key]
	if s == nil {
		s = c.prev[key]
	}
	delete(c.cur, key)
	delete(c.prev, key)
	if s == nil {
		return nil
	}
	return s.bounds
}

func (c *Converter) lookup(key uint64) *seriesBounds {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.cur[key]; ok {
		return s
	}
	return c.prev[key]
}

func (c *Converter) remember(key uint64, s *seriesBounds) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.prev, key)
	c.cur[key] = s
	if len(c.cur) >= max(c.maxSeries/2, 1) {
		c.prev, c.cur = c.cur, make(map[uint64]*seriesBounds, len(c.cur))
	}
}

// populatedBounds returns the finite bounds of the populated buckets of
// fh, ascending: every populated bucket's upper bound and the lower bound
// of a populated bucket that does not follow a populated one.
func populatedBounds(fh *histogram.FloatHistogram) []float64 {
	var out []float64
	it := fh.AllBucketIterator()
	for it.Next() {
		b := it.At()
		if b.Count <= 0 {
			continue
		}
		if lo := b.Lower + 0; !math.IsInf(lo, -1) && (len(out) == 0 || out[len(out)-1] < lo) {
			out = append(out, lo)
		}
		if up := b.Upper + 0; !math.IsInf(up, 1) && (len(out) == 0 || out[len(out)-1] < up) {
			out = append(out, up)
		}
	}
	return out
}

// union merges two ascending sets of bounds.
func union(a, b []float64) []float64 {
	out := make([]float64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}

// cumulative returns the count of observations <= each bound (bounds on
// fh's grid, ascending), followed by the count of all buckets (+Inf).
func cumulative(fh *histogram.FloatHistogram, bounds []float64) []float64 {
	out := make([]float64, len(bounds)+1)
	var acc float64
	i := 0
	it := fh.AllBucketIterator()
	for it.Next() {
		b := it.At()
		for i < len(bounds) && bounds[i] < b.Upper {
			out[i] = acc
			i++
		}
		acc += b.Count
	}
	for ; i <= len(bounds); i++ {
		out[i] = acc
	}
	return out
}
