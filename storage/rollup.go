package storage

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/decimal"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// RollupLabel is the reserved label that tells the aggregates of one
// series apart inside the 1m and 5m tiers. Queries never return it: the
// tiered querier strips it, and a user matcher on it selects an aggregate
// (see the package doc).
const RollupLabel = "__rollup__"

// rollupAgg is the value of RollupLabel.
type rollupAgg uint8

const (
	aggCounter rollupAgg = iota // counters: the last sample of each window, and each sample just before a reset
	aggMax                      // gauges: the largest sample of each window
	aggNegMin                   // gauges: minus the smallest sample (so that VM's "largest wins" dedup keeps the smallest)
	aggSum                      // gauges: the sum of the window's samples
	aggCount                    // gauges: how many samples the window had
	numAggs
)

var aggNames = [numAggs]string{"counter", "max", "negmin", "sum", "count"}

func (a rollupAgg) String() string { return aggNames[a] }

func parseAgg(s string) (rollupAgg, bool) {
	for i, n := range aggNames {
		if n == s {
			return rollupAgg(i), true
		}
	}
	return 0, false
}

// isCounter says whether a raw series is a counter for rollup purposes:
// counters and the _bucket/_sum/_count series of histograms and summaries
// keep their last value per window. The type comes from the stored
// metadata of the family; without it a _total, _bucket, _count or _sum
// suffix means counter.
func (db *DB) isCounter(name string) bool {
	if typ, ok := db.metricType(name); ok {
		switch typ {
		case model.MetricTypeCounter:
			return true
		case model.MetricTypeGauge, model.MetricTypeGaugeHistogram, model.MetricTypeInfo, model.MetricTypeStateset:
			return false
		case model.MetricTypeSummary, model.MetricTypeHistogram:
			return false // the family's own name: summary quantiles
		}
	}
	for _, suf := range []string{"_bucket", "_sum", "_count", "_total"} {
		family, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		if typ, ok := db.metricType(family); ok {
			switch typ {
			case model.MetricTypeCounter, model.MetricTypeHistogram, model.MetricTypeSummary:
				return true
			case model.MetricTypeUnknown:
			default:
				return false // e.g. gaugehistogram
			}
		}
		return true
	}
	return false
}

// metricType returns the newest known type of a metric family.
func (db *DB) metricType(family string) (model.MetricType, bool) {
	s := db.meta
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.m[family]
	if !ok || len(e.variants) == 0 || e.variants[0].Type == "" || e.variants[0].Type == model.MetricTypeUnknown {
		return "", false
	}
	return e.variants[0].Type, true
}

// window returns the index w of the window (w*res, (w+1)*res] holding t.
// Windows are closed on the right like Prometheus' range selectors
// (t-r, t], so that a range query whose range and evaluation times are
// multiples of the resolution reads exactly the windows that hold the raw
// samples the same query reads on raw data.
func window(t, res int64) int64 {
	t--
	w := t / res
	if t < 0 && t%res != 0 {
		w--
	}
	return w
}

// rollupCounter emits, per window, the last sample and every sample that
// is followed by a reset inside the window. A reset between windows needs
// nothing more: the sample before it is the previous window's last. Every
// point is a raw sample at its own timestamp, so rate(), increase() and
// resets() over the tier see the same resets and the same last value as on
// raw data; the value at the start of a range is the previous window's
// last sample, which the reader repeats just after the window's end
// (withBoundaryPoints) so a range that starts on a window boundary finds
// it inside the range.
func rollupCounter(ts []int64, vs []float64, res int64, emit func(t int64, v float64)) {
	for i := range ts {
		if i == len(ts)-1 || window(ts[i+1], res) != window(ts[i], res) || vs[i+1] < vs[i] {
			emit(ts[i], vs[i])
		}
	}
}

// withBoundaryPoints returns a counter read from a rollup tier with each
// window's last point repeated 1ms after the end of its window, where a
// later window follows. The counter held that value from its last sample
// until the next one, so the repeated point is a true observation; it
// puts the value at a window boundary inside a range (t-r, t] that starts
// there, and rate() over window-aligned ranges measures the increase
// from boundary to boundary instead of extrapolating a window's worth of
// it.
func withBoundaryPoints(s *series, res int64) *series {
	if len(s.ts) < 2 {
		return s
	}
	ts := make([]int64, 0, 2*len(s.ts))
	vs := make([]float64, 0, 2*len(s.vs))
	// end is the end of the current point's window, kept up to date
	// without a division per point: rollup points are one window apart.
	end := windowEnd(s.ts[0], res)
	for i, t := range s.ts {
		if t > end {
			if end += res; t > end {
				end = windowEnd(t, res)
			}
		}
		ts, vs = append(ts, t), append(vs, s.vs[i])
		if i+1 < len(s.ts) && s.ts[i+1] > end+1 {
			ts, vs = append(ts, end+1), append(vs, s.vs[i])
		}
	}
	s.ts, s.vs = ts, vs
	return s
}

// windowEnd is the inclusive end of t's window: (w*res, (w+1)*res].
func windowEnd(t, res int64) int64 { return (window(t, res) + 1) * res }

// gaugeWindow is a gauge's aggregate over one window.
type gaugeWindow struct {
	last          int64
	min, max, sum float64
	count         float64
}

// rollupGauge emits min, max, sum and count per window at the timestamp of
// the window's last sample.
func rollupGauge(ts []int64, vs []float64, res int64, emit func(w gaugeWindow)) {
	var cur gaugeWindow
	for i := range ts {
		v := vs[i]
		if cur.count == 0 {
			cur = gaugeWindow{min: v, max: v}
		}
		cur.last = ts[i]
		cur.min, cur.max = min(cur.min, v), max(cur.max, v)
		cur.sum += v
		cur.count++
		if i == len(ts)-1 || window(ts[i+1], res) != window(ts[i], res) {
			emit(cur)
			cur = gaugeWindow{}
		}
	}
}

// rollupAggregate folds one aggregate series of a finer tier into windows
// of res: max and negmin keep the largest, sum and count add up. The input
// must hold one point per window of the finer tier (dedupWindows).
func rollupAggregate(agg rollupAgg, ts []int64, vs []float64, res int64, emit func(t int64, v float64)) {
	var acc float64
	for i := range ts {
		switch {
		case i == 0 || window(ts[i-1], res) != window(ts[i], res):
			acc = vs[i]
		case agg == aggMax || agg == aggNegMin:
			acc = max(acc, vs[i])
		default:
			acc += vs[i]
		}
		if i == len(ts)-1 || window(ts[i+1], res) != window(ts[i], res) {
			emit(ts[i], acc)
		}
	}
}

// dedupWindows keeps, per window of res, only the point with the latest
// timestamp. A window rolled up again after late data was written twice;
// the later rollup saw every sample of the first one, and its last sample
// is at or after the first one's (equal timestamps are resolved by the
// reader's "largest wins" rule, which is right for max, negmin, count and
// for sums of non-negative samples). It works in place.
func dedupWindows(ts []int64, vs []float64, res int64) ([]int64, []float64) {
	if len(ts) == 0 {
		return ts, vs
	}
	// end is the end of ts[i]'s window, kept up to date without a
	// division per point (they were a fifth of a 90-day gauge read): the
	// next point is in the same window when it is at or before end.
	j, end := 0, windowEnd(ts[0], res)
	for i := range ts {
		if i+1 < len(ts) {
			next := ts[i+1]
			if next <= end {
				continue
			}
			if end += res; next > end {
				end = windowEnd(next, res)
			}
		}
		ts[j], vs[j] = ts[i], vs[i]
		j++
	}
	return ts[:j], vs[:j]
}

// dropStale removes staleness markers, in place.
func dropStale(ts []int64, vs []float64) ([]int64, []float64) {
	j := 0
	for i := range ts {
		if decimal.IsStaleNaN(vs[i]) || math.IsNaN(vs[i]) {
			continue
		}
		ts[j], vs[j] = ts[i], vs[i]
		j++
	}
	return ts[:j], vs[:j]
}

// seenAgg is the value of RollupLabel for the series that keeps, per gauge
// series, the samples that reached a rollup tier without passing through
// raw (older than the raw retention), each at its own timestamp. Merging
// such samples into a window skips the timestamps kept there, so a
// sender's retry counts once, and rolling a window up again from raw adds
// them back, for a window that straddles the raw horizon. Readers never
// select it.
const seenAgg = "seen"

// versionReserve is how long before its window's end the first version of
// a gauge window is written at the latest: the room for later versions,
// each one millisecond after the one it replaces, so that a newer version
// always has a later timestamp (readers keep the latest one per window;
// see dedupWindows).
func versionReserve(res int64) int64 { return res / 60 }

// versionTime is the timestamp of a new version of a gauge window that
// ends at end and whose last sample is at last: that sample's time, at
// most versionReserve before the end, and later than prev, the current
// version's, when there is one (hasPrev). After versionReserve versions of
// one window the timestamp stays at the end and the readers' "largest
// wins" rule decides, which is right for max, negmin and count.
func versionTime(last, end, res, prev int64, hasPrev bool) int64 {
	t := min(last, end-versionReserve(res))
	if hasPrev && t <= prev {
		t = min(prev+1, end)
	}
	return t
}

// RollupStats describe one Rollup call.
type RollupStats struct {
	// Series is the number of source series read.
	Series int
	// Rows is the number of rollup rows written.
	Rows int
}

// held is what a rollup tier already holds for the windows being rolled
// up, by the labels of the tier's series (RollupLabel included, as
// labels.Labels.Bytes): gauge aggregates as their newest version per
// window (dedupWindows), counter and seen series as all their points.
type held map[string]*series

// loadHeld reads held rows of tier in [mint, maxt]. The caller holds the
// read lock.
func (db *DB) loadHeld(ctx context.Context, tier Tier, tfs []*vmstorage.TagFilters, mint, maxt int64) (held, error) {
	h := make(held)
	res := tier.Resolution().Milliseconds()
	var buf []byte
	_, err := db.scanSeries(ctx, tier, tfs, mint, maxt, db.opts.RollupPageSize, func(page []*series) error {
		for _, s := range page {
			a := s.lset.Get(RollupLabel)
			if g, ok := parseAgg(a); ok && g != aggCounter {
				s.ts, s.vs = dedupWindows(s.ts, s.vs, res)
			} else if !ok && a != seenAgg {
				continue
			}
			buf = s.lset.Bytes(buf)
			h[string(buf)] = s
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read what tier %s holds: %w", tier, err)
	}
	return h, nil
}

// versionIn returns the point of s in window w of res (one per window
// after dedupWindows).
func (s *series) versionIn(w, res int64) (t int64, v float64, ok bool) {
	if s == nil {
		return 0, 0, false
	}
	i := sort.Search(len(s.ts), func(i int) bool { return window(s.ts[i], res) >= w })
	if i < len(s.ts) && window(s.ts[i], res) == w {
		return s.ts[i], s.vs[i], true
	}
	return 0, 0, false
}

// at returns the value of s at t.
func (s *series) at(t int64) (float64, bool) {
	if s == nil {
		return 0, false
	}
	i, ok := slices.BinarySearch(s.ts, t)
	if !ok {
		return 0, false
	}
	return s.vs[i], true
}

// rollupTimeout bounds a rollup's search when its context has no deadline.
const rollupTimeout = 6 * time.Hour

// unlimitedSeries is the series limit of a rollup's search: none
// (VictoriaMetrics' own "no limit" value). Pages bound the memory.
const unlimitedSeries = 2e9

// scanSeries reads the series of tier that match tfs in [mint, maxt] and
// hands them to fn pageSize series at a time, each sorted and
// de-duplicated, with its labels. Unlike readSeries it has no series cap:
// VictoriaMetrics' search holds the IDs of the matching series (a few
// dozen bytes each) and this holds one page of samples, so any number of
// series is read in bounded memory; a page over MaxSamplesPerQuery samples
// is ErrQueryTooLarge. A series' blocks arrive together (VictoriaMetrics
// orders them by series ID), so no series is split across pages. The
// caller holds the read lock; fn may keep the series it gets.
func (db *DB) scanSeries(ctx context.Context, tier Tier, tfs []*vmstorage.TagFilters, mint, maxt int64, pageSize int, fn func([]*series) error) (n int, err error) {
	// Reading a block panics on a disk error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("read %s tier: %v", tier, r)
		}
	}()
	tr := timeRange(mint, maxt)
	var sr vmstorage.Search
	// A query's default timeout does not apply: a rollup's search stays
	// open while its pages are rolled up and written, which for a first
	// window of millions of series creates millions of rollup series.
	// ctx still cancels it between blocks.
	deadline := uint64(time.Now().Add(rollupTimeout).Unix())
	if _, ok := ctx.Deadline(); ok {
		deadline = vmDeadline(ctx)
	}
	sr.Init(nil, db.tiers[tier].vm, tfs, tr, unlimitedSeries, deadline)
	defer sr.MustClose()
	var (
		page    []*series
		byName  = make(map[string]*series)
		last    *series
		batch   decodeBatch
		samples atomic.Int64
		blocks  int
	)
	defer batch.release()
	decode := func() error {
		if err := batch.decode(ctx, tr, &samples); err != nil {
			return fmt.Errorf("read %s tier: %w", tier, err)
		}
		if samples.Load() > int64(db.opts.MaxSamplesPerQuery) {
			return errTooManySamples(db.opts.MaxSamplesPerQuery)
		}
		return nil
	}
	var mn vmstorage.MetricName
	var lb labels.ScratchBuilder
	emit := func() error {
		if err := decode(); err != nil {
			return err
		}
		_ = parallel(ctx, len(page), func(i int) error { page[i].sortAndDedup(); return nil })
		out := page[:0]
		for _, s := range page {
			if len(s.ts) == 0 {
				continue // only blocks outside the range
			}
			if err := mn.UnmarshalString(s.name); err != nil {
				return fmt.Errorf("read %s tier: corrupt metric name: %w", tier, err)
			}
			s.lset = metricNameToLabels(&lb, &mn)
			s.name = ""
			out = append(out, s)
		}
		n += len(out)
		if err := fn(out); err != nil {
			return err
		}
		page, last = nil, nil
		clear(byName)
		samples.Store(0)
		return ctx.Err()
	}
	for sr.NextMetricBlock() {
		if blocks++; blocks%256 == 0 {
			if err := ctx.Err(); err != nil {
				return n, err
			}
		}
		mbr := &sr.MetricBlockRef
		s := last
		if s == nil || s.name != string(mbr.MetricName) {
			if s = byName[string(mbr.MetricName)]; s == nil {
				if len(page) >= pageSize {
					if err := emit(); err != nil {
						return n, err
					}
				}
				s = &series{name: string(mbr.MetricName)}
				byName[s.name] = s
				page = append(page, s)
			}
			last = s
		}
		blk := getBlock()
		mbr.BlockRef.MustReadBlock(blk)
		batch.add(s, blk)
		if batch.blocks >= decodeBatchBlocks {
			if err := decode(); err != nil {
				return n, err
			}
		}
	}
	if err := sr.Error(); err != nil {
		return n, searchError("read series", err)
	}
	if len(page) > 0 {
		if err := emit(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// rollupBatch collects rows for one tier.
type rollupBatch struct {
	db   *DB
	tier Tier
	res  int64
	lo   int64 // oldest timestamp the tier keeps
	rows []vmstorage.MetricRow
	minT int64
	maxT int64
	// held is what the tier holds already; nil when the windows are new
	// to it.
	held held
	key  []byte
}

func (db *DB) newRollupBatch(tier Tier) *rollupBatch {
	return &rollupBatch{
		db: db, tier: tier, res: tier.Resolution().Milliseconds(),
		lo:   db.now().UnixMilli() - db.tiers[tier].retention.Milliseconds(),
		minT: math.MaxInt64, maxT: math.MinInt64,
	}
}

// target is one series of the tier: its VM name (each its own allocation,
// because rows keep a reference until AddRows returns) and what the tier
// holds of it.
type target struct {
	name []byte
	held *series
}

func (b *rollupBatch) target(lset labels.Labels) (target, error) {
	name, err := marshalRawName(nil, lset)
	if err != nil {
		return target{}, err
	}
	tg := target{name: name}
	if b.held != nil {
		b.key = lset.Bytes(b.key)
		tg.held = b.held[string(b.key)]
	}
	return tg, nil
}

// targetAgg is target for base plus RollupLabel=agg.
func (b *rollupBatch) targetAgg(base labels.Labels, agg string) (target, error) {
	if b.held == nil {
		// Nothing held to look up by the label set: the name alone.
		name, err := marshalRawNameWith(nil, base, RollupLabel, agg)
		return target{name: name}, err
	}
	lb := labels.NewBuilder(base)
	lb.Set(RollupLabel, agg)
	return b.target(lb.Labels())
}

func (b *rollupBatch) add(name []byte, t int64, v float64) {
	if t < b.lo {
		return // VictoriaMetrics would drop it silently
	}
	b.rows = append(b.rows, vmstorage.MetricRow{MetricNameRaw: name, Timestamp: t, Value: v})
	b.minT, b.maxT = min(b.minT, t), max(b.maxT, t)
}

// addPoint writes a counter point unless the tier holds it already.
func (b *rollupBatch) addPoint(tg target, t int64, v float64) {
	if hv, ok := tg.held.at(t); ok && hv == v {
		return
	}
	b.add(tg.name, t, v)
}

// addVersion writes value v of aggregate agg for the window ending at end
// whose last sample is at last, as a new version when it differs from the
// one the tier holds. max, negmin and count only grow as samples are
// added, so a smaller value than the held one means the source lost
// samples the tier still counts (raw retention passed part of the window)
// and the held version stays.
func (b *rollupBatch) addVersion(tg target, agg rollupAgg, last, end int64, v float64) {
	pt, pv, ok := tg.held.versionIn(window(end, b.res), b.res)
	if ok {
		switch agg {
		case aggMax, aggNegMin, aggCount:
			if v <= pv {
				return
			}
		default:
			if v == pv {
				return
			}
		}
	}
	b.add(tg.name, versionTime(last, end, b.res, pt, ok), v)
}

var gaugeAggs = [...]rollupAgg{aggMax, aggNegMin, aggSum, aggCount}

// gaugeTargets returns the targets of base's gauge aggregates.
func (b *rollupBatch) gaugeTargets(base labels.Labels) (tg [numAggs]target, err error) {
	for _, a := range gaugeAggs {
		if tg[a], err = b.targetAgg(base, a.String()); err != nil {
			return tg, err
		}
	}
	return tg, nil
}

// addRaw rolls one raw series (sorted, one sample per timestamp) up into
// the batch's windows, as new versions where the tier holds others.
func (b *rollupBatch) addRaw(base labels.Labels, counter bool, ts []int64, vs []float64) error {
	ts, vs = dropStale(ts, vs)
	if len(ts) == 0 {
		return nil
	}
	if counter {
		tg, err := b.targetAgg(base, aggCounter.String())
		if err != nil {
			return err
		}
		rollupCounter(ts, vs, b.res, func(t int64, v float64) { b.addPoint(tg, t, v) })
		return nil
	}
	tg, err := b.gaugeTargets(base)
	if err != nil {
		return err
	}
	if b.held != nil {
		// Samples of these windows that came without passing raw.
		seen, err := b.targetAgg(base, seenAgg)
		if err != nil {
			return err
		}
		if h := seen.held; h != nil {
			lo, hi := window(ts[0], b.res)*b.res, windowEnd(ts[len(ts)-1], b.res)
			i, _ := slices.BinarySearch(h.ts, lo+1)
			j, _ := slices.BinarySearch(h.ts, hi+1)
			if i < j {
				u := &series{ts: append(slices.Clone(ts), h.ts[i:j]...), vs: append(slices.Clone(vs), h.vs[i:j]...)}
				u.sortAndDedup()
				ts, vs = u.ts, u.vs
			}
		}
	}
	rollupGauge(ts, vs, b.res, func(w gaugeWindow) {
		end := windowEnd(w.last, b.res)
		if _, hc, ok := tg[aggCount].held.versionIn(window(end, b.res), b.res); ok && w.count < hc {
			return // the tier counts samples raw no longer has
		}
		vals := [numAggs]float64{aggMax: w.max, aggNegMin: -w.min, aggSum: w.sum, aggCount: w.count}
		for _, a := range gaugeAggs {
			b.addVersion(tg[a], a, w.last, end, vals[a])
		}
	})
	return nil
}

// addOld merges samples of one raw series that are older than the raw
// retention (sorted, one per timestamp) into what the tier holds for
// their windows. Gauge samples whose timestamps the tier has seen are
// skipped (the seen series); the others are added to the held aggregates
// and recorded as seen. Counter rows are samples at their own timestamps,
// so counters are rolled up again over the held points and the new
// samples together, and only the points the tier lacks are written.
func (b *rollupBatch) addOld(base labels.Labels, counter bool, ts []int64, vs []float64) error {
	ts, vs = dropStale(ts, vs)
	if len(ts) == 0 {
		return nil
	}
	if counter {
		tg, err := b.targetAgg(base, aggCounter.String())
		if err != nil {
			return err
		}
		uts, uvs := ts, vs
		if h := tg.held; h != nil && len(h.ts) > 0 {
			u := &series{ts: append(slices.Clone(h.ts), ts...), vs: append(slices.Clone(h.vs), vs...)}
			u.sortAndDedup()
			uts, uvs = u.ts, u.vs
		}
		lo, hi := window(ts[0], b.res), window(ts[len(ts)-1], b.res)
		rollupCounter(uts, uvs, b.res, func(t int64, v float64) {
			if w := window(t, b.res); w >= lo && w <= hi {
				b.addPoint(tg, t, v)
			}
		})
		return nil
	}
	tg, err := b.gaugeTargets(base)
	if err != nil {
		return err
	}
	seen, err := b.targetAgg(base, seenAgg)
	if err != nil {
		return err
	}
	j := 0
	for i, t := range ts {
		if _, ok := seen.held.at(t); ok {
			continue // counted already: a retry
		}
		ts[j], vs[j] = t, vs[i]
		j++
	}
	ts, vs = ts[:j], vs[:j]
	for i, t := range ts {
		b.add(seen.name, t, vs[i])
	}
	rollupGauge(ts, vs, b.res, func(w gaugeWindow) {
		end := windowEnd(w.last, b.res)
		win := window(end, b.res)
		vals := [numAggs]float64{aggMax: w.max, aggNegMin: -w.min, aggSum: w.sum, aggCount: w.count}
		for _, a := range gaugeAggs {
			pt, pv, ok := tg[a].held.versionIn(win, b.res)
			v := vals[a]
			if ok {
				switch a {
				case aggMax, aggNegMin:
					if v <= pv {
						continue
					}
				default:
					v += pv
				}
			}
			b.add(tg[a].name, versionTime(w.last, end, b.res, pt, ok), v)
		}
	})
	return nil
}

// addTier rolls one aggregate series of the finer tier (labels include
// RollupLabel) up into the batch's windows.
func (b *rollupBatch) addTier(lset labels.Labels, srcRes int64, ts []int64, vs []float64) error {
	agg, ok := parseAgg(lset.Get(RollupLabel))
	if !ok {
		return nil // not an aggregate (seen), or not written by this package
	}
	tg, err := b.target(lset)
	if err != nil {
		return err
	}
	if agg == aggCounter {
		rollupCounter(ts, vs, b.res, func(t int64, v float64) { b.addPoint(tg, t, v) })
		return nil
	}
	ts, vs = dedupWindows(ts, vs, srcRes)
	rollupAggregate(agg, ts, vs, b.res, func(t int64, v float64) {
		b.addVersion(tg, agg, t, windowEnd(t, b.res), v)
	})
	return nil
}

// write hands the batch to the tier's VictoriaMetrics and empties it.
func (b *rollupBatch) write() error {
	if len(b.rows) == 0 {
		return nil
	}
	db := b.db
	ts := db.tiers[b.tier]
	if err := func() (err error) {
		db.addRowsSem <- struct{}{}
		defer func() {
			<-db.addRowsSem
			if r := recover(); r != nil {
				err = fmt.Errorf("write rollups to tier %s: %v", b.tier, r)
			}
		}()
		vmAddRows(ts.vm, b.rows, precisionBits)
		return nil
	}(); err != nil {
		return err
	}
	ts.noteTimeRange(b.minT, b.maxT)
	ts.touchMonths(b.minT, b.maxT)
	b.rows = b.rows[:0]
	b.minT, b.maxT = math.MaxInt64, math.MinInt64
	return nil
}

// allSeries matches every series.
var allSeries = []*labels.Matcher{labels.MustNewMatcher(labels.MatchNotEqual, labels.MetricName, "")}

// flushLabel is a label no series has: `flushLabel!="<n>"` matches every
// series, and its value, the number of flushes of the tier read
// (tierStore.flushes), makes the filters of every rollup read, and of
// every raw read, after a flush new to VictoriaMetrics' tag-filters
// cache. Raw reads need it since the head writes raw in batches
// (HeadBatchWrites): a new series reaches VictoriaMetrics at the head's
// flush, when the head stops returning its samples, so a cached answer
// from before the flush lacked them (e2e TestDashboardInBrowser saw a
// panel with no data a minute after start).
//
// VictoriaMetrics caches the series IDs each filter set matched, in each
// index (one per monthly partition), and resets that cache when new index
// entries become searchable: at once when DebugFlush finds them still
// pending, but up to 10 s later (mergeset's flushCallbackInterval) when its
// background flusher, every second, got them first. The rollup tiers use
// the global index only, so `__name__!=""` has one cache key for every
// time range of a partition. A rollup that read, in those seconds, a
// partition whose index had just got new series was handed the set cached
// before them, found no rows of the new series and wrote nothing for them,
// and its windows counted as done: bench/tiers lost the last 23 hours of
// its 5m tier so. The 1m tier's December partition held only live series
// (cached by every 5m rollup since the start) until the pass that rolled
// the backfill's last day up into it; that pass's 5m rollups read the
// cached set, and only the one that reached back into November found the
// backfilled series (through November's index). See
// TestRollupSeesSeriesNewToAPartition.
// The price is one more entry in that cache per rollup read after a
// flush, evicted as the cache fills like any other.
const flushLabel = "__rollup_flush__"

// debugFlush makes everything written to the tier searchable, keeping no
// row buffer (vmDebugFlush), and counts the flush for readFilters.
func (ts *tierStore) debugFlush() {
	vmDebugFlush(ts.vm)
	ts.flushes.Add(1)
}

// readFilters returns the filters for a rollup's read of tier: ms, and
// flushLabel after the tier's last flush, so that the read sees every
// series whose rows that flush made searchable.
func (db *DB) readFilters(tier Tier, ms []*labels.Matcher) ([]*vmstorage.TagFilters, error) {
	gen := labels.MustNewMatcher(labels.MatchNotEqual, flushLabel, strconv.FormatUint(db.tiers[tier].flushes.Load(), 10))
	return toTagFilters(append(slices.Clip(ms), gen))
}

// Rollup writes the rollups of tier (1m or 5m) for the windows in
// (start, end] from the next finer tier (raw for 1m, 1m for 5m). start and
// end must be multiples of the tier's resolution.
//
// The source is read Options.RollupPageSize series at a time, so any
// number of series is rolled up in bounded memory. Where the tier may hold
// rows for these windows already (below its watermark, or written since
// Open), Rollup reads them first and writes only what changed: a counter
// point the tier lacks, a gauge aggregate whose value differs, as a new
// version with a later timestamp (see versionTime). Rolling the same
// windows up again therefore writes nothing, and a window that got late
// samples gets one new version. Where the tier holds more samples for a
// window than the source has (raw retention passed part of it), the held
// version stays.
func (db *DB) Rollup(ctx context.Context, tier Tier, start, end time.Time) (RollupStats, error) {
	var st RollupStats
	if tier != Tier1m && tier != Tier5m {
		return st, fmt.Errorf("rollup into tier %s: %w", tier, ErrUnknownTier)
	}
	res := tier.Resolution().Milliseconds()
	s, e := start.UnixMilli(), end.UnixMilli()
	if s%res != 0 || e%res != 0 {
		return st, fmt.Errorf("rollup into tier %s: range (%s, %s] is not aligned to %s", tier, start, end, tier.Resolution())
	}
	if s >= e {
		return st, nil
	}
	src := tier - 1
	if err := db.readLock(); err != nil {
		return st, err
	}
	defer db.readUnlock()
	b := db.newRollupBatch(tier)
	if ts := db.tiers[tier]; s < ts.rolledUpTo.Load() || ts.maxT.Load() > s {
		tfs, err := db.readFilters(tier, allSeries)
		if err != nil {
			return st, err
		}
		if b.held, err = db.loadHeld(ctx, tier, tfs, s+1, e); err != nil {
			return st, fmt.Errorf("rollup into tier %s: %w", tier, err)
		}
	}
	tfs, err := db.readFilters(src, allSeries)
	if err != nil {
		return st, err
	}
	kinds := make(map[string]bool)
	n, err := db.scanSeries(ctx, src, tfs, s+1, e, db.opts.RollupPageSize, func(page []*series) error {
		for _, sr := range page {
			var err error
			if src == TierRaw {
				name := sr.lset.Get(labels.MetricName)
				counter, ok := kinds[name]
				if !ok {
					counter = db.isCounter(name)
					kinds[name] = counter
				}
				err = b.addRaw(sr.lset, counter, sr.ts, sr.vs)
			} else {
				err = b.addTier(sr.lset, src.Resolution().Milliseconds(), sr.ts, sr.vs)
			}
			if err != nil {
				return fmt.Errorf("series %s: %w", sr.lset, err)
			}
		}
		st.Rows += len(b.rows)
		return b.write()
	})
	st.Series = n
	if err != nil {
		return st, fmt.Errorf("rollup into tier %s: %w", tier, err)
	}
	return st, nil
}

// rollupOld merges rows older than the raw retention, which
// VictoriaMetrics would drop from raw, straight into the 1m and 5m tiers
// (addOld): it reads what the tiers hold for the batch's series and
// windows, adds the samples they have not seen, writes the new versions
// and makes them searchable for the next merge. Merges are serialized.
// The caller holds the read lock.
func (db *DB) rollupOld(rows []vmstorage.MetricRow) error {
	type oldSeries struct {
		ts []int64
		vs []float64
	}
	byName := make(map[string]*oldSeries)
	var order []string
	minT, maxT := int64(math.MaxInt64), int64(math.MinInt64)
	for _, r := range rows {
		s := byName[string(r.MetricNameRaw)]
		if s == nil {
			s = &oldSeries{}
			byName[string(r.MetricNameRaw)] = s
			order = append(order, string(r.MetricNameRaw))
		}
		s.ts = append(s.ts, r.Timestamp)
		s.vs = append(s.vs, r.Value)
		minT, maxT = min(minT, r.Timestamp), max(maxT, r.Timestamp)
	}
	type oldOne struct {
		lset    labels.Labels
		counter bool
		sr      *series
	}
	olds := make([]oldOne, 0, len(order))
	families := make(map[string]bool)
	var mn vmstorage.MetricName
	var lb labels.ScratchBuilder
	for _, name := range order {
		s := byName[name]
		if err := mn.UnmarshalRaw([]byte(name)); err != nil {
			return fmt.Errorf("roll up old samples: %w", err)
		}
		lset := metricNameToLabels(&lb, &mn)
		sr := &series{ts: s.ts, vs: s.vs}
		sr.sortAndDedup()
		metric := lset.Get(labels.MetricName)
		families[metric] = true
		olds = append(olds, oldOne{lset: lset, counter: db.isCounter(metric), sr: sr})
	}
	alts := make([]string, 0, len(families))
	for f := range families {
		alts = append(alts, regexp.QuoteMeta(f))
	}
	slices.Sort(alts)
	m, err := labels.NewMatcher(labels.MatchRegexp, labels.MetricName, strings.Join(alts, "|"))
	if err != nil {
		return fmt.Errorf("roll up old samples: %w", err)
	}
	db.rollupMu.Lock()
	defer db.rollupMu.Unlock()
	for _, tier := range []Tier{Tier1m, Tier5m} {
		res := tier.Resolution().Milliseconds()
		b := db.newRollupBatch(tier)
		if windowEnd(maxT, res) < b.lo {
			// Older than the tier keeps: every row would be dropped
			// (rollupBatch.add), so nothing to read, write or flush.
			continue
		}
		tfs, err := db.readFilters(tier, []*labels.Matcher{m})
		if err != nil {
			return fmt.Errorf("roll up old samples: %w", err)
		}
		b.held, err = db.loadHeld(context.Background(), tier, tfs, window(minT, res)*res+1, windowEnd(maxT, res))
		if err != nil {
			return fmt.Errorf("roll up old samples: %w", err)
		}
		for _, o := range olds {
			// addOld works in place; each tier gets a copy.
			if err := b.addOld(o.lset, o.counter, slices.Clone(o.sr.ts), slices.Clone(o.sr.vs)); err != nil {
				return fmt.Errorf("roll up old samples of %s: %w", o.lset, err)
			}
		}
		if err := b.write(); err != nil {
			return err
		}
		// The next merge must find these rows.
		db.tiers[tier].debugFlush()
	}
	return nil
}
