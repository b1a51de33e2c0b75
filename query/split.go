package query

import (
	"context"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/stats"
)

// minStepsPerPart is the fewest steps a part of a split range query gets:
// each part searches the index and decodes the blocks around its own
// range, which is only worth it when the part has enough steps to
// evaluate.
const minStepsPerPart = 100

// minRangePerPart is the shortest range a part of a split range query
// gets. A part decodes every block its range touches, and a block holds
// up to 8,192 rows of a series: about 34 hours of raw data at 15 s, 5.7
// days of the 1m tier, 28 days of the 5m tier; parts shorter than that
// decode the same blocks again. On the tiers bench's data (2 cores,
// load 7) splitting cost 30-40% more CPU and 35-58% more wall time at 1
// hour, 24 hours and 7 days, and saved 28-47% of the wall time at 30 and
// 90 days.
const minRangePerPart = 7 * 24 * time.Hour

// splitParts returns how many parts a range query over [start, end] at
// step should run as: Prometheus' engine evaluates a query on one core,
// and the steps of a range query are independent of each other, so a long
// range query (a 30-day chart) splits at step boundaries into parts that
// run on their own cores, as query frontends (Thanos, Cortex) split by
// time. Queries whose value depends on the range itself (rangeBound) are
// not split.
func (e *Engine) splitParts(expr parser.Expr, start, end time.Time, step time.Duration) int {
	if step <= 0 || e.opts.SplitParallelism < 2 {
		return 1
	}
	steps := int(end.Sub(start)/step) + 1
	parts := min(e.opts.SplitParallelism, steps/e.minSplitSteps)
	if e.minSplitRange > 0 {
		parts = min(parts, int(end.Sub(start)/e.minSplitRange))
	}
	if parts < 2 {
		return 1
	}
	if rangeBound(expr) {
		return 1
	}
	return parts
}

// rangeBound reports whether expr's value at a step depends on the
// query's range: `@ start()`, `@ end()`, the functions start(), end(),
// step() and range(), or a duration written with them (`x[step()]`,
// `offset range()`), which each part would evaluate over its own range.
func rangeBound(expr parser.Expr) bool {
	bound := false
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			bound = bound || n.StartOrEnd != 0 || durationRangeBound(n.OriginalOffsetExpr)
		case *parser.MatrixSelector:
			bound = bound || durationRangeBound(n.RangeExpr)
		case *parser.SubqueryExpr:
			bound = bound || n.StartOrEnd != 0 || durationRangeBound(n.RangeExpr) ||
				durationRangeBound(n.OriginalOffsetExpr) || durationRangeBound(n.StepExpr)
		case *parser.DurationExpr:
			bound = bound || durationRangeBound(n)
		case *parser.Call:
			switch n.Func.Name {
			case "start", "end", "step", "range":
				bound = true
			}
		}
		return nil
	})
	return bound
}

// durationRangeBound reports whether a duration expression uses step(),
// range(), start() or end().
func durationRangeBound(e parser.Expr) bool {
	switch e := e.(type) {
	case *parser.DurationExpr:
		if e == nil {
			return false
		}
		switch e.Op {
		case parser.STEP, parser.RANGE, parser.START, parser.END:
			return true
		}
		return durationRangeBound(e.LHS) || durationRangeBound(e.RHS)
	case *parser.ParenExpr:
		return durationRangeBound(e.Expr)
	case *parser.Call:
		switch e.Func.Name {
		case "start", "end", "step", "range":
			return true
		}
		for _, a := range e.Args {
			if durationRangeBound(a) {
				return true
			}
		}
	}
	return false
}

// splitQuery is a range query run as consecutive parts on the part
// engine, whose matrices are joined per series. It takes one of the
// engine's concurrency slots for the whole query.
type splitQuery struct {
	e     *Engine
	qs    string
	stmt  *parser.EvalStmt
	parts []promql.Query
}

// newSplitQuery prepares the parts of a range query; see splitParts.
func (e *Engine) newSplitQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration, n int) (promql.Query, error) {
	steps := int(end.Sub(start)/step) + 1
	sq := &splitQuery{e: e, qs: qs}
	for k := range n {
		first, next := k*steps/n, (k+1)*steps/n
		pstart, pend := start.Add(time.Duration(first)*step), start.Add(time.Duration(next-1)*step)
		pq := e.withStepReads(q, qs, pstart, pend, step, e.lookback(opts))
		p, err := e.newPushdownQuery(ctx, nil, pq, opts, qs, pstart, pend, step)
		if p == nil && err == nil {
			p, err = e.parts.NewRangeQuery(ctx, pq, opts, qs, pstart, pend, step)
		}
		if err != nil {
			sq.Close()
			return nil, err
		}
		sq.parts = append(sq.parts, p)
	}
	if st, ok := sq.parts[0].Statement().(*parser.EvalStmt); ok {
		whole := *st
		whole.Start, whole.End = start, end
		sq.stmt = &whole
	}
	return sq, nil
}

// Exec runs the parts concurrently and joins their series. The first
// error, in time order, is the query's error.
func (sq *splitQuery) Exec(ctx context.Context) *promql.Result {
	// The wait for a slot counts in the timeout, as for a whole query,
	// and the parts share what is left of it.
	ctx, cancel := context.WithTimeout(ctx, sq.e.opts.Timeout)
	defer cancel()
	if _, err := sq.e.slots.Insert(ctx, sq.qs); err != nil {
		return &promql.Result{Err: err}
	}
	defer sq.e.slots.Delete(0)
	results := make([]*promql.Result, len(sq.parts))
	var wg sync.WaitGroup
	for i, p := range sq.parts {
		wg.Go(func() { results[i] = p.Exec(ctx) })
	}
	wg.Wait()

	var warnings annotations.Annotations
	for _, r := range results {
		warnings.Merge(r.Warnings)
		if r.Err != nil {
			return &promql.Result{Err: r.Err, Warnings: warnings}
		}
	}
	byLabels := make(map[string]int)
	var out promql.Matrix
	var buf []byte
	for _, r := range results {
		m, err := r.Matrix()
		if err != nil {
			return &promql.Result{Err: err, Warnings: warnings}
		}
		for _, s := range m {
			buf = s.Metric.Bytes(buf)
			i, ok := byLabels[string(buf)]
			if !ok {
				byLabels[string(buf)] = len(out)
				out = append(out, s)
				continue
			}
			out[i].Floats = append(out[i].Floats, s.Floats...)
			out[i].Histograms = append(out[i].Histograms, s.Histograms...)
		}
	}
	sort.Sort(out)
	return &promql.Result{Value: out, Warnings: warnings}
}

// Close releases the memory of every part's result.
func (sq *splitQuery) Close() {
	for _, p := range sq.parts {
		p.Close()
	}
}

// Statement is the statement of the whole range.
func (sq *splitQuery) Statement() parser.Statement { return sq.stmt }

// Stats adds up the samples of the parts; the timers are those of the
// first part (the parts run at the same time).
func (sq *splitQuery) Stats() *stats.Statistics {
	first := sq.parts[0].Stats()
	samples := stats.NewQuerySamples(false)
	for _, p := range sq.parts {
		if s := p.Stats(); s != nil && s.Samples != nil {
			samples.TotalSamples += s.Samples.TotalSamples
			samples.PeakSamples += s.Samples.PeakSamples
		}
	}
	return &stats.Statistics{Timers: first.Timers, Samples: samples}
}

// Cancel cancels every part.
func (sq *splitQuery) Cancel() {
	for _, p := range sq.parts {
		p.Cancel()
	}
}

func (sq *splitQuery) String() string { return sq.qs }

// defaultSplitParallelism is how many parts a long range query runs as by
// default: one per core, at most 4.
func defaultSplitParallelism() int { return min(runtime.GOMAXPROCS(0), 4) }
