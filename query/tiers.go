package query

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
)

// TierPlanner is implemented by a storage.Queryable that reads rollup
// tiers (storage.DB, which owns tier planning: see package storage,
// "Tiers"). A Queryable that does not implement it (storage.DB.Raw, which
// rules use) gets queries unchanged.
type TierPlanner interface {
	// AdaptForTiers rewrites expr in place for the tiers a query over
	// [start, end] at step (0: instant) will read, under the limits in
	// ctx (max_source_resolution), and returns the lookback delta the
	// query must run with; ok is false when it reads raw data only and
	// nothing changed. It is called from concurrent queries.
	AdaptForTiers(ctx context.Context, expr parser.Expr, start, end time.Time, step, lookback time.Duration) (queryLookback time.Duration, ok bool)
}

// NewInstantQuery adapts the query to the tiers it will read, then hands
// it to Prometheus' engine.
func (e *Engine) NewInstantQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, ts time.Time) (promql.Query, error) {
	deadline := time.Now().Add(e.opts.Timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := e.checkSubqueries(qs, ts, ts); err != nil {
		return nil, err
	}
	qs, opts = e.forTiers(ctx, q, opts, qs, ts, ts, 0)
	q = e.opts.RemoteRead.queryable(q)
	return withDeadline(e.Engine.NewInstantQuery(ctx, q, opts, qs, ts))(deadline)
}

// NewRangeQuery adapts the query to the tiers it will read, then hands it
// to Prometheus' engine, split into parts that run in parallel when it is
// long (see splitParts).
func (e *Engine) NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, interval time.Duration) (promql.Query, error) {
	deadline := time.Now().Add(e.opts.Timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := e.checkSubqueries(qs, start, end); err != nil {
		return nil, err
	}
	qs, opts = e.forTiers(ctx, q, opts, qs, start, end, interval)
	q = e.opts.RemoteRead.queryable(q)
	if expr, err := e.parser.ParseExpr(qs); err == nil {
		if n := e.splitParts(expr, start, end, interval); n > 1 {
			return withDeadline(e.newSplitQuery(ctx, q, opts, qs, start, end, interval, n))(deadline)
		}
	}
	return withDeadline(e.Engine.NewRangeQuery(ctx, q, opts, qs, start, end, interval))(deadline)
}

// withDeadline makes a query's execution end by the deadline set when it
// was made. Prometheus' engine waits for a concurrency slot twice: once
// to prepare the query (with no timeout at all) and once to run it (with
// the whole timeout), so a queued query could overrun its timeout; with
// one deadline from the start, the waits count in the timeout.
func withDeadline(q promql.Query, err error) func(time.Time) (promql.Query, error) {
	return func(deadline time.Time) (promql.Query, error) {
		if err != nil {
			return nil, err
		}
		return deadlineQuery{Query: q, deadline: deadline}, nil
	}
}

// deadlineQuery runs a query by its deadline.
type deadlineQuery struct {
	promql.Query
	deadline time.Time
}

func (q deadlineQuery) Exec(ctx context.Context) *promql.Result {
	ctx, cancel := context.WithDeadline(ctx, q.deadline)
	defer cancel()
	return q.Query.Exec(ctx)
}

// forTiers returns the query text and options to run over q: the planner
// of q rewrites the parsed query (see storage.DB.AdaptForTiers), and the
// engine carries the lookback it asks for in the query's options.
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
	lb, ok := planner.AdaptForTiers(ctx, expr, start, end, step, lookback)
	if !ok {
		return qs, opts
	}
	if lb > lookback {
		perStep := opts != nil && opts.EnablePerStepStats()
		var useST *bool
		if opts != nil {
			useST = opts.UseStartTimestamps()
		}
		opts = promql.NewPrometheusQueryOpts(perStep, lb, useST)
	}
	return expr.String(), opts
}

// checkSubqueries refuses a query whose subqueries would evaluate more
// than MaxSubquerySteps steps over [start, end]. Unparseable queries pass:
// Prometheus' engine reports their error.
func (e *Engine) checkSubqueries(qs string, start, end time.Time) error {
	if !strings.Contains(qs, ":") {
		return nil // no subquery
	}
	expr, err := e.parser.ParseExpr(qs)
	if err != nil {
		return nil
	}
	step := time.Duration(e.subqueryStepMs.Load()) * time.Millisecond
	return checkSubquerySteps(expr, start, end, step, e.opts.MaxSubquerySteps)
}
