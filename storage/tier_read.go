package storage

import (
	"context"
	"errors"
	"slices"
	"strings"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/aiserve/appliance/internal/stepwin"
)

// readAgg is what a query reads from a rollup tier.
type readAgg uint8

const (
	readDefault readAgg = iota // counters: the counter; gauges: the average
	readAvg                    // sum/count per window
	readMax
	readMin
	readSum
	readCount // samples per window; raw: 1 per sample
)

var readAggNames = map[string]readAgg{"avg": readAvg, "max": readMax, "min": readMin, "sum": readSum, "count": readCount}

func parseReadAgg(s string) (readAgg, bool) {
	a, ok := readAggNames[s]
	return a, ok
}

// readAggFor picks the aggregate from the function PromQL applies to the
// selector (SelectHints.Func), as Thanos does. Counter-typed series always
// read the counter rollup, whatever the function.
func readAggFor(fn string, explicit readAgg) readAgg {
	if explicit != readDefault {
		return explicit
	}
	switch fn {
	case "max_over_time", "max":
		return readMax
	case "min_over_time", "min":
		return readMin
	case "avg_over_time":
		return readAvg
	case "sum_over_time":
		return readSum
	}
	// count_over_time would count rollup points, not samples: the query
	// engine rewrites it to sum_over_time(x{__rollup__="count"}[r]).
	return readDefault
}

// rollupsFor lists the stored aggregates read for a.
func rollupsFor(a readAgg) []rollupAgg {
	switch a {
	case readMax:
		return []rollupAgg{aggCounter, aggMax}
	case readMin:
		return []rollupAgg{aggCounter, aggNegMin}
	case readSum:
		return []rollupAgg{aggCounter, aggSum}
	case readCount:
		// Counters keep no count: count_over_time of a counter finds
		// nothing in the rollup tiers.
		return []rollupAgg{aggCount}
	}
	return []rollupAgg{aggCounter, aggSum, aggCount}
}

// stepWindows are the windows a range query reads a selector in (see
// query.StepSelecter); nil keeps every sample.
type stepWindows = stepwin.Windows

// filterSteps keeps the samples in the windows w, in place; ts is sorted.
func filterSteps(w *stepWindows, ts []int64, vs []float64) ([]int64, []float64) {
	if w == nil {
		return ts, vs
	}
	j := 0
	var c stepCursor
	for i, t := range ts {
		if c.keep(w, t) {
			ts[j], vs[j] = t, vs[i]
			j++
		}
	}
	return ts[:j], vs[:j]
}

// stepCursor is Keep for ascending times: it divides only when t passes
// the step it found last, not at every sample.
type stepCursor struct {
	at  int64 // the first step at or after the last t
	set bool
}

func (c *stepCursor) keep(w *stepWindows, t int64) bool {
	if t <= w.First {
		return t > w.First-w.Window
	}
	if !c.set || t > c.at {
		c.at, c.set = w.First+(t-w.First+w.Step-1)/w.Step*w.Step, true
	}
	return c.at <= w.Last && c.at-t < w.Window
}

// nextWindow returns, for a t that keep just refused, the start lo of the
// next window (lo, lo+w.Window] after t, and false when there is none.
func (c *stepCursor) nextWindow(w *stepWindows, t int64) (lo int64, more bool) {
	if t <= w.First {
		return w.First - w.Window, true
	}
	return c.at - w.Window, c.at <= w.Last
}

// boundaryPointsAt is withBoundaryPoints keeping only the points in sw's
// windows, without making the others: of a 90-day counter at a 4h20m step
// that is 3 of 52 windows.
func boundaryPointsAt(s *series, res int64, sw *stepWindows) *series {
	if sw == nil {
		return withBoundaryPoints(s, res)
	}
	if len(s.ts) < 2 {
		s.ts, s.vs = filterSteps(sw, s.ts, s.vs)
		return s
	}
	var ts []int64
	var vs []float64
	var c stepCursor
	end := windowEnd(s.ts[0], res)
	for i := 0; i < len(s.ts); i++ {
		t := s.ts[i]
		if t > end {
			if end += res; t > end {
				end = windowEnd(t, res)
			}
		}
		if c.keep(sw, t) {
			ts, vs = append(ts, t), append(vs, s.vs[i])
		} else if lo, more := c.nextWindow(sw, t); !more {
			break // past the last step: no row, no boundary point is kept
		} else if j := i + 1 + skipTo(s.ts[i+1:], lo); j-1 > i {
			// No row up to lo is in the next window (lo, lo+W], and only
			// the last of them can have a boundary point in it: every
			// other's is before the row after it. Of a 90-day counter at
			// a 4h20m step most rows are skipped so, unread.
			i = j - 1
			t = s.ts[i]
			end = windowEnd(t, res)
		}
		if i+1 < len(s.ts) && s.ts[i+1] > end+1 && c.keep(sw, end+1) {
			ts, vs = append(ts, end+1), append(vs, s.vs[i])
		}
	}
	s.ts, s.vs = ts, vs
	return s
}

// windowPointsAt is dedupWindows, trimBefore(mint) and filterSteps(sw) of a
// gauge aggregate's rows in one pass, in place: each window's newest
// version from mint on, in sw's windows. Between sw's windows it skips
// the rows to the next one unread: of a 90-day max_over_time[1h] at a
// 4h20m step, 12 of every 52 windows are read.
func windowPointsAt(s *series, res, mint int64, sw *stepWindows) *series {
	ts, vs := s.ts, s.vs
	i, _ := slices.BinarySearch(ts, mint)
	j := 0
	var c stepCursor
	var end int64 // the end of ts[i]'s window
	if i < len(ts) {
		end = windowEnd(ts[i], res)
	}
	for i < len(ts) {
		// Most often ts[i]'s window is the one after the window before:
		// its end is found without a division.
		if ts[i] > end {
			if end += res; ts[i] > end {
				end = windowEnd(ts[i], res)
			}
		}
		// The newest version of ts[i]'s window: its last row (a window
		// rolled up again has a later row; versions are few).
		k := i
		for k+1 < len(ts) && ts[k+1] <= end {
			k++
		}
		t := ts[k]
		if sw == nil || c.keep(sw, t) {
			ts[j], vs[j] = t, vs[k]
			j++
			i = k + 1
			continue
		}
		lo, more := c.nextWindow(sw, t)
		if !more {
			break
		}
		// The rows up to lo are outside the next window (lo, lo+W]; the
		// first row after lo finds its window's newest version itself.
		i = k + 1 + skipTo(ts[k+1:], lo)
	}
	s.ts, s.vs = ts[:j], vs[:j]
	return s
}

// skipTo returns the number of leading times in ts (sorted) at or before t.
func skipTo(ts []int64, t int64) int {
	n, _ := slices.BinarySearch(ts, t+1)
	return n
}

// readRaw reads the raw tier; with readCount each sample reads as 1.
func (db *DB) readRaw(ctx context.Context, ms []*labels.Matcher, a readAgg, mint, maxt int64) ([]*series, error) {
	return db.readRawAt(ctx, ms, a, mint, maxt, nil)
}

// readRawAt is readRaw of the samples in sw's windows only.
func (db *DB) readRawAt(ctx context.Context, ms []*labels.Matcher, a readAgg, mint, maxt int64, sw *stepWindows) ([]*series, error) {
	// The head first: what it no longer shows was flushed before this
	// read and is found in VictoriaMetrics (head.go).
	fromHead := db.head.read(ms, mint, maxt, false)
	for _, s := range fromHead {
		s.ts, s.vs = filterSteps(sw, s.ts, s.vs)
	}
	// With the flush label (readFilters): a series the head's last flush
	// wrote to VictoriaMetrics for the first time, whose samples the head
	// no longer returns, is found even when VictoriaMetrics' tag-filters
	// cache still holds these filters' answer from before the flush. The
	// label is taken after the head was read: a flush counts itself
	// (debugFlush) before the head stops returning what it wrote, so a
	// read that missed those samples in the head sees the new count.
	tfs, err := db.readFilters(TierRaw, ms)
	if err != nil {
		return nil, err
	}
	set, err := db.readSeriesAt(ctx, TierRaw, tfs, mint, maxt, sw)
	if err != nil {
		return nil, err
	}
	set = mergeHead(set, fromHead, false)
	if a != readCount {
		return set, nil
	}
	out := set[:0]
	for _, s := range set {
		s.ts, s.vs = dropStale(s.ts, s.vs)
		for i := range s.vs {
			s.vs[i] = 1
		}
		if len(s.ts) > 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

// readRollup reads aggregate a of the series matching ms from a rollup
// tier and returns them under their own labels (without RollupLabel).
func (db *DB) readRollup(ctx context.Context, tier Tier, a readAgg, ms []*labels.Matcher, mint, maxt int64) ([]*series, error) {
	return db.readRollupAt(ctx, tier, a, ms, mint, maxt, nil)
}

// readRollupAt is readRollup of the points in sw's windows only. Those
// are chosen from what the tier's rows read as (a window's newest
// version, a counter's boundary points), not from the rows: the rows
// outside the windows decide which points are inside them.
func (db *DB) readRollupAt(ctx context.Context, tier Tier, a readAgg, ms []*labels.Matcher, mint, maxt int64, sw *stepWindows) ([]*series, error) {
	return db.readRollupWith(ctx, tier, a, ms, mint, maxt, sw, true)
}

// readRollupWith is readRollupAt making counters' boundary points as
// their rows are decoded (reduce) or after (TestRollupReadReduced).
func (db *DB) readRollupWith(ctx context.Context, tier Tier, a readAgg, ms []*labels.Matcher, mint, maxt int64, sw *stepWindows, reduceRows bool) ([]*series, error) {
	aggs := rollupsFor(a)
	names := make([]string, len(aggs))
	for i, g := range aggs {
		names[i] = g.String()
	}
	m, err := labels.NewMatcher(labels.MatchRegexp, RollupLabel, strings.Join(names, "|"))
	if err != nil {
		return nil, err
	}
	tfs, err := toTagFilters(append(slices.Clip(ms), m))
	if err != nil {
		return nil, err
	}
	// One window more at the start: a counter's first point in range is
	// the boundary point repeated from the window before it.
	res := tier.Resolution().Milliseconds()
	// A counter's boundary points are made as its rows are decoded, and
	// a gauge's aggregate is reduced to the newest version of each window
	// in range and in sw: only what is kept is copied (the rows of a
	// 30-day p95 were 110 MB; of a 90-day max_over_time at a 4h20m step
	// 1 in 4 is kept).
	reduce := func(rows *series) *series {
		var mn vmstorage.MetricName
		if mn.UnmarshalString(rows.name) != nil {
			return nil
		}
		if string(mn.GetTagValue(RollupLabel)) == aggCounter.String() {
			return boundaryPointsAt(rows, res, sw)
		}
		return windowPointsAt(rows, res, mint, sw)
	}
	if !reduceRows {
		reduce = nil
	}
	set, err := db.readSeriesReduced(ctx, tier, tfs, mint-res, maxt, nil, reduce)
	if errors.Is(err, errSeriesSplit) {
		set, err = db.readSeries(ctx, tier, tfs, mint-res, maxt)
	}
	if err != nil {
		return nil, err
	}
	type group struct {
		base labels.Labels
		by   [numAggs]*series
	}
	groups := make(map[string]*group)
	var order []*group
	var buf []byte
	for _, s := range set {
		g, ok := parseAgg(s.lset.Get(RollupLabel))
		if !ok {
			continue
		}
		base := labels.NewBuilder(s.lset).Del(RollupLabel).Labels()
		buf = base.Bytes(buf)
		gr := groups[string(buf)]
		if gr == nil {
			gr = &group{base: base}
			groups[string(buf)] = gr
			order = append(order, gr)
		}
		gr.by[g] = s
	}
	// Each group's points on every core: making boundary points is a
	// pass over every row read (a fifth of a 90-day query's CPU).
	made := make([]*series, len(order))
	if err := parallel(ctx, len(order), func(i int) error {
		made[i] = rollupPoints(order[i].by, order[i].base, a, res, mint, sw)
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]*series, 0, len(order))
	for _, s := range made {
		if s != nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// rollupPoints makes the points of one series from its aggregates in a
// rollup tier (by), for read aggregate a, in [mint, ...) and sw; nil when
// there are none.
func rollupPoints(by [numAggs]*series, base labels.Labels, a readAgg, res, mint int64, sw *stepWindows) *series {
	// A series readRollupWith's reduce made (s.reduced) holds its
	// points already: only the others are made here.
	gauge := func(g *series) *series {
		if g == nil || g.reduced {
			return g
		}
		return windowPointsAt(g, res, mint, sw)
	}
	var s *series
	switch c := by[aggCounter]; {
	case c != nil:
		if !c.reduced {
			c = boundaryPointsAt(c, res, sw)
		}
		s = c
		s.trimBefore(mint)
	case a == readMax:
		s = gauge(by[aggMax])
	case a == readMin:
		if s = gauge(by[aggNegMin]); s != nil {
			for i := range s.vs {
				s.vs[i] = -s.vs[i]
			}
		}
	case a == readSum:
		s = gauge(by[aggSum])
	case a == readCount:
		s = gauge(by[aggCount])
	default:
		s = average(gauge(by[aggSum]), gauge(by[aggCount]), res)
	}
	if s == nil || len(s.ts) == 0 {
		return nil
	}
	s.lset = base
	return s
}

// trimBefore drops the points before mint.
func (s *series) trimBefore(mint int64) {
	i, _ := slices.BinarySearch(s.ts, mint)
	s.ts, s.vs = s.ts[i:], s.vs[i:]
}

// average joins sum and count per window into sum/count, at the sum's
// timestamp (both are written with the same one).
func average(sum, count *series, res int64) *series {
	if sum == nil || count == nil {
		return nil
	}
	out := &series{}
	j := 0
	for i, t := range sum.ts {
		w := window(t, res)
		for j < len(count.ts) && window(count.ts[j], res) < w {
			j++
		}
		if j == len(count.ts) {
			break
		}
		if window(count.ts[j], res) != w || count.vs[j] == 0 {
			continue
		}
		out.ts = append(out.ts, t)
		out.vs = append(out.vs, sum.vs[i]/count.vs[j])
	}
	return out
}

// searchTier returns the labels of the series matching ms in tier, without
// RollupLabel and without duplicates; with a limit above 0, of at most
// limit series (any of them: see searchLimited), however many match.
func (db *DB) searchTier(ctx context.Context, tier Tier, ms []*labels.Matcher, mint, maxt int64, limit int) ([]*series, error) {
	tfs, err := toTagFilters(ms)
	if err != nil {
		return nil, err
	}
	var fromHead []*series
	if tier == TierRaw {
		fromHead = db.head.read(ms, mint, maxt, true)
	}
	var set []*series
	if limit > 0 {
		set, err = db.searchSeriesLimited(ctx, tier, ms, mint, maxt, limit)
	} else {
		set, err = db.searchSeries(ctx, tier, tfs, mint, maxt)
	}
	if err != nil {
		return nil, err
	}
	if tier == TierRaw {
		return mergeHead(set, fromHead, true), nil
	}
	seen := make(map[string]bool, len(set)/4)
	out := set[:0]
	var buf []byte
	for _, s := range set {
		s.lset = labels.NewBuilder(s.lset).Del(RollupLabel).Labels()
		buf = s.lset.Bytes(buf)
		if seen[string(buf)] {
			continue
		}
		seen[string(buf)] = true
		out = append(out, s)
	}
	return out, nil
}
