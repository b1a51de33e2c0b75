package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/schema"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/kahansum"
	"github.com/prometheus/prometheus/util/stats"
)

// Aggregation pushdown. Prometheus' engine evaluates
// `sum by (le) (rate(x[5m]))` step by step: at every step it copies each
// series' window of samples into a buffer, calls rate, and hashes the
// result into its group. The pushdown evaluates the shapes
//
//	agg by|without (...) (fn(sel[w]))   agg: sum, min, max, count, avg
//	histogram_quantile(φ, agg ...)      (not with delayed name removal)
//	fn(sel[w])                          (not with delayed name removal)
//
// in one pass per series over its samples: a window of two indices slides
// along the steps, Prometheus' own function (promql.FunctionCalls[fn]) is
// called on each window as the engine calls it (or, for max_over_time,
// min_over_time and a rate or increase without a reset, its exact
// constant-time equivalent: slidingExtreme, counterRate), and each result is folded
// into its group as the engine's aggregation folds it (the same Kahan
// summation, the same incremental mean, the same NaN rules for min and
// max, series in the order the storage returns them, so that every float
// operation happens in the same order). The results are handed back to
// Prometheus' engine as precomputed series, one point per step (a stale
// marker where a step has no value), read by a vector selector that
// replaces the subexpression in the query text, padded to its length so
// that the positions of every annotation stay where they were. The
// enclosing expression (histogram_quantile, a binary operation) is still
// Prometheus' engine's.
//
// Anything else runs as before: selectors with an offset, `@`, anchored or
// smoothed, duration expressions, subqueries (and everything inside
// one), aggregations with a parameter, and functions with more than the
// range argument. A query whose data holds a native histogram sample, or
// whose storage read fails, or whose function gives two series the same
// labels once their names are dropped (which the engine merges, or
// fails on), runs entirely on Prometheus' engine (the
// fallback), so its answer, warnings and errors are the engine's own.

// pushdownLabel is the label of the vector selector that stands for a
// pushed-down subexpression; its value is the index of the subexpression.
const pushdownLabel = "__pd"

// pushdownFuncs are the range functions the pushdown evaluates: those of
// one range argument whose result drops the metric name.
var pushdownFuncs = map[string]bool{
	"rate": true, "increase": true, "delta": true, "irate": true, "idelta": true,
	"resets": true, "changes": true, "deriv": true,
	"max_over_time": true, "min_over_time": true, "sum_over_time": true,
	"count_over_time": true, "avg_over_time": true, "stddev_over_time": true,
	"stdvar_over_time": true, "present_over_time": true,
}

// startTimestampFuncs are the functions the engine gives start timestamps
// to when they are enabled.
var startTimestampFuncs = map[string]bool{"rate": true, "irate": true, "increase": true, "resets": true}

// pushedExpr is one subexpression the pushdown evaluates.
type pushedExpr struct {
	// hq is histogram_quantile(phi, agg) around agg, or nil.
	hq   *parser.Call
	phi  float64
	agg  *parser.AggregateExpr // nil: the bare function
	call *parser.Call
	ms   *parser.MatrixSelector
	vs   *parser.VectorSelector
	fn   promql.FunctionCall

	// result is what the vector selector standing for it reads; with
	// hq, aggResult is the aggregation's, which the aggOnly text reads.
	result, aggResult []storage.Series
	// hqAnnos are the annotations of histogram_quantile; forced tells
	// that it forced some buckets monotonic.
	hqAnnos annotations.Annotations
	forced  bool
}

// pushdownPlan finds the subexpressions of expr (parsed from qs) the
// pushdown evaluates and returns qs with each replaced by its selector
// (full), and the same with histogram_quantile left to the engine
// around each pushed aggregation it holds (aggOnly, the text run when a
// histogram needs its buckets forced monotonic: see histogramQuantile).
// ok is false when there is nothing to push down.
func pushdownPlan(qs string, expr parser.Expr, delayedNameRemoval bool) (full, aggOnly string, exprs []*pushedExpr, ok bool) {
	var found []*pushedExpr
	var walk func(n parser.Node)
	walk = func(n parser.Node) {
		switch n := n.(type) {
		case *parser.SubqueryExpr:
			return // its steps are its own
		case *parser.AggregateExpr:
			if p := matchAggregate(n); p != nil {
				found = append(found, p)
				return
			}
		case *parser.Call:
			if p := matchHistogramQuantile(n); p != nil && !delayedNameRemoval {
				found = append(found, p)
				return
			}
			if p := matchCall(n); p != nil && !delayedNameRemoval {
				found = append(found, p)
				return
			}
		}
		for _, c := range parser.Children(n) {
			walk(c)
		}
	}
	walk(expr)
	var bf, ba strings.Builder
	at := 0
	fits := func(e parser.Expr, sel string) bool {
		r := e.PositionRange()
		start, end := int(r.Start), int(r.End)
		return start >= at && end <= len(qs) && end-start >= len(sel)+1 && sameExpr(qs[start:end], e)
	}
	write := func(b *strings.Builder, e parser.Expr, sel string, from int) {
		r := e.PositionRange()
		b.WriteString(qs[from:r.Start])
		b.WriteString(sel)
		b.WriteString(strings.Repeat(" ", int(r.End-r.Start)-len(sel)-1))
		b.WriteString("}")
	}
	for _, p := range found {
		sel := `{` + pushdownLabel + `="` + strconv.Itoa(len(exprs)) + `"`
		var inner parser.Expr = p.call
		if p.agg != nil {
			inner = p.agg
		}
		if !fits(inner, sel) {
			continue
		}
		if p.hq != nil && !fits(p.hq, sel) {
			p.hq = nil
		}
		outer := inner
		if p.hq != nil {
			outer = p.hq
		}
		write(&bf, outer, sel, at)
		write(&ba, inner, sel, at)
		if p.hq != nil {
			// The aggregation inside histogram_quantile, then the
			// rest of histogram_quantile up to its end.
			ba.WriteString(qs[inner.PositionRange().End:p.hq.PositionRange().End])
		}
		at = int(outer.PositionRange().End)
		exprs = append(exprs, p)
	}
	if len(exprs) == 0 {
		return qs, qs, nil, false
	}
	bf.WriteString(qs[at:])
	ba.WriteString(qs[at:])
	return bf.String(), ba.String(), exprs, true
}

// sameExpr reports whether text parses to e: the positions the parser
// gave are those of the text.
func sameExpr(text string, e parser.Expr) bool {
	got, err := parser.NewParser(parser.Options{}).ParseExpr(text)
	return err == nil && got.String() == e.String()
}

func matchAggregate(a *parser.AggregateExpr) *pushedExpr {
	switch a.Op {
	case parser.SUM, parser.MIN, parser.MAX, parser.COUNT, parser.AVG:
	default:
		return nil
	}
	if a.Param != nil {
		return nil
	}
	if !a.Without {
		for _, g := range a.Grouping {
			if schema.IsMetadataLabel(g) {
				return nil // the name of a function's result
			}
		}
	}
	inner := a.Expr
	for {
		p, ok := inner.(*parser.ParenExpr)
		if !ok {
			break
		}
		inner = p.Expr
	}
	c, ok := inner.(*parser.Call)
	if !ok {
		return nil
	}
	p := matchCall(c)
	if p == nil {
		return nil
	}
	p.agg = a
	return p
}

// matchHistogramQuantile matches histogram_quantile(phi, agg) of a
// pushed aggregation and a number 0 <= phi <= 1.
func matchHistogramQuantile(c *parser.Call) *pushedExpr {
	if c.Func == nil || c.Func.Name != "histogram_quantile" || len(c.Args) != 2 {
		return nil
	}
	num, ok := unparen(c.Args[0]).(*parser.NumberLiteral)
	if !ok || math.IsNaN(num.Val) || num.Val < 0 || num.Val > 1 {
		return nil // the engine warns at each step
	}
	a, ok := unparen(c.Args[1]).(*parser.AggregateExpr)
	if !ok {
		return nil
	}
	p := matchAggregate(a)
	if p == nil {
		return nil
	}
	p.hq, p.phi = c, num.Val
	return p
}

func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

func matchCall(c *parser.Call) *pushedExpr {
	if c.Func == nil || !pushdownFuncs[c.Func.Name] || len(c.Args) != 1 {
		return nil
	}
	ms, ok := c.Args[0].(*parser.MatrixSelector)
	if !ok || ms.RangeExpr != nil || ms.Range <= 0 {
		return nil
	}
	vs, ok := ms.VectorSelector.(*parser.VectorSelector)
	if !ok || vs.OriginalOffset != 0 || vs.OriginalOffsetExpr != nil || vs.Offset != 0 ||
		vs.Timestamp != nil || vs.StartOrEnd != 0 || vs.Anchored || vs.Smoothed {
		return nil
	}
	fn, ok := promql.FunctionCalls[c.Func.Name]
	if !ok {
		return nil
	}
	return &pushedExpr{call: c, ms: ms, vs: vs, fn: fn}
}

// pushdownQuery is a range query whose pushed subexpressions are
// evaluated before Prometheus' engine runs the rest (pushed), or, when
// the data needs it, the original query on the engine (orig).
type pushdownQuery struct {
	e          *Engine
	slots      *slots // nil: a part of a split query, which holds the slot
	qs         string
	inner      storage.Queryable
	exprs      []*pushedExpr
	start, end int64
	step       int64
	lookback   time.Duration
	useST      bool
	delayed    bool

	orig, pushed promql.Query
	// aggOnly leaves histogram_quantile to the engine (nil: no pushed
	// histogram_quantile); useAggOnly is set when it runs.
	aggOnly    promql.Query
	useAggOnly bool
	ran        promql.Query
	// mu guards cancel, which Cancel calls to end the evaluation.
	mu       sync.Mutex
	cancel   context.CancelFunc
	canceled bool
}

// newPushdownQuery returns a pushdown query for qs over q, or nil when
// nothing in qs is pushed down.
// pushesDown reports whether the pushdown takes expr (qs parsed): then a
// long range is not split into parts (split.go), since the pushdown
// reads and evaluates every series on every core itself, and each part
// would search the index and decode the blocks at its edges again. On
// the tiers bench's data, unsplit, the 30-day p95 took 102 ms of CPU
// instead of 141, the 90-day 245 instead of 295 (in process, load 2-4).
func (e *Engine) pushesDown(qs string, expr parser.Expr) bool {
	if e.opts.NoPushdown {
		return false
	}
	_, _, _, ok := pushdownPlan(qs, expr, e.features.delayedNameRemoval)
	return ok
}

func (e *Engine) newPushdownQuery(ctx context.Context, s *slots, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (promql.Query, error) {
	if e.opts.NoPushdown || step <= 0 {
		return nil, nil
	}
	expr, err := e.parser.ParseExpr(qs)
	if err != nil {
		return nil, nil
	}
	rewritten, aggOnly, exprs, ok := pushdownPlan(qs, expr, e.features.delayedNameRemoval)
	if !ok {
		return nil, nil
	}
	useST := e.features.startTimestamps
	if opts != nil && opts.UseStartTimestamps() != nil {
		useST = *opts.UseStartTimestamps()
	}
	pq := &pushdownQuery{
		e: e, slots: s, qs: qs, inner: q, exprs: exprs,
		start: start.UnixMilli(), end: end.UnixMilli(), step: step.Milliseconds(),
		lookback: e.lookback(opts), useST: useST, delayed: e.features.delayedNameRemoval,
	}
	if pq.orig, err = e.parts.NewRangeQuery(ctx, q, opts, qs, start, end, step); err != nil {
		return nil, err
	}
	if pq.pushed, err = e.parts.NewRangeQuery(ctx, pushdownQueryable{q: q, pq: pq}, opts, rewritten, start, end, step); err != nil {
		pq.orig.Close()
		return nil, nil // the engine refused the rewritten text: run as before
	}
	if aggOnly != rewritten {
		if pq.aggOnly, err = e.parts.NewRangeQuery(ctx, pushdownQueryable{q: q, pq: pq}, opts, aggOnly, start, end, step); err != nil {
			pq.orig.Close()
			pq.pushed.Close()
			return nil, nil
		}
	}
	return pq, nil
}

func (pq *pushdownQuery) Exec(ctx context.Context) *promql.Result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pq.mu.Lock()
	pq.cancel = cancel
	if pq.canceled {
		cancel()
	}
	pq.mu.Unlock()
	if pq.slots != nil {
		ctx2, cancel := context.WithTimeout(ctx, pq.e.opts.Timeout)
		defer cancel()
		if _, err := pq.slots.Insert(ctx2, pq.qs); err != nil {
			return &promql.Result{Err: err}
		}
		defer pq.slots.Delete(0)
	}
	annos, ok := pq.evaluate(ctx)
	if !ok {
		pq.e.fellBack.Add(1)
		pq.ran = pq.orig
		return pq.orig.Exec(ctx)
	}
	pq.e.pushed.Add(1)
	pq.ran = pq.pushed
	for _, p := range pq.exprs {
		if p.forced {
			// The engine's annotation of forced buckets counts its
			// own way (see histogramQuantile): its histogram_quantile.
			pq.useAggOnly, pq.ran = true, pq.aggOnly
		}
	}
	if !pq.useAggOnly {
		for _, p := range pq.exprs {
			annos.Merge(p.hqAnnos)
		}
	}
	res := pq.ran.Exec(ctx)
	res.Warnings = annos.Merge(res.Warnings)
	return res
}

// evaluate computes every pushed subexpression; ok is false when the
// query must run on the engine instead.
func (pq *pushdownQuery) evaluate(ctx context.Context) (annotations.Annotations, bool) {
	mint, maxt := pq.end, pq.end
	for _, p := range pq.exprs {
		mint = min(mint, pq.start-p.ms.Range.Milliseconds()+1)
	}
	q, err := pq.inner.Querier(mint, maxt)
	if err != nil {
		return nil, false
	}
	defer q.Close()
	var annos annotations.Annotations
	for _, p := range pq.exprs {
		a, ok := pq.evaluateOne(ctx, q, p)
		if !ok {
			return nil, false
		}
		annos.Merge(a)
	}
	return annos, true
}

// aggState is one group's aggregation at one step (the engine's
// groupedAggregation, floats only).
type aggState struct {
	value, mean, kahanC, count float64
	seen, incrementalMean      bool
}

// maxBatchValues bounds the per-step values a batch of series holds at
// once (see evaluateOne): 1M steps, 9 MB.
const maxBatchValues = 1 << 20

func (pq *pushdownQuery) evaluateOne(ctx context.Context, q storage.Querier, p *pushedExpr) (annotations.Annotations, bool) {
	rng := p.ms.Range.Milliseconds()
	hints := &storage.SelectHints{
		Start: pq.start - rng + 1,
		End:   pq.end,
		Step:  pq.step,
		Range: rng,
		Func:  p.call.Func.Name,
	}
	var annos annotations.Annotations
	numSteps := int((pq.end-pq.start)/pq.step) + 1

	// The engine's grouping (rangeEvalAgg).
	var grouping []string
	if p.agg != nil {
		grouping = slices.Clone(p.agg.Grouping)
		slices.Sort(grouping)
	}
	groupIndex := make(map[uint64]int)
	var groupLabels []labels.Labels
	var states [][]aggState // per group, per step
	var out []stepValues
	seenLabels := make(map[string]bool)
	var buf []byte

	// Series are evaluated in batches: each series' values at every step
	// in parallel, one series per task (the engine evaluates a query on
	// one core), then folded into their groups one after another in the
	// order the storage returned them, so that every float operation of
	// the aggregation happens in the engine's order.
	workers := runtime.GOMAXPROCS(0)
	batchSize := max(workers, min(1024, maxBatchValues/numSteps))
	evals := make([]*seriesEval, workers)
	for w := range evals {
		evals[w] = newSeriesEval(pq, p, hints)
	}
	// Sized by the batch, not batchSize: most queries have few series.
	var values []float64
	var has []bool
	var points []int
	batch := make([]storage.Series, 0, batchSize)

	// foldOne adds one series' values to out or its group; false when
	// the query must run on the engine.
	foldOne := func(lset labels.Labels, vals []float64, hs []bool) bool {
		if evals[0].isRate {
			if name := lset.Get(labels.MetricName); name != "" &&
				!strings.HasSuffix(name, "_total") && !strings.HasSuffix(name, "_sum") &&
				!strings.HasSuffix(name, "_count") && !strings.HasSuffix(name, "_bucket") {
				annos.Add(annotations.NewPossibleNonCounterInfo(name, p.call.Args[0].PositionRange()))
			}
		}
		// The function's result labels, as the engine gives them.
		metric := lset
		if !pq.delayed {
			metric = metric.DropReserved(schema.IsMetadataLabel)
		}
		if !pq.delayed {
			// The engine merges the results of series whose labels
			// are the same without their names, or fails when they
			// overlap: its answer, not the pushdown's.
			buf = metric.Bytes(buf)
			if seenLabels[string(buf)] {
				return false
			}
			seenLabels[string(buf)] = true
		}
		if p.agg == nil {
			out = append(out, stepValues{metric, slices.Clone(vals), slices.Clone(hs)})
			return true
		}
		var key uint64
		switch {
		case p.agg.Without:
			key, buf = metric.HashWithoutLabels(buf, grouping...)
		case len(grouping) > 0:
			key, buf = metric.HashForLabels(buf, grouping...)
		}
		g, ok := groupIndex[key]
		if !ok {
			g = len(groupLabels)
			groupIndex[key] = g
			groupLabels = append(groupLabels, groupingLabels(metric, p.agg.Without, grouping))
			states = append(states, make([]aggState, numSteps))
		}
		fold(p.agg.Op, states[g], vals, hs)
		return true
	}
	// foldBatch folds the batch's results in the storage's order.
	foldBatch := func() bool {
		for i, s := range batch {
			if points[i] > 0 && !foldOne(s.Labels(), values[i*numSteps:(i+1)*numSteps], has[i*numSteps:(i+1)*numSteps]) {
				return false
			}
		}
		return true
	}
	runBatch := func() bool {
		if n := len(batch) * numSteps; len(values) < n {
			values, has, points = make([]float64, n), make([]bool, n), make([]int, len(batch))
		}
		var next atomic.Int64
		var failed atomic.Bool
		var wg sync.WaitGroup
		// Only series held in memory are read on several goroutines at
		// once: the iterators of one Prometheus TSDB querier (the
		// compliance suite's storage) share its head chunk reader's
		// cache (headChunkReader.getOrCollectHeadChunks), which the race
		// detector shows them racing on.
		n := min(workers, len(batch))
		for _, s := range batch {
			if _, ok := s.(inMemorySamples); !ok || evals[0].withST {
				n = 1
				break
			}
		}
		for _, e := range evals[:n] {
			wg.Go(func() {
				for !failed.Load() {
					i := int(next.Add(1) - 1)
					if i >= len(batch) {
						return
					}
					n, ok := e.eval(batch[i], values[i*numSteps:(i+1)*numSteps], has[i*numSteps:(i+1)*numSteps])
					if !ok || ctx.Err() != nil {
						failed.Store(true)
						return
					}
					points[i] = n
				}
			})
		}
		wg.Wait()
		for _, e := range evals {
			annos.Merge(e.annos)
			e.annos = nil
		}
		ok := !failed.Load() && foldBatch()
		batch = batch[:0]
		return ok
	}
	if sv, ok := q.(SeriesVisitor); ok && !evals[0].withST {
		results, a, handled, ok := pq.visit(ctx, sv, p, hints, numSteps)
		if handled {
			pq.e.visited.Add(1)
			if !ok {
				return nil, false
			}
			annos.Merge(a)
			for _, r := range results {
				if !foldOne(r.lset, r.values, r.has) {
					return nil, false
				}
			}
			return annos, pq.finish(p, out, states, groupLabels, numSteps)
		}
	}
	set := q.Select(ctx, false, hints, p.vs.LabelMatchers...)
	for set.Next() {
		batch = append(batch, set.At())
		if len(batch) == batchSize && !runBatch() {
			return nil, false
		}
	}
	if len(batch) > 0 && !runBatch() {
		return nil, false
	}
	if set.Err() != nil {
		return nil, false
	}
	annos.Merge(set.Warnings())
	return annos, pq.finish(p, out, states, groupLabels, numSteps)
}

// finish makes p's result from the folded series or groups.
func (pq *pushdownQuery) finish(p *pushedExpr, out []stepValues, states [][]aggState, groupLabels []labels.Labels, numSteps int) bool {
	if p.agg != nil {
		vals, hs := make([]float64, numSteps), make([]bool, numSteps)
		for g, lset := range groupLabels {
			st := states[g]
			for k := range st {
				vals[k], hs[k] = final(p.agg.Op, &st[k]), st[k].seen
			}
			out = append(out, stepValues{lset, slices.Clone(vals), slices.Clone(hs)})
		}
	}
	p.result = pq.precomputed(out)
	if p.hq != nil {
		p.aggResult = p.result
		p.hqAnnos = nil
		hq, forced := pq.histogramQuantile(p, out, &p.hqAnnos)
		p.result, p.forced = pq.precomputed(hq), forced
	}
	return true
}

// SeriesVisitor is implemented by a storage.Querier that can hand each
// series of a read to a function on every core, in no particular order,
// each series' samples in a buffer reused for the next (storage.DB's
// tiered querier, storage.VisitFunc): no slice per series, no copy. It
// visits what Select with these hints and matchers returns, with w only
// the samples in its windows (StepSelecter); handled false means it
// cannot for this read and visited nothing.
type SeriesVisitor interface {
	VisitSeries(ctx context.Context, hints *storage.SelectHints, w *stepWindows, visit func(lset labels.Labels, ts []int64, vs []float64) error, ms ...*labels.Matcher) (handled bool, err error)
}

// visited is one series' values at every step.
type visited struct {
	lset   labels.Labels
	values []float64
	has    []bool
}

// errFallback stops a visit whose query must run on the engine.
var errFallback = errors.New("pushdown: the engine's")

// visit evaluates p over the series sv visits and returns their values
// sorted by labels, the order Select returns them in, so that they fold
// as the engine folds them. ok is false when the query must run on the
// engine (or the read failed: the engine reads again and answers).
func (pq *pushdownQuery) visit(ctx context.Context, sv SeriesVisitor, p *pushedExpr, hints *storage.SelectHints, numSteps int) (results []visited, annos annotations.Annotations, handled, ok bool) {
	var mu sync.Mutex
	evals := sync.Pool{New: func() any { return newSeriesEval(pq, p, hints) }}
	handled, err := sv.VisitSeries(ctx, hints, nil, func(lset labels.Labels, ts []int64, vs []float64) error {
		e := evals.Get().(*seriesEval)
		defer evals.Put(e)
		e.loadSlices(ts, vs)
		r := visited{lset, make([]float64, numSteps), make([]bool, numSteps)}
		n, ok := e.evalLoaded(lset, r.values, r.has)
		if !ok {
			return errFallback
		}
		mu.Lock()
		defer mu.Unlock()
		if len(e.annos) > 0 {
			annos.Merge(e.annos)
			e.annos = nil
		}
		if n > 0 {
			results = append(results, r)
		}
		return ctx.Err()
	}, p.vs.LabelMatchers...)
	if !handled {
		return nil, nil, false, false
	}
	if err != nil {
		return nil, nil, true, false
	}
	slices.SortFunc(results, func(a, b visited) int { return labels.Compare(a.lset, b.lset) })
	return results, annos, true, true
}

// inMemorySamples is a series whose float samples are in memory, sorted
// by time, one per timestamp (the appliance's storage): the pushdown
// reads them without an iterator.
type inMemorySamples interface {
	FloatSamples() (ts []int64, vs []float64)
}

// seriesEval evaluates the pushed function of one series at every step;
// each worker of evaluateOne owns one.
type seriesEval struct {
	pq    *pushdownQuery
	p     *pushedExpr
	hints *storage.SelectHints
	rng   int64

	withST, isRate, extreme, counter bool
	disjoint                         bool // windows do not overlap: no sliding extreme
	cr                               counterRate

	// ts and vs are the series' samples in the selector's range, stale
	// markers dropped: the storage's own buffers when it had none (the
	// visit's), else tsBuf and vsBuf. win is a window as the engine's
	// functions take it; sts are start timestamps.
	ts       []int64
	vs       []float64
	tsBuf    []int64
	vsBuf    []float64
	win      []promql.FPoint
	sts      []int64
	it       chunkenc.Iterator
	inMatrix promql.Matrix
	enh      *promql.EvalNodeHelper
	ext      slidingExtreme
	annos    annotations.Annotations
}

func newSeriesEval(pq *pushdownQuery, p *pushedExpr, hints *storage.SelectHints) *seriesEval {
	name := p.call.Func.Name
	e := &seriesEval{
		pq: pq, p: p, hints: hints, rng: hints.Range,
		withST:   pq.useST && startTimestampFuncs[name],
		isRate:   name == "rate" || name == "increase",
		extreme:  name == "max_over_time" || name == "min_over_time",
		inMatrix: make(promql.Matrix, 1),
		enh:      &promql.EvalNodeHelper{Out: make(promql.Vector, 0, 1), LookbackDelta: pq.lookback},
		ext:      slidingExtreme{max: name == "max_over_time"},
		cr:       counterRate{isRate: name == "rate", rangeMs: hints.Range, rangeSeconds: p.ms.Range.Seconds()},
	}
	// rate and increase of a window without a counter reset (and
	// without start timestamps) in constant time: see counterRate.
	e.counter = e.isRate && !e.withST
	// A step at least the range (a 30-day chart of max_over_time[1h])
	// uses each sample in one window at most: a scan of each window
	// costs less than the sliding window's bookkeeping of every sample.
	e.disjoint = e.extreme && pq.step >= hints.Range
	return e
}

// load reads s's samples in the selector's range into e.ts and e.vs
// (and e.sts); false for a native histogram sample or a failed read.
func (e *seriesEval) load(s storage.Series) bool {
	if m, ok := s.(inMemorySamples); ok && !e.withST {
		e.loadSlices(m.FloatSamples())
		return true
	}
	e.tsBuf, e.vsBuf, e.sts = e.tsBuf[:0], e.vsBuf[:0], e.sts[:0]
	e.it = s.Iterator(e.it)
	for vt := e.it.Next(); vt != chunkenc.ValNone; vt = e.it.Next() {
		if vt != chunkenc.ValFloat {
			return false // native histograms: the engine's
		}
		t, f := e.it.At()
		if value.IsStaleNaN(f) || t < e.hints.Start || t > e.hints.End {
			continue
		}
		e.tsBuf, e.vsBuf = append(e.tsBuf, t), append(e.vsBuf, f)
		if e.withST {
			e.sts = append(e.sts, e.it.AtST())
		}
	}
	e.ts, e.vs = e.tsBuf, e.vsBuf
	return e.it.Err() == nil
}

// eval writes s's value at each step into values and has and returns
// how many steps have one; false when the query must run on the engine.
func (e *seriesEval) eval(s storage.Series, values []float64, has []bool) (int, bool) {
	if !e.load(s) {
		return 0, false
	}
	return e.evalLoaded(s.Labels(), values, has)
}

// loadSlices is load of samples in memory (inMemorySamples), without
// start timestamps: the part of ts and vs in the selector's range, as
// they are when they hold no stale marker, else copied without them.
func (e *seriesEval) loadSlices(ts []int64, vs []float64) {
	lo, _ := slices.BinarySearch(ts, e.hints.Start)
	hi, found := slices.BinarySearch(ts, e.hints.End)
	if found {
		hi++
	}
	ts, vs = ts[lo:hi], vs[lo:hi]
	i := 0
	for i < len(vs) && !value.IsStaleNaN(vs[i]) {
		i++
	}
	if i == len(vs) {
		e.ts, e.vs = ts, vs
		return
	}
	e.tsBuf, e.vsBuf = append(e.tsBuf[:0], ts[:i]...), append(e.vsBuf[:0], vs[:i]...)
	for ; i < len(vs); i++ {
		if !value.IsStaleNaN(vs[i]) {
			e.tsBuf, e.vsBuf = append(e.tsBuf, ts[i]), append(e.vsBuf, vs[i])
		}
	}
	e.ts, e.vs = e.tsBuf, e.vsBuf
}

// evalLoaded is eval of the samples load put in e.ts and e.vs.
func (e *seriesEval) evalLoaded(lset labels.Labels, values []float64, has []bool) (int, bool) {
	pq, tss, vss := e.pq, e.ts, e.vs
	e.inMatrix[0].Metric = lset
	points := 0
	lo, hi := 0, 0
	e.ext.reset()
	// resets counts the counter resets in the window [lo, hi): points j
	// with lo < j < hi below the point before them, as extrapolatedRate
	// counts them.
	resets := 0
	for k := range values {
		has[k] = false
		ts := pq.start + int64(k)*pq.step
		for hi < len(tss) && tss[hi] <= ts {
			if e.extreme && !e.disjoint {
				e.ext.push(vss, hi)
			}
			if e.counter && hi > lo && vss[hi] < vss[hi-1] {
				resets++
			}
			hi++
		}
		for lo < hi && tss[lo] <= ts-e.rng {
			if e.counter && lo+1 < hi && vss[lo+1] < vss[lo] {
				resets--
			}
			lo++
		}
		if lo == hi {
			continue
		}
		if e.extreme {
			f, ok := 0.0, false
			if e.disjoint {
				f, ok = windowExtreme(vss[lo:hi], e.ext.max)
			} else {
				f, ok = e.ext.at(vss, lo)
			}
			if ok {
				values[k], has[k] = f, true
				points++
				continue
			}
		}
		if e.counter && resets == 0 {
			if hi-lo < 2 {
				continue // one sample: no rate
			}
			first, last := promql.FPoint{T: tss[lo], F: vss[lo]}, promql.FPoint{T: tss[hi-1], F: vss[hi-1]}
			values[k], has[k] = e.cr.at(first, last, hi-lo-1, ts), true
			points++
			continue
		}
		e.win = e.win[:0]
		for i := lo; i < hi; i++ {
			e.win = append(e.win, promql.FPoint{T: tss[i], F: vss[i]})
		}
		e.inMatrix[0].Floats = e.win
		e.enh.Ts = ts
		e.enh.StartTimestamps = nil
		if e.withST {
			e.enh.StartTimestamps = &promql.StartTimestamps{Floats: e.sts[lo:hi]}
		}
		outVec, a := e.p.fn(nil, e.inMatrix, e.p.call.Args, e.enh)
		e.annos.Merge(a)
		e.enh.Out = outVec[:0]
		if len(outVec) > 0 {
			if outVec[0].H != nil {
				return 0, false
			}
			values[k], has[k] = outVec[0].F, true
			points++
		}
	}
	return points, true
}

func (pq *pushdownQuery) precomputed(in []stepValues) []storage.Series {
	out := make([]storage.Series, len(in))
	for i, sv := range in {
		out[i] = precomputed(sv.lset, sv.values, sv.has, pq.start, pq.step)
	}
	return out
}

// stepValues is one result series: its value at each step that has one.
type stepValues struct {
	lset   labels.Labels
	values []float64
	has    []bool
}

// histogramQuantile is the engine's histogram_quantile (of classic
// buckets: the aggregation's results are floats) at every step, over
// the series in the order the engine's vector holds them: the buckets of
// a histogram in that order, so that sorting and coalescing them does
// the same float operations.
//
// When some buckets had to be forced monotonic it reports forced: the
// engine's annotation then counts the steps in a way that depends on how
// its annotations are merged step by step (Prometheus v0.316.0 gives
// 1, 4, 10, 22, 46... for 1, 2, 3, 4, 5 steps), so the query runs the
// aggOnly text, whose histogram_quantile is the engine's.
func (pq *pushdownQuery) histogramQuantile(p *pushedExpr, in []stepValues, annos *annotations.Annotations) (_ []stepValues, forced bool) {
	type histogram struct {
		metric  labels.Labels
		buckets promql.Buckets
		out     stepValues
		seen    bool
	}
	var hs []*histogram
	bySig := make(map[string]*histogram)
	of := make([]*histogram, len(in)) // nil: a bad le label
	ub := make([]float64, len(in))
	var buf []byte
	for i, sv := range in {
		le := sv.lset.Get(labels.BucketLabel)
		f, err := strconv.ParseFloat(le, 64)
		if err != nil || math.IsNaN(f) {
			if slices.Contains(sv.has, true) {
				annos.Add(annotations.NewBadBucketLabelWarning("", le, p.hq.Args[1].PositionRange()))
			}
			continue
		}
		ub[i] = f
		buf = sv.lset.BytesWithoutLabels(buf, labels.BucketLabel)
		h := bySig[string(buf)]
		if h == nil {
			metric := labels.NewBuilder(sv.lset).Del(labels.BucketLabel).Labels().DropReserved(schema.IsMetadataLabel)
			h = &histogram{metric: metric}
			bySig[string(buf)] = h
			hs = append(hs, h)
		}
		of[i] = h
	}
	numSteps := int((pq.end-pq.start)/pq.step) + 1
	for _, h := range hs {
		h.out = stepValues{h.metric, make([]float64, numSteps), make([]bool, numSteps)}
	}
	for k := range numSteps {
		for _, h := range hs {
			h.buckets = h.buckets[:0]
		}
		for i, sv := range in {
			if of[i] != nil && sv.has[k] {
				of[i].buckets = append(of[i].buckets, promql.Bucket{UpperBound: ub[i], Count: sv.values[k]})
			}
		}
		for _, h := range hs {
			if len(h.buckets) == 0 {
				continue
			}
			q, forcedHere, _, _, _, _ := promql.BucketQuantile(p.phi, h.buckets)
			forced = forced || forcedHere
			h.out.values[k], h.out.has[k] = q, true
			h.seen = true
		}
	}
	out := make([]stepValues, 0, len(hs))
	for _, h := range hs {
		if h.seen {
			out = append(out, h.out)
		}
	}
	return out, forced
}

// counterRate is Prometheus' extrapolatedRate (v0.316.0, functions.go)
// of a float window without a counter reset, no start timestamps, no
// offset and no anchored or smoothed selector: then its reset loop adds
// nothing, and the result depends only on the first and last samples and
// how many there are. The float operations are the function's, in its
// order (none is a multiply-add a compiler could fuse);
// TestCounterRate checks it bit for bit against the function.
//
// All but the last multiply depend on the window's shape alone (where its
// first and last samples sit in it, how many it has) but for one case
// (durationToZero), and a series scraped at a steady interval has the
// same shape at every step: counterRate keeps the last shape's factor.
type counterRate struct {
	isRate       bool
	rangeMs      int64
	rangeSeconds float64
	last         rateShape
}

// rateShape is one window shape and what extrapolatedRate makes of it.
type rateShape struct {
	valid              bool
	toStartMs, toEndMs int64
	numSamplesMinusOne int
	// durationToStart and durationToEnd are after the extrapolation
	// threshold; factor is the rate's (increase's) factor unless
	// durationToZero is shorter than durationToStart.
	durationToStart, durationToEnd, sampledInterval, factor float64
}

// at is the rate (increase) at ts of a window from first to last with
// numSamplesMinusOne+1 samples, numSamplesMinusOne >= 1.
func (c *counterRate) at(first, last promql.FPoint, numSamplesMinusOne int, ts int64) float64 {
	rangeStart := ts - c.rangeMs
	sh := &c.last
	if !sh.valid || sh.toStartMs != first.T-rangeStart || sh.toEndMs != ts-last.T || sh.numSamplesMinusOne != numSamplesMinusOne {
		*sh = c.shape(first.T, last.T, numSamplesMinusOne, ts)
	}
	resultFloat := last.F - first.F
	// durationToZero = sampledInterval * (first.F / resultFloat) is at
	// least sampledInterval when first.F >= resultFloat (rounding is
	// monotonic), so not below durationToStart when that is at most
	// sampledInterval: no need to compute it.
	if resultFloat > 0 && first.F >= 0 && (first.F < resultFloat || sh.sampledInterval < sh.durationToStart) {
		if durationToZero := sh.sampledInterval * (first.F / resultFloat); durationToZero < sh.durationToStart {
			return resultFloat * c.factor(sh.sampledInterval, durationToZero, sh.durationToEnd)
		}
	}
	return resultFloat * sh.factor
}

// shape is extrapolatedRate's arithmetic on a window's timestamps.
func (c *counterRate) shape(firstT, lastT int64, numSamplesMinusOne int, ts int64) rateShape {
	rangeStart, rangeEnd := ts-c.rangeMs, ts
	durationToStart := float64(firstT-rangeStart) / 1000
	durationToEnd := float64(rangeEnd-lastT) / 1000
	sampledInterval := float64(lastT-firstT) / 1000
	averageDurationBetweenSamples := sampledInterval / float64(numSamplesMinusOne)
	extrapolationThreshold := averageDurationBetweenSamples * 1.1
	if durationToStart >= extrapolationThreshold {
		durationToStart = averageDurationBetweenSamples / 2
	}
	if durationToEnd >= extrapolationThreshold {
		durationToEnd = averageDurationBetweenSamples / 2
	}
	return rateShape{
		valid: true, toStartMs: firstT - rangeStart, toEndMs: rangeEnd - lastT, numSamplesMinusOne: numSamplesMinusOne,
		durationToStart: durationToStart, durationToEnd: durationToEnd, sampledInterval: sampledInterval,
		factor: c.factor(sampledInterval, durationToStart, durationToEnd),
	}
}

func (c *counterRate) factor(sampledInterval, durationToStart, durationToEnd float64) float64 {
	factor := 1.0
	if sampledInterval != 0 {
		factor = (sampledInterval + durationToStart + durationToEnd) / sampledInterval
	}
	if c.isRate {
		factor /= c.rangeSeconds
	}
	return factor
}

// slidingExtreme is max_over_time (or min_over_time) of a sliding
// window in amortized constant time per step, with the answer of
// Prometheus' function: the largest (smallest) value that is not NaN,
// the earliest of equal ones (0 and -0 are equal; the function keeps the
// first). A window of NaNs only is left to the function (ok false).
type slidingExtreme struct {
	max bool
	// idx[head:] are indices of points not NaN, ascending; their values
	// descend (max) or ascend (min), equal ones kept in order.
	idx  []int
	head int
}

func (s *slidingExtreme) reset() { s.idx, s.head = s.idx[:0], 0 }

// push adds point i (of values vs), the newest.
func (s *slidingExtreme) push(vs []float64, i int) {
	f := vs[i]
	if math.IsNaN(f) {
		return
	}
	for n := len(s.idx); n > s.head; n = len(s.idx) {
		b := vs[s.idx[n-1]]
		if (s.max && b < f) || (!s.max && b > f) {
			s.idx = s.idx[:n-1]
			continue
		}
		break
	}
	s.idx = append(s.idx, i)
}

// windowExtreme is max_over_time (min_over_time) of one window's values
// by a scan, with slidingExtreme's answer: the first of equal values,
// NaN only when all are (ok false, left to the function).
func windowExtreme(vs []float64, max bool) (float64, bool) {
	i := 0
	for i < len(vs) && math.IsNaN(vs[i]) {
		i++
	}
	if i == len(vs) {
		return 0, false
	}
	m := vs[i]
	if max {
		for _, f := range vs[i+1:] {
			if f > m { // false for NaN
				m = f
			}
		}
	} else {
		for _, f := range vs[i+1:] {
			if f < m {
				m = f
			}
		}
	}
	return m, true
}

// at drops the points before lo and returns the window's extreme.
func (s *slidingExtreme) at(vs []float64, lo int) (float64, bool) {
	for s.head < len(s.idx) && s.idx[s.head] < lo {
		s.head++
	}
	if s.head == len(s.idx) {
		return 0, false
	}
	return vs[s.idx[s.head]], true
}

// groupingLabels are an aggregation's output labels (the engine's
// generateGroupingLabels).
func groupingLabels(metric labels.Labels, without bool, grouping []string) labels.Labels {
	switch {
	case without:
		b := labels.NewBuilder(metric)
		b.Del(grouping...)
		schema.Metadata{}.SetToLabels(b)
		return b.Labels()
	case len(grouping) > 0:
		return labels.NewBuilder(metric).Keep(grouping...).Labels()
	default:
		return labels.EmptyLabels()
	}
}

// fold adds one series' values to its group's states, step by step, as
// the engine's aggregation does.
func fold(op parser.ItemType, st []aggState, values []float64, has []bool) {
	for k, ok := range has {
		if !ok {
			continue
		}
		f, g := values[k], &st[k]
		if !g.seen {
			*g = aggState{seen: true, value: f, mean: f, count: 1}
			continue
		}
		switch op {
		case parser.SUM:
			g.value, g.kahanC = kahansum.Inc(f, g.value, g.kahanC)
		case parser.AVG:
			g.count++
			if !g.incrementalMean {
				newV, newC := kahansum.Inc(f, g.value, g.kahanC)
				if !math.IsInf(newV, 0) {
					g.value, g.kahanC = newV, newC
					break
				}
				g.incrementalMean = true
				g.mean = g.value / (g.count - 1)
				g.kahanC /= g.count - 1
			}
			q := (g.count - 1) / g.count
			g.mean, g.kahanC = kahansum.Inc(f/g.count, q*g.mean, q*g.kahanC)
		case parser.MAX:
			if g.value < f || math.IsNaN(g.value) {
				g.value = f
			}
		case parser.MIN:
			if g.value > f || math.IsNaN(g.value) {
				g.value = f
			}
		case parser.COUNT:
			g.count++
		}
	}
}

// final is a group's value at a step (the end of the engine's
// aggregation).
func final(op parser.ItemType, g *aggState) float64 {
	switch op {
	case parser.SUM:
		return g.value + g.kahanC
	case parser.AVG:
		if g.incrementalMean {
			return g.mean + g.kahanC
		}
		return g.value/g.count + g.kahanC/g.count
	case parser.COUNT:
		return g.count
	}
	return g.value
}

// precomputed is a precomputed series: a point at every step with a
// value, a stale marker at every other.
func precomputed(lset labels.Labels, values []float64, has []bool, start, step int64) storage.Series {
	pts := make([]promql.FPoint, len(values))
	for k := range values {
		pts[k] = promql.FPoint{T: start + int64(k)*step, F: values[k]}
		if !has[k] {
			pts[k].F = math.Float64frombits(value.StaleNaN)
		}
	}
	return promql.NewStorageSeries(promql.Series{Metric: lset, Floats: pts})
}

func (pq *pushdownQuery) query() promql.Query {
	if pq.ran != nil {
		return pq.ran
	}
	return pq.orig
}

func (pq *pushdownQuery) Close() {
	pq.orig.Close()
	pq.pushed.Close()
	if pq.aggOnly != nil {
		pq.aggOnly.Close()
	}
}

func (pq *pushdownQuery) Statement() parser.Statement { return pq.orig.Statement() }
func (pq *pushdownQuery) Stats() *stats.Statistics    { return pq.query().Stats() }
func (pq *pushdownQuery) Cancel() {
	pq.mu.Lock()
	pq.canceled = true
	if pq.cancel != nil {
		pq.cancel()
	}
	pq.mu.Unlock()
	pq.orig.Cancel()
	pq.pushed.Cancel()
	if pq.aggOnly != nil {
		pq.aggOnly.Cancel()
	}
}
func (pq *pushdownQuery) String() string { return pq.qs }

// pushdownQueryable serves the pushed subexpressions' results to the
// rewritten query, and every other selector from q.
type pushdownQueryable struct {
	q  storage.Queryable
	pq *pushdownQuery
}

func (p pushdownQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := p.q.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return pushdownQuerier{Querier: q, pq: p.pq}, nil
}

type pushdownQuerier struct {
	storage.Querier
	pq *pushdownQuery
}

func (q pushdownQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	if len(ms) == 1 && ms[0].Name == pushdownLabel && ms[0].Type == labels.MatchEqual {
		i, err := strconv.Atoi(ms[0].Value)
		if err != nil || i < 0 || i >= len(q.pq.exprs) {
			return storage.ErrSeriesSet(fmt.Errorf("pushdown: no subexpression %q", ms[0].Value))
		}
		p := q.pq.exprs[i]
		if q.pq.useAggOnly && p.hq != nil {
			return &listSeriesSet{series: p.aggResult, i: -1}
		}
		return &listSeriesSet{series: p.result, i: -1}
	}
	return q.Querier.Select(ctx, sortSeries, hints, ms...)
}
