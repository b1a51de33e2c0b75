package storage

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Tier planning: which tier serves which part of a query's range, and how
// a PromQL query has to change to read rollups. This file is the one place
// that decides it (see the package doc, "Tiers" and "Who plans tiers");
// the tier-stitching querier (tiered.go) reads the plan, package query
// asks AdaptForTiers before it hands a query to Prometheus' engine, and
// package ui only carries max_source_resolution in and the tiers used out.

// stepFactor is Thanos' rule for a coarser tier: a tier may serve a query
// whose step is at least this many times its resolution, so that each step
// still has several rollup points behind it.
const stepFactor = 5

type ctxKey int

const (
	ctxMaxTier ctxKey = iota
	ctxRecorder
)

// WithMaxSourceResolution returns a context in which queries read no tier
// coarser than t (Thanos' max_source_resolution; TierRaw means raw data
// only).
func WithMaxSourceResolution(ctx context.Context, t Tier) context.Context {
	return context.WithValue(ctx, ctxMaxTier, t)
}

// MaxSourceResolution returns the limit set with WithMaxSourceResolution,
// Tier5m if none.
func MaxSourceResolution(ctx context.Context) Tier {
	if t, ok := ctx.Value(ctxMaxTier).(Tier); ok && t >= TierRaw && t < NumTiers {
		return t
	}
	return Tier5m
}

// TierRecorder collects the tiers that served the queries of one request.
// It is safe for concurrent use.
type TierRecorder struct {
	mu   sync.Mutex
	used [NumTiers]bool
}

// WithTierRecorder returns a context whose queries record the tiers they
// read in the returned recorder.
func WithTierRecorder(ctx context.Context) (context.Context, *TierRecorder) {
	r := &TierRecorder{}
	return context.WithValue(ctx, ctxRecorder, r), r
}

func (r *TierRecorder) note(t Tier) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.used[t] = true
	r.mu.Unlock()
}

// Used lists the tiers read so far, finest first.
func (r *TierRecorder) Used() []Tier {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Tier
	for _, t := range Tiers {
		if r.used[t] {
			out = append(out, t)
		}
	}
	return out
}

func recorderFrom(ctx context.Context) *TierRecorder {
	r, _ := ctx.Value(ctxRecorder).(*TierRecorder)
	return r
}

// piece is a part of a query's time range [mint, maxt] (inclusive) served
// by one tier.
type piece struct {
	tier       Tier
	mint, maxt int64
}

// TierForStep returns the coarsest tier a query with this step may prefer
// (resolution <= step/5), capped by max.
func TierForStep(step time.Duration, maxTier Tier) Tier {
	t := TierRaw
	for _, c := range []Tier{Tier1m, Tier5m} {
		if c.Resolution()*stepFactor <= step {
			t = c
		}
	}
	return min(t, maxTier)
}

// plan splits [mint, maxt] into pieces, each read from one tier: the
// preferred tier (from the step) where it has data, else the next finer
// one that has, else the next coarser one up to maxTier.
func (db *DB) plan(mint, maxt int64, prefer, maxTier Tier) []piece {
	now := db.now().UnixMilli()
	var lo, hi [NumTiers]int64
	bounds := []int64{mint}
	for _, t := range Tiers {
		lo[t], hi[t] = db.coverage(t, now)
		for _, b := range []int64{lo[t], hi[t]} {
			if b > mint && b <= maxt {
				bounds = append(bounds, b)
			}
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	choose := func(t int64) (Tier, bool) {
		covers := func(k Tier) bool { return lo[k] <= t && t < hi[k] }
		for k := prefer; k >= TierRaw; k-- {
			if covers(k) {
				return k, true
			}
		}
		for k := prefer + 1; k <= maxTier; k++ {
			if covers(k) {
				return k, true
			}
		}
		return 0, false
	}
	var out []piece
	for i, b := range bounds {
		end := maxt
		if i+1 < len(bounds) {
			end = bounds[i+1] - 1
		}
		k, ok := choose(b)
		if !ok {
			continue
		}
		if n := len(out); n > 0 && out[n-1].tier == k && out[n-1].maxt == b-1 {
			out[n-1].maxt = end
			continue
		}
		out = append(out, piece{tier: k, mint: b, maxt: end})
	}
	return out
}

// CoarsestResolution returns the resolution of the coarsest tier a Select
// over [mint, maxt] at this step would read, under the limit in ctx (0:
// raw only); AdaptForTiers plans with it.
func (db *DB) CoarsestResolution(ctx context.Context, mint, maxt int64, step time.Duration) time.Duration {
	maxTier := MaxSourceResolution(ctx)
	var res time.Duration
	for _, p := range db.plan(mint, maxt, TierForStep(step, maxTier), maxTier) {
		res = max(res, p.tier.Resolution())
	}
	return res
}

// AdaptForTiers prepares a parsed PromQL query over [start, end] at step
// (0 for an instant query) for the tiers it will read under the limit in
// ctx. Prometheus' engine computes each range window and the lookback
// itself and drops every sample outside them, so a Select cannot widen
// them by returning more: the query has to ask for more. When the
// coarsest tier the query reads has resolution res > 0, expr is rewritten
// in place:
//
//   - a range selector shorter than 2*res is widened to 2*res (with
//     fewer than two rollup points in a window, rate() has nothing to
//     work with), so `rate(x[5m])` over 90 days draws a line; the result
//     is then that of the wider window, on raw parts of a stitched range
//     too;
//   - count_over_time(x[r]) becomes sum_over_time(x{__rollup__="count"}[r]),
//     the sum of the per-window sample counts (on raw the querier reads
//     each sample as 1), because counting rollup points would count
//     windows;
//
// and the lookback delta the query must run with is at least 2*res, so a
// plain selector on a 5m tier finds a point at every step. ok is false
// when the query reads raw data only; then expr is untouched and lookback
// is returned as it came.
func (db *DB) AdaptForTiers(ctx context.Context, expr parser.Expr, start, end time.Time, step, lookback time.Duration) (queryLookback time.Duration, ok bool) {
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
	res := db.CoarsestResolution(ctx, mint, end.UnixMilli(), step)
	if res <= 0 {
		return lookback, false
	}
	rewriteForResolution(expr, res)
	return max(lookback, 2*res), true
}

// rewriteForResolution widens short range selectors to 2*res and turns
// count_over_time into a sum of stored counts, in place.
func rewriteForResolution(expr parser.Expr, res time.Duration) {
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
			vs.LabelMatchers = append(vs.LabelMatchers, labels.MustNewMatcher(labels.MatchEqual, RollupLabel, "count"))
		case *parser.MatrixSelector:
			if n.RangeExpr == nil && n.Range < 2*res {
				n.Range = 2 * res
			}
		}
		return nil
	})
}
