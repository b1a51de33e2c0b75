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
	if a := e.opts.RemoteQuery.current(); a != nil {
		return e.newRemoteQuery(a, opts, qs, ts, ts, 0) // hub mode (remotequery.go)
	}
	deadline := time.Now().Add(e.opts.Timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	qs, opts, err := e.prepare(ctx, q, opts, qs, ts, ts, 0)
	if err != nil {
		return nil, err
	}
	q = e.opts.RemoteRead.queryable(q)
	return withDeadline(e.Engine.NewInstantQuery(ctx, q, opts, qs, ts))(deadline)
}

// NewRangeQuery adapts the query to the tiers it will read, then hands it
// to Prometheus' engine, split into parts that run in parallel when it is
// long (see splitParts).
func (e *Engine) NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, interval time.Duration) (promql.Query, error) {
	if a := e.opts.RemoteQuery.current(); a != nil {
		return e.newRemoteQuery(a, opts, qs, start, end, interval) // hub mode (remotequery.go)
	}
	deadline := time.Now().Add(e.opts.Timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	qs, opts, err := e.prepare(ctx, q, opts, qs, start, end, interval)
	if err != nil {
		return nil, err
	}
	q = e.opts.RemoteRead.queryable(q)
	if expr, err := e.parser.ParseExpr(qs); err == nil {
		if n := e.splitParts(expr, start, end, interval); n > 1 && !e.pushesDown(qs, expr) {
			return withDeadline(e.newSplitQuery(ctx, q, opts, qs, start, end, interval, n))(deadline)
		}
	}
	q = e.withStepReads(q, qs, start, end, interval, e.lookback(opts))
	if pq, err := e.newPushdownQuery(ctx, e.slots, q, opts, qs, start, end, interval); pq != nil || err != nil {
		return withDeadline(pq, err)(deadline)
	}
	return withDeadline(e.Engine.NewRangeQuery(ctx, q, opts, qs, start, end, interval))(deadline)
}

// lookback is the lookback delta a query with opts runs with.
func (e *Engine) lookback(opts promql.QueryOpts) time.Duration {
	if opts != nil && opts.LookbackDelta() > 0 {
		return opts.LookbackDelta()
	}
	return e.opts.LookbackDelta
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

// prepare parses qs once, refuses it when its subqueries would evaluate
// more than MaxSubquerySteps steps over [start, end], and returns the
// query text and options to run over q (forTiers). Unparseable queries
// pass untouched, so that Prometheus' engine reports the error.
func (e *Engine) prepare(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (string, promql.QueryOpts, error) {
	planner, planned := q.(TierPlanner)
	if !planned && !strings.Contains(qs, ":") {
		return qs, opts, nil // no tiers to plan, no subquery to bound
	}
	expr, err := e.parser.ParseExpr(qs)
	if err != nil {
		return qs, opts, nil
	}
	subStep := time.Duration(e.subqueryStepMs.Load()) * time.Millisecond
	if err := checkSubquerySteps(expr, start, end, subStep, e.opts.MaxSubquerySteps); err != nil {
		return "", nil, err
	}
	if !planned {
		return qs, opts, nil
	}
	qs, opts = e.forTiers(ctx, planner, opts, qs, expr, start, end, step)
	return qs, opts, nil
}

// forTiers returns the query text and options to run: the planner
// rewrites the parsed query expr (qs) in place (see
// storage.DB.AdaptForTiers), and the engine carries the lookback it asks
// for in the query's options.
func (e *Engine) forTiers(ctx context.Context, planner TierPlanner, opts promql.QueryOpts, qs string, expr parser.Expr, start, end time.Time, step time.Duration) (string, promql.QueryOpts) {
	lookback := e.lookback(opts)
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
