package query

import (
	"context"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
)

// TierPlanner is implemented by a storage.Queryable that reads rollup
// tiers (storage.DB): it tells the engine how coarse the data of a query
// will be, so that the engine can adapt the query before Prometheus'
// engine computes its windows. A Queryable that does not implement it
// (storage.DB.Raw, which rules use) gets queries unchanged.
type TierPlanner interface {
	// CoarsestResolution returns the resolution of the coarsest tier a
	// Select over [mint, maxt] (ms) at this step would read, under the
	// limits in ctx (max_source_resolution); 0 means raw only.
	CoarsestResolution(ctx context.Context, mint, maxt int64, step time.Duration) time.Duration
}

// NewInstantQuery adapts the query to the tiers it will read, then hands
// it to Prometheus' engine.
func (e *Engine) NewInstantQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, ts time.Time) (promql.Query, error) {
	qs, opts = e.forTiers(ctx, q, opts, qs, ts, ts, 0)
	return e.Engine.NewInstantQuery(ctx, q, opts, qs, ts)
}

// NewRangeQuery adapts the query to the tiers it will read, then hands it
// to Prometheus' engine, split into parts that run in parallel when it is
// long (see splitParts).
func (e *Engine) NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, interval time.Duration) (promql.Query, error) {
	qs, opts = e.forTiers(ctx, q, opts, qs, start, end, interval)
	if expr, err := e.parser.ParseExpr(qs); err == nil {
		if n := e.splitParts(expr, start, end, interval); n > 1 {
			return e.newSplitQuery(ctx, q, opts, qs, start, end, interval, n)
		}
	}
	return e.Engine.NewRangeQuery(ctx, q, opts, qs, start, end, interval)
}

// forTiers returns the query text and options to run over q. Prometheus' engine
// computes each range window and the lookback itself and drops every
// sample outside them, so returning a wider window from Select would not
// help: the query itself has to ask for more. When the coarsest tier the
// query reads has resolution res > 0:
//
//   - a range selector shorter than 2*res is widened to 2*res (with
//     fewer than two rollup points in a window, rate() has nothing to
//     work with), so `rate(x[5m])` over 90 days draws a line; the result
//     is then that of the wider window, on raw parts of a stitched range
//     too;
//   - the lookback delta becomes at least 2*res, so a plain selector on a
//     5m tier finds a point at every step;
//   - count_over_time(x[r]) becomes sum_over_time(x{__rollup__="count"}[r]),
//     the sum of the per-window sample counts (on raw the storage reads
//     each sample as 1), because counting rollup points would count
//     windows.
//
// Unparseable queries are passed through untouched so that Prometheus'
// engine reports the error.
func (e *Engine) forTiers(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (string, promql.QueryOpts) {
	planner, ok := q.(TierPlanner)
	if !ok {
		return qs, opts
	}
	expr, err := e.parser.ParseExpr(qs)
	if err != nil {
		return qs, opts
	}
	lookback := e.opts.LookbackDelta
	if opts != nil && opts.LookbackDelta() > 0 {
		lookback = opts.LookbackDelta()
	}
	var maxRange time.Duration
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.MatrixSelector:
			maxRange = max(maxRange, n.Range)
		case *parser.SubqueryExpr:
			maxRange = max(maxRange, n.Range)
		}
		return nil
	})
	mint := start.Add(-maxRange - lookback).UnixMilli()
	res := planner.CoarsestResolution(ctx, mint, end.UnixMilli(), step)
	if res <= 0 {
		return qs, opts
	}
	rewriteForTiers(expr, res)
	if lb := 2 * res; lb > lookback {
		perStep := opts != nil && opts.EnablePerStepStats()
		var useST *bool
		if opts != nil {
			useST = opts.UseStartTimestamps()
		}
		opts = promql.NewPrometheusQueryOpts(perStep, lb, useST)
	}
	return expr.String(), opts
}

// rollupLabel is storage.RollupLabel; query does not import storage.
const rollupLabel = "__rollup__"

// rewriteForTiers widens short range selectors to 2*res and turns
// count_over_time into a sum of stored counts, in place.
func rewriteForTiers(expr parser.Expr, res time.Duration) {
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.Call:
			if n.Func.Name != "count_over_time" || len(n.Args) != 1 {
				return nil
			}
			ms, ok := n.Args[0].(*parser.MatrixSelector)
			if !ok {
				return nil
			}
			vs, ok := ms.VectorSelector.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			n.Func = parser.Functions["sum_over_time"]
			vs.LabelMatchers = append(vs.LabelMatchers, labels.MustNewMatcher(labels.MatchEqual, rollupLabel, "count"))
		case *parser.MatrixSelector:
			if n.RangeExpr == nil && n.Range < 2*res {
				n.Range = 2 * res
			}
		}
		return nil
	})
}
