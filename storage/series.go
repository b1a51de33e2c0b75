package storage

import (
	"sort"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/decimal"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
)

// series is one series read from VictoriaMetrics: its samples sorted by
// timestamp with one sample per timestamp.
type series struct {
	lset labels.Labels
	ts   []int64
	vs   []float64

	name   string             // VM's marshalled metric name while reading
	blocks []*vmstorage.Block // read, not yet decoded (see decodeBatch)
	// reduced: ts and vs are what a readSeriesReduced's reduceFunc made
	// of the rows, not the rows.
	reduced bool
}

func (s *series) Labels() labels.Labels { return s.lset }

// FloatSamples returns the series' samples, sorted by timestamp, one per
// timestamp, staleness markers included; the caller must not modify them.
// The query engine's aggregation pushdown reads them without an iterator.
func (s *series) FloatSamples() (ts []int64, vs []float64) { return s.ts, s.vs }

func (s *series) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if si, ok := it.(*sampleIterator); ok {
		si.reset(s.ts, s.vs)
		return si
	}
	si := &sampleIterator{}
	si.reset(s.ts, s.vs)
	return si
}

// sortAndDedup sorts the samples merged from several blocks and keeps one
// sample per timestamp. VictoriaMetrics keeps duplicates (it de-duplicates
// only with -dedup.minScrapeInterval) and does not record which one came
// last, so the rule is VictoriaMetrics' own dedup rule: the largest value
// wins, and a staleness marker only when every sample at that timestamp is
// one.
func (s *series) sortAndDedup() {
	ts, vs := s.ts, s.vs
	// Most reads are in order already (the blocks of a series come in
	// time order, and parts seldom overlap): one read-only pass finds
	// the first duplicate and whether a sort is needed at all.
	dup, sorted := 0, true
	for i := 1; i < len(ts); i++ {
		if ts[i] <= ts[i-1] {
			if ts[i] < ts[i-1] {
				sorted = false
				break
			}
			if dup == 0 {
				dup = i
			}
		}
	}
	switch {
	case !sorted:
		// The dedup rule below does not depend on the order of equal
		// timestamps, so an unstable sort will do: pdqsort is close to
		// linear on the few overlapping sorted runs that blocks of
		// different parts give (sort.Stable was 14% of a 90-day query).
		sort.Sort(byTimestamp{ts, vs})
		dup = 1
	case dup == 0:
		return // sorted, one sample per timestamp
	}
	j := dup - 1
	for i := dup; i < len(ts); i++ {
		if ts[i] != ts[j] {
			j++
			ts[j], vs[j] = ts[i], vs[i]
			continue
		}
		switch a, b := vs[j], vs[i]; {
		case decimal.IsStaleNaN(b):
		case decimal.IsStaleNaN(a) || b > a:
			vs[j] = b
		}
	}
	if len(ts) > 0 {
		s.ts, s.vs = ts[:j+1], vs[:j+1]
	}
}

type byTimestamp struct {
	ts []int64
	vs []float64
}

func (b byTimestamp) Len() int           { return len(b.ts) }
func (b byTimestamp) Less(i, j int) bool { return b.ts[i] < b.ts[j] }
func (b byTimestamp) Swap(i, j int) {
	b.ts[i], b.ts[j] = b.ts[j], b.ts[i]
	b.vs[i], b.vs[j] = b.vs[j], b.vs[i]
}

// seriesSet iterates over series sorted by labels.
type seriesSet struct {
	series []*series
	i      int
}

func (s *seriesSet) Next() bool {
	if s.i+1 >= len(s.series) {
		s.i = len(s.series)
		return false
	}
	s.i++
	return true
}

func (s *seriesSet) At() promstorage.Series          { return s.series[s.i] }
func (*seriesSet) Err() error                        { return nil }
func (*seriesSet) Warnings() annotations.Annotations { return nil }

// sampleIterator iterates over float samples. The start timestamp is unknown
// (AtST returns 0).
type sampleIterator = floatIterator[int64]

// floatIterator is generic only in its timestamp type, and only ever used
// with int64: go vet's stdmethods check wants every method named Seek to be
// io.Seeker's, and skips parameters of a type parameter's type. Prometheus'
// chunkenc.Iterator has Seek(int64) ValueType.
type floatIterator[T ~int64] struct {
	ts []T
	vs []float64
	i  int
}

func (it *floatIterator[T]) reset(ts []T, vs []float64) {
	it.ts, it.vs, it.i = ts, vs, -1
}

func (it *floatIterator[T]) Next() chunkenc.ValueType {
	if it.i+1 >= len(it.ts) {
		it.i = len(it.ts)
		return chunkenc.ValNone
	}
	it.i++
	return chunkenc.ValFloat
}

// Seek moves to the first sample at or after t; it never moves backwards.
func (it *floatIterator[T]) Seek(t T) chunkenc.ValueType {
	if it.i >= len(it.ts) {
		return chunkenc.ValNone
	}
	if it.i < 0 {
		it.i = 0
	}
	if it.ts[it.i] < t {
		rest := it.ts[it.i:]
		it.i += sort.Search(len(rest), func(k int) bool { return rest[k] >= t })
	}
	if it.i >= len(it.ts) {
		return chunkenc.ValNone
	}
	return chunkenc.ValFloat
}

func (it *floatIterator[T]) At() (int64, float64) { return int64(it.ts[it.i]), it.vs[it.i] }

func (it *floatIterator[T]) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return int64(it.ts[it.i]), nil
}

func (it *floatIterator[T]) AtFloatHistogram(*histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	return int64(it.ts[it.i]), nil
}

func (it *floatIterator[T]) AtT() int64 { return int64(it.ts[it.i]) }
func (*floatIterator[T]) AtST() int64   { return 0 }
func (*floatIterator[T]) Err() error    { return nil }

var _ chunkenc.Iterator = (*sampleIterator)(nil)
