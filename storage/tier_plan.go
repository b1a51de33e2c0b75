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
	return db.coarsest(mint, maxt, TierForStep(step, maxTier), maxTier)
}

func (db *DB) coarsest(mint, maxt int64, prefer, maxTier Tier) time.Duration {
	var res time.Duration
	for _, p := range db.plan(mint, maxt, prefer, maxTier) {
		res = max(res, p.tier.Resolution())
	}
	return res
}

// exactTier returns the coarsest tier, from prefer up to maxTier, whose
// rollups give a range query of expr from start at step the answer the
// finer tiers give (see exactOn), so that it may be read below the
// step/5 rule: a 7-day chart at a 20-minute step reads the 5m tier, a
// fifth of the 1m tier's rows.
func (db *DB) exactTier(expr parser.Expr, start time.Time, step time.Duration, prefer, maxTier Tier) Tier {
	best := prefer
	for _, t := range []Tier{Tier1m, Tier5m} {
		if t > prefer && t <= maxTier && db.exactOn(expr, start, step, t.Resolution(), prefer == TierRaw) {
			best = t
		}
	}
	return best
}

// exactOn reports whether every selector of expr, evaluated at start +
// k*step, reads whole windows of resolution res through a function whose
// value over whole windows is the same from any tier: the step and each
// selector's evaluation times (less its offset) are multiples of res, its
// range is too, and it is max_over_time, rate or increase of a counter
// (its resets and the values at window boundaries are in every tier), or
// max_over_time, min_over_time, sum_over_time or count_over_time of a
// gauge (the window's own aggregates). No subquery, `@` or computed
// duration. From raw (fromRaw) rate and increase are not exact: raw
// extrapolates over the first scrape interval where rollups measure from
// boundary to boundary.
func (db *DB) exactOn(expr parser.Expr, start time.Time, step, res time.Duration, fromRaw bool) bool {
	r := res.Milliseconds()
	if step <= 0 || step.Milliseconds()%r != 0 {
		return false
	}
	ok, found := true, false
	parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
		switch n := n.(type) {
		case *parser.SubqueryExpr:
			ok = false
		case *parser.VectorSelector:
			found = true
			if n.Timestamp != nil || n.StartOrEnd != 0 || n.OriginalOffsetExpr != nil || n.Anchored || n.Smoothed ||
				(start.UnixMilli()-n.OriginalOffset.Milliseconds())%r != 0 || len(path) < 2 {
				ok = false
				return nil
			}
			ms, isRange := path[len(path)-1].(*parser.MatrixSelector)
			call, isCall := path[len(path)-2].(*parser.Call)
			if !isRange || !isCall || ms.RangeExpr != nil || ms.Range <= 0 || ms.Range%res != 0 {
				ok = false
				return nil
			}
			name := ""
			for _, m := range n.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			if name == "" {
				ok = false
				return nil
			}
			counter := db.isCounter(name)
			switch call.Func.Name {
			case "max_over_time":
			case "rate", "increase":
				ok = ok && counter && !fromRaw
			case "min_over_time", "sum_over_time", "count_over_time":
				ok = ok && !counter
			default:
				ok = false
			}
		}
		return nil
	})
	return ok && found
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
	maxTier := MaxSourceResolution(ctx)
	prefer := TierForStep(step, maxTier)
	raised := false
	if t := db.exactTier(expr, start, step, prefer, maxTier); t > prefer {
		prefer, raised = t, true
	}
	res := db.coarsest(mint, end.UnixMilli(), prefer, maxTier)
	if res <= 0 {
		return lookback, false
	}
	exact := false
	if raised {
		// Every selector asks its Select for the tier (tierMatcher). Its
		// ranges, whole windows of the coarsest tier read, need no
		// widening: each holds its windows' own points (a counter's
		// boundary point included), so the answer is the finer tier's.
		markTier(expr, prefer)
		exact = db.exactOn(expr, start, step, res, false)
	}
	rewriteForResolution(expr, res, exact)
	return max(lookback, 2*res), true
}

// markTier adds to every selector of expr the matcher that makes its
// Select prefer tier t (see splitRollupMatchers).
func markTier(expr parser.Expr, t Tier) {
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			vs.LabelMatchers = append(vs.LabelMatchers, labels.MustNewMatcher(labels.MatchEqual, RollupLabel, t.String()))
		}
		return nil
	})
}

// rewriteForResolution widens short range selectors to 2*res (unless
// exact: whole windows of a tier read below the step/5 rule, where the
// window's own rollup points suffice) and turns count_over_time into a
// sum of stored counts, in place.
func rewriteForResolution(expr parser.Expr, res time.Duration, exact bool) {
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
			if !exact && n.RangeExpr == nil && n.Range < 2*res {
				n.Range = 2 * res
			}
		}
		return nil
	})
}
