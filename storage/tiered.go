package storage

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// Querier returns the tier-stitching querier over [mint, maxt]
// (milliseconds, inclusive); see the package doc, "Tiers". Alert and
// recording rules must use Raw instead.
func (db *DB) Querier(mint, maxt int64) (promstorage.Querier, error) {
	raw, err := db.rawQuerier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &tieredQuerier{raw: raw}, nil
}

// Raw returns a Queryable over the raw tier alone, for alert and recording
// rules, which must see exactly what was scraped.
func (db *DB) Raw() promstorage.Queryable { return rawQueryable{db} }

type rawQueryable struct{ db *DB }

func (r rawQueryable) Querier(mint, maxt int64) (promstorage.Querier, error) {
	return r.db.rawQuerier(mint, maxt)
}

type tieredQuerier struct {
	raw *querier
}

func (*tieredQuerier) Close() error { return nil }

// Select reads each piece of the range from its tier and joins the pieces
// per series. The aggregate read from a rollup tier follows hints.Func
// (readAggFor), or a matcher __rollup__="<agg>".
func (q *tieredQuerier) Select(ctx context.Context, _ bool, hints *promstorage.SelectHints, ms ...*labels.Matcher) promstorage.SeriesSet {
	return q.sel(ctx, hints, nil, ms)
}

// SelectAtSteps is Select keeping, of each series, only the points at
// times t with first+k*step-window < t <= first+k*step <= last for some
// k >= 0: those a range query's steps read (query.StepSelecter). From raw
// the other samples are dropped as they are decoded, from a rollup tier
// once the points are made (see readRollup).
func (q *tieredQuerier) SelectAtSteps(ctx context.Context, _ bool, hints *promstorage.SelectHints, first, step, last, window int64, ms ...*labels.Matcher) promstorage.SeriesSet {
	if step <= 0 || window <= 0 {
		return q.sel(ctx, hints, nil, ms)
	}
	return q.sel(ctx, hints, &stepWindows{First: first, Step: step, Last: last, Window: window}, ms)
}

func (q *tieredQuerier) sel(ctx context.Context, hints *promstorage.SelectHints, sw *stepWindows, ms []*labels.Matcher) promstorage.SeriesSet {
	db := q.raw.db
	mint, maxt := q.raw.mint, q.raw.maxt
	var step time.Duration
	fn := ""
	if hints != nil {
		if hints.Start != 0 || hints.End != 0 {
			mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
		}
		step = time.Duration(hints.Step) * time.Millisecond
		fn = hints.Func
	}
	if mint > maxt {
		return promstorage.EmptySeriesSet()
	}
	if err := ctx.Err(); err != nil {
		return promstorage.ErrSeriesSet(err)
	}
	user, explicit, ok := splitRollupMatchers(ms)
	if !ok {
		return promstorage.EmptySeriesSet()
	}
	maxTier := MaxSourceResolution(ctx)
	prefer := TierForStep(step, maxTier)
	for _, m := range ms {
		if t, ok := tierMatcher(m); ok {
			prefer = min(max(prefer, t), maxTier)
		}
	}
	pieces := db.plan(mint, maxt, prefer, maxTier)
	rec := recorderFrom(ctx)
	labelsOnly := fn == "series"
	var (
		out   []*series
		byKey = make(map[string]*series)
		buf   []byte
	)
	for _, p := range pieces {
		var set []*series
		var err error
		switch {
		case labelsOnly:
			set, err = db.searchTier(ctx, p.tier, user, p.mint, p.maxt, hints.Limit)
		case p.tier == TierRaw:
			set, err = db.readRawAt(ctx, user, explicit, p.mint, p.maxt, sw)
		default:
			set, err = db.readRollupAt(ctx, p.tier, readAggFor(fn, explicit), user, p.mint, p.maxt, sw)
		}
		if err != nil {
			return promstorage.ErrSeriesSet(err)
		}
		if len(set) > 0 {
			rec.note(p.tier)
		}
		for _, s := range set {
			buf = s.lset.Bytes(buf)
			prev := byKey[string(buf)]
			if prev == nil {
				byKey[string(buf)] = s
				out = append(out, s)
				continue
			}
			// Pieces come in time order and do not overlap.
			prev.ts = append(prev.ts, s.ts...)
			prev.vs = append(prev.vs, s.vs...)
		}
	}
	slices.SortFunc(out, func(a, b *series) int { return labels.Compare(a.lset, b.lset) })
	if hints != nil && hints.Limit > 0 && len(out) > hints.Limit {
		out = out[:hints.Limit]
	}
	return &seriesSet{series: out, i: -1}
}

// tierMatcher reads a matcher __rollup__="1m" or "5m": AdaptForTiers
// (markTier) asks a Select to prefer that tier when it reads whole windows
// of it (exactTier).
func tierMatcher(m *labels.Matcher) (Tier, bool) {
	if m.Name != RollupLabel || m.Type != labels.MatchEqual {
		return 0, false
	}
	for _, t := range []Tier{Tier1m, Tier5m} {
		if m.Value == t.String() {
			return t, true
		}
	}
	return 0, false
}

// splitRollupMatchers takes matchers on RollupLabel out of ms. An equality
// matcher naming an aggregate (`__rollup__="max"`) selects that aggregate;
// any other matcher on it selects nothing unless it matches the empty
// value (raw series have no such label). ok is false when nothing can match.
func splitRollupMatchers(ms []*labels.Matcher) (user []*labels.Matcher, explicit readAgg, ok bool) {
	explicit = readDefault
	for _, m := range ms {
		if m.Name != RollupLabel {
			user = append(user, m)
			continue
		}
		if m.Type == labels.MatchEqual {
			if a, found := parseReadAgg(m.Value); found {
				explicit = a
				continue
			}
			if _, found := tierMatcher(m); found {
				continue
			}
		}
		if !m.Matches("") {
			return nil, 0, false
		}
	}
	return user, explicit, true
}

// LabelNames merges the label names of the raw and rollup tiers, without
// RollupLabel.
func (q *tieredQuerier) LabelNames(ctx context.Context, hints *promstorage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	user, _, ok := splitRollupMatchers(ms)
	if !ok {
		return nil, nil, nil
	}
	return q.mergeLabels(ctx, hints, func(tq *querier) ([]string, annotations.Annotations, error) {
		return tq.LabelNames(ctx, hints, user...)
	})
}

// LabelValues merges the values of name in the raw and rollup tiers.
func (q *tieredQuerier) LabelValues(ctx context.Context, name string, hints *promstorage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	if name == RollupLabel {
		return nil, nil, nil
	}
	user, _, ok := splitRollupMatchers(ms)
	if !ok {
		return nil, nil, nil
	}
	return q.mergeLabels(ctx, hints, func(tq *querier) ([]string, annotations.Annotations, error) {
		return tq.LabelValues(ctx, name, hints, user...)
	})
}

func (q *tieredQuerier) mergeLabels(ctx context.Context, hints *promstorage.LabelHints, f func(*querier) ([]string, annotations.Annotations, error)) ([]string, annotations.Annotations, error) {
	db := q.raw.db
	maxTier := MaxSourceResolution(ctx)
	var all []string
	for _, t := range Tiers {
		if t > maxTier {
			break
		}
		tq := *q.raw
		tq.tier = t
		vals, _, err := f(&tq)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, vals...)
		if t == TierRaw && db.tiers[Tier1m].rolledUpTo.Load() == 0 {
			break // nothing rolled up yet
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if i := slices.Index(all, RollupLabel); i >= 0 {
		all = slices.Delete(all, i, i+1)
	}
	all, _ = hints.ApplyLimit(all)
	return all, nil, nil
}
