package storage

import (
	"context"
	"errors"
	"slices"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
)

// limitedScanSeries bounds the series the index scans for a search that
// returns at most a limit (series, label names or values with `limit`):
// the scan holds only series IDs (a few bytes each), the answer at most
// the limit, so the search may look at more series than
// MaxSeriesPerQuery, which bounds what a query loads.
const limitedScanSeries = 1 << 30

// searchLimited returns the raw metric names of at most limit series
// matching ms in tier, and all of them when there are at most limit.
//
// VictoriaMetrics' SearchMetricNames fails, rather than stops, when more
// than its maxMetrics series match, and it resolves the name of every
// series it found; so a search with a limit asks it for at most the
// limit, and when more match, splits the matching series by the values of
// one of their labels (the metric name first) and takes the parts one
// after another until it has the limit. Each part that is still too large
// is split again by another label; a part whose every label is fixed is
// one series, so the splitting ends. Memory is the limit's names and the
// index's ID sets, and the values of the label split on where the
// matchers are more than one metric name (VictoriaMetrics cannot stop its
// scan early there); the index is searched about once per part taken.
func (db *DB) searchLimited(ctx context.Context, tier Tier, ms []*labels.Matcher, mint, maxt int64, limit int) ([]string, error) {
	tfs, err := toTagFilters(ms)
	if err != nil {
		return nil, err
	}
	vm := db.tiers[tier].vm
	tr := timeRange(mint, maxt)
	deadline := vmDeadline(ctx)
	names, err := vm.SearchMetricNames(nil, tfs, tr, limit, deadline)
	if err == nil || !errors.Is(tooManySeries(err, limit), ErrQueryTooLarge) {
		if err != nil {
			return nil, searchError("search series", err)
		}
		return names[:min(len(names), limit)], nil
	}
	// More than limit match: split by a label the matchers leave open.
	pinned := map[string]bool{}
	for _, m := range ms {
		if m.Type == labels.MatchEqual {
			pinned[m.Name] = true
		}
	}
	lns, err := vm.SearchLabelNames(nil, tfs, tr, maxLabelResults, limitedScanSeries, deadline)
	if err != nil {
		return nil, searchError("search label names", err)
	}
	slices.Sort(lns) // __name__ sorts first
	split := ""
	for _, n := range lns {
		if !pinned[n] && n != RollupLabel {
			split = n
			break
		}
	}
	if split == "" {
		return nil, errTooManySeries(limit) // every label fixed: cannot be
	}
	// VictoriaMetrics scans the values up to its maxMetrics and needs the
	// IDs of the matching series only when ms is more than one metric
	// name; asked for the limit, it stops there or fails, and then it
	// scans every value of the label among the matching series.
	values, err := vm.SearchLabelValues(nil, split, tfs, tr, limit, limit, deadline)
	if err != nil && errors.Is(tooManySeries(err, limit), ErrQueryTooLarge) {
		values, err = vm.SearchLabelValues(nil, split, tfs, tr, limit, limitedScanSeries, deadline)
	}
	if err != nil {
		return nil, searchError("search label values", err)
	}
	slices.Sort(values)
	// Each value has at least one series, so limit values fill the limit;
	// fewer are all the values, and the series without the label remain.
	if len(values) < limit {
		values = append(values, "")
	}
	var out []string
	for _, v := range values {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A value found is one of series that match ms, so it meets
		// every matcher of ms on split: the part needs only split=v (one
		// metric name takes VictoriaMetrics' fast path). The part
		// without the label ("") keeps them.
		part := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, split, v)}
		for _, m := range ms {
			if m.Name != split || v == "" {
				part = append(part, m)
			}
		}
		got, err := db.searchLimited(ctx, tier, part, mint, maxt, limit-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		if len(out) >= limit {
			return out[:limit], nil
		}
	}
	return out, nil
}

// searchSeriesLimited is searchSeries with a limit (see searchLimited).
func (db *DB) searchSeriesLimited(ctx context.Context, tier Tier, ms []*labels.Matcher, mint, maxt int64, limit int) ([]*series, error) {
	if err := db.readLock(); err != nil {
		return nil, err
	}
	defer db.readUnlock()
	if tier != TierRaw {
		// One aggregate of each rollup series: counters have "counter",
		// gauges "count" among theirs.
		ms = append(slices.Clip(ms), labels.MustNewMatcher(labels.MatchRegexp, RollupLabel, "counter|count"))
	}
	names, err := db.searchLimited(ctx, tier, ms, mint, maxt, limit)
	if err != nil {
		return nil, err
	}
	var mn vmstorage.MetricName
	var b labels.ScratchBuilder
	set := make([]*series, 0, len(names))
	for _, name := range names {
		if err := mn.UnmarshalString(name); err != nil {
			return nil, searchError("search series", errors.Join(errors.New("corrupt metric name"), err))
		}
		set = append(set, &series{lset: metricNameToLabels(&b, &mn)})
	}
	return set, ctx.Err()
}

// labelScanSeries is the maxMetrics of a label name or value search: the
// series cap, or limitedScanSeries when the search stops at a limit.
func labelScanSeries(h *promstorage.LabelHints, seriesCap int) int {
	if h.AllowsEarlyStop() {
		return limitedScanSeries
	}
	return seriesCap
}
