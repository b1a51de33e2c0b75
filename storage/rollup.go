package storage

import (
	"context"
	"fmt"
	"math"
	"strings"
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
	j := 0
	for i := range ts {
		if i+1 < len(ts) && window(ts[i+1], res) == window(ts[i], res) {
			continue
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

// RollupStats describe one Rollup call.
type RollupStats struct {
	// Series is the number of source series read.
	Series int
	// Rows is the number of rollup rows written.
	Rows int
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
}

func (db *DB) newRollupBatch(tier Tier) *rollupBatch {
	return &rollupBatch{
		db: db, tier: tier, res: tier.Resolution().Milliseconds(),
		lo:   db.now().UnixMilli() - db.tiers[tier].retention.Milliseconds(),
		minT: math.MaxInt64, maxT: math.MinInt64,
	}
}

// name marshals base plus RollupLabel=agg; each name is its own allocation
// because rows keep a reference until AddRows returns.
func (b *rollupBatch) name(base labels.Labels, agg rollupAgg) ([]byte, error) {
	lb := labels.NewBuilder(base)
	lb.Set(RollupLabel, agg.String())
	return marshalRawName(nil, lb.Labels())
}

func (b *rollupBatch) add(name []byte, t int64, v float64) {
	if t < b.lo {
		return // VictoriaMetrics would drop it silently
	}
	b.rows = append(b.rows, vmstorage.MetricRow{MetricNameRaw: name, Timestamp: t, Value: v})
	b.minT, b.maxT = min(b.minT, t), max(b.maxT, t)
}

// addRaw rolls one raw series (sorted, one sample per timestamp) up into
// the batch's windows.
func (b *rollupBatch) addRaw(base labels.Labels, counter bool, ts []int64, vs []float64) error {
	ts, vs = dropStale(ts, vs)
	if len(ts) == 0 {
		return nil
	}
	if counter {
		name, err := b.name(base, aggCounter)
		if err != nil {
			return err
		}
		rollupCounter(ts, vs, b.res, func(t int64, v float64) { b.add(name, t, v) })
		return nil
	}
	var names [numAggs][]byte
	for _, a := range []rollupAgg{aggMax, aggNegMin, aggSum, aggCount} {
		n, err := b.name(base, a)
		if err != nil {
			return err
		}
		names[a] = n
	}
	rollupGauge(ts, vs, b.res, func(w gaugeWindow) {
		b.add(names[aggMax], w.last, w.max)
		b.add(names[aggNegMin], w.last, -w.min)
		b.add(names[aggSum], w.last, w.sum)
		b.add(names[aggCount], w.last, w.count)
	})
	return nil
}

// addTier rolls one aggregate series of the finer tier (labels include
// RollupLabel) up into the batch's windows.
func (b *rollupBatch) addTier(lset labels.Labels, srcRes int64, ts []int64, vs []float64) error {
	agg, ok := parseAgg(lset.Get(RollupLabel))
	if !ok {
		return nil // not written by this package
	}
	name, err := marshalRawName(nil, lset)
	if err != nil {
		return err
	}
	if agg == aggCounter {
		rollupCounter(ts, vs, b.res, func(t int64, v float64) { b.add(name, t, v) })
		return nil
	}
	ts, vs = dedupWindows(ts, vs, srcRes)
	rollupAggregate(agg, ts, vs, b.res, func(t int64, v float64) { b.add(name, t, v) })
	return nil
}

// write hands the batch to the tier's VictoriaMetrics.
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
		ts.vm.AddRows(b.rows, precisionBits)
		return nil
	}(); err != nil {
		return err
	}
	ts.noteTimeRange(b.minT, b.maxT)
	ts.touchMonths(b.minT, b.maxT)
	return nil
}

// allSeries matches every series.
var allSeries = []*labels.Matcher{labels.MustNewMatcher(labels.MatchNotEqual, labels.MetricName, "")}

// Rollup writes the rollups of tier (1m or 5m) for the windows in
// (start, end] from the next finer tier (raw for 1m, 1m for 5m). start and
// end must be multiples of the tier's resolution. The rows written are a
// function of the source data only, so running Rollup again over the same
// windows writes the same rows again, which the readers de-duplicate: a
// crash between writing rows and saving a watermark costs nothing but the
// repeated work. After late data, a window rolled up again has a newer
// version the readers prefer (see dedupWindows).
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
	tfs, err := toTagFilters(allSeries)
	if err != nil {
		return st, err
	}
	set, err := db.readSeries(ctx, src, tfs, s+1, e)
	if err != nil {
		return st, fmt.Errorf("rollup into tier %s: %w", tier, err)
	}
	b := db.newRollupBatch(tier)
	kinds := make(map[string]bool)
	for _, sr := range set {
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
			return st, fmt.Errorf("rollup into tier %s: series %s: %w", tier, sr.lset, err)
		}
	}
	if err := db.readLock(); err != nil {
		return st, err
	}
	defer db.readUnlock()
	if err := b.write(); err != nil {
		return st, err
	}
	return RollupStats{Series: len(set), Rows: len(b.rows)}, nil
}
