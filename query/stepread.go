package query

import (
	"context"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/aiserve/appliance/internal/stepwin"
)

// Step-aware reads. A range query evaluates each selector at the steps
// start, start+step, ... (less its offset) and reads, at each, only the
// samples in (t-w, t]: w is the selector's range, or the lookback delta
// for an instant selector. When w is shorter than the step, the samples
// between one step's window and the next are never looked at: for
// `rate(x[5m])` at a 20-minute step, three quarters of them; at 90 days
// and a 4h20m step, 49 of every 52 rollup windows. Prometheus' engine
// still reads every one of them through its iterators. The step reader
// passes the steps to the storage, which then keeps only the samples
// some step reads (StepSelecter, storage.DB's tiered querier), or, over
// any other storage, drops the others from the series it returns.
// Nothing the engine computes changes: it sees the same samples in every
// window (TestPromQLCompliance runs Prometheus' test files this way).

// StepSelecter is implemented by a storage.Querier that can keep only the
// samples a range query's steps read (storage.DB's tiered querier). It
// selects like Select, and of each series keeps only the samples at
// times t with first+k*step - window < t <= first+k*step <= last for some
// k >= 0 (milliseconds).
type StepSelecter interface {
	SelectAtSteps(ctx context.Context, sortSeries bool, hints *storage.SelectHints, first, step, last, window int64, ms ...*labels.Matcher) storage.SeriesSet
}

// stepWindows are the windows a selector is read in (package stepwin).
type stepWindows = stepwin.Windows

// stepReadable reports whether every selector of expr is evaluated at
// every step of a range query, so that its Select hints give its steps
// (stepQueryable.windows): no subquery (whose steps are aligned to its
// own step), no `@` (evaluated at one time), no anchored or smoothed
// selector (which read before the window or past it).
func stepReadable(expr parser.Expr) bool {
	ok := true
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.SubqueryExpr:
			ok = false
		case *parser.VectorSelector:
			if n.Timestamp != nil || n.StartOrEnd != 0 || n.Anchored || n.Smoothed {
				ok = false
			}
		}
		return nil
	})
	return ok
}

// stepQueryable is the Queryable one range query over [start, end] at
// step, with this lookback delta, runs on (milliseconds).
type stepQueryable struct {
	q                          storage.Queryable
	start, end, step, lookback int64
}

// withStepReads wraps q for a range query whose expression (qs, as the
// engine will parse it) stepReadable accepts; other queries get q as it
// is.
func (e *Engine) withStepReads(q storage.Queryable, qs string, start, end time.Time, step, lookback time.Duration) storage.Queryable {
	if step <= 0 {
		return q
	}
	expr, err := e.parser.ParseExpr(qs)
	if err != nil || !stepReadable(expr) {
		return q
	}
	return stepQueryable{q: q, start: start.UnixMilli(), end: end.UnixMilli(), step: step.Milliseconds(), lookback: lookback.Milliseconds()}
}

func (s stepQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := s.q.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &stepQuerier{Querier: q, sq: s}, nil
}

// windows returns the windows a Select with these hints is read in. The
// engine sets, for a selector with offset o and window w (its range, or
// the lookback), Start = start-o-w+1 and End = end-o; ok is false for
// hints that do not fit (a label query) and when every sample is read
// anyway (w >= step).
func (s stepQueryable) windows(h *storage.SelectHints) (stepWindows, bool) {
	if h == nil || h.Step != s.step || h.Func == "series" || s.step <= 0 {
		return stepWindows{}, false
	}
	w := h.Range
	if w == 0 {
		w = s.lookback
	}
	offset := s.end - h.End
	first := h.Start - 1 + w
	if w <= 0 || w >= s.step || first != s.start-offset {
		return stepWindows{}, false
	}
	return stepWindows{First: first, Step: s.step, Last: h.End, Window: w}, true
}

type stepQuerier struct {
	storage.Querier
	sq stepQueryable
}

func (q *stepQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	w, ok := q.sq.windows(hints)
	if !ok {
		return q.Querier.Select(ctx, sortSeries, hints, ms...)
	}
	if ss, ok := q.Querier.(StepSelecter); ok {
		return ss.SelectAtSteps(ctx, sortSeries, hints, w.First, w.Step, w.Last, w.Window, ms...)
	}
	return &stepSeriesSet{SeriesSet: q.Querier.Select(ctx, sortSeries, hints, ms...), w: w}
}

// VisitSeries is Select's step reads for a SeriesVisitor underneath.
func (q *stepQuerier) VisitSeries(ctx context.Context, hints *storage.SelectHints, w *stepWindows, visit func(lset labels.Labels, ts []int64, vs []float64) error, ms ...*labels.Matcher) (bool, error) {
	sv, ok := q.Querier.(SeriesVisitor)
	if !ok {
		return false, nil
	}
	if sw, ok := q.sq.windows(hints); ok {
		w = &sw
	}
	return sv.VisitSeries(ctx, hints, w, visit, ms...)
}

// stepSeriesSet keeps, of each series, the samples in w.
type stepSeriesSet struct {
	storage.SeriesSet
	w stepWindows
}

func (s *stepSeriesSet) At() storage.Series { return stepSeries{Series: s.SeriesSet.At(), w: s.w} }

type stepSeries struct {
	storage.Series
	w stepWindows
}

func (s stepSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if si, ok := it.(*stepIterator[int64]); ok {
		si.Iterator, si.w = s.Series.Iterator(si.Iterator), s.w
		return si
	}
	return &stepIterator[int64]{Iterator: s.Series.Iterator(nil), w: s.w}
}

// stepIterator skips the samples outside w. It is generic only in its
// timestamp type, and only used with int64, for go vet's stdmethods
// check (see storage's floatIterator).
type stepIterator[T ~int64] struct {
	chunkenc.Iterator
	w stepWindows
}

func (it *stepIterator[T]) Next() chunkenc.ValueType {
	for vt := it.Iterator.Next(); vt != chunkenc.ValNone; vt = it.Iterator.Next() {
		if it.w.Keep(it.Iterator.AtT()) {
			return vt
		}
	}
	return chunkenc.ValNone
}

func (it *stepIterator[T]) Seek(t T) chunkenc.ValueType {
	vt := it.Iterator.Seek(int64(t))
	if vt == chunkenc.ValNone || it.w.Keep(it.Iterator.AtT()) {
		return vt
	}
	return it.Next()
}
