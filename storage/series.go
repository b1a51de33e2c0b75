package storage

import (
	"sort"
	"sync"

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
	// the first duplicate and where each ascending run after the first
	// starts (a block of a part that overlaps the blocks before it).
	var startsBuf [16]int
	starts := startsBuf[:0]
	dup := 0
	for i := 1; i < len(ts); i++ {
		if ts[i] <= ts[i-1] {
			if ts[i] < ts[i-1] {
				starts = append(starts, i)
			} else if dup == 0 {
				dup = i
			}
		}
	}
	switch {
	case len(starts) > 0:
		// The dedup rule below does not depend on the order of equal
		// timestamps, so the runs are merged as they are: a pass over
		// the overlapping parts only, where a general sort (pdqsort) was
		// 64% of a 90-day query whose 5m tier held overlapping parts.
		mergeRuns(ts, vs, starts)
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

// mergeRuns sorts ts (and vs with it) by timestamp, in place, where ts is
// ascending runs that begin at 0 and at each of starts: adjacent runs are
// merged in pairs until one is left, as a bottom-up merge sort does, so a
// read of r overlapping runs costs log2(r) passes over the parts that
// overlap. Equal timestamps end up in no particular order.
func mergeRuns(ts []int64, vs []float64, starts []int) {
	bounds := make([]int, 0, len(starts)+2)
	bounds = append(append(append(bounds, 0), starts...), len(ts))
	buf := mergeBufPool.Get().(*mergeBuf)
	defer mergeBufPool.Put(buf)
	for len(bounds) > 2 {
		last := bounds[len(bounds)-1]
		odd := (len(bounds)-1)%2 == 1
		out := bounds[:1]
		for i := 0; i+2 < len(bounds); i += 2 {
			lo, mid, hi := bounds[i], bounds[i+1], bounds[i+2]
			buf.merge(ts, vs, lo, mid, hi)
			out = append(out, hi)
		}
		if odd {
			out = append(out, last)
		}
		bounds = out
	}
}

// mergeBuf holds the left run's part that overlaps the right run while
// the two are merged.
type mergeBuf struct {
	ts []int64
	vs []float64
}

var mergeBufPool = sync.Pool{New: func() any { return new(mergeBuf) }}

// merge merges the sorted runs ts[lo:mid] and ts[mid:hi] in place. Only
// what overlaps moves: the left run's samples before the right run's
// first, and the right run's samples from the left run's last on, stay
// where they are.
func (b *mergeBuf) merge(ts []int64, vs []float64, lo, mid, hi int) {
	if lo >= mid || mid >= hi || ts[mid-1] <= ts[mid] {
		return
	}
	first, lastLeft := ts[mid], ts[mid-1]
	k := lo + sort.Search(mid-lo, func(i int) bool { return ts[lo+i] > first })
	end := mid + sort.Search(hi-mid, func(i int) bool { return ts[mid+i] >= lastLeft })
	b.ts = append(b.ts[:0], ts[k:mid]...)
	b.vs = append(b.vs[:0], vs[k:mid]...)
	// The write position o never passes the right run's read position j:
	// o = k + i + (j - mid) < j while i < mid - k.
	i, j, o := 0, mid, k
	for i < len(b.ts) && j < end {
		if ts[j] < b.ts[i] {
			ts[o], vs[o] = ts[j], vs[j]
			j++
		} else {
			ts[o], vs[o] = b.ts[i], b.vs[i]
			i++
		}
		o++
	}
	copy(ts[o:], b.ts[i:])
	copy(vs[o:], b.vs[i:])
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
