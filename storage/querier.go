package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// ErrQueryTooLarge is returned (wrapped) when a query would touch more series
// or load more samples than the limits in Options.
var ErrQueryTooLarge = errors.New("query too large")

// maxLabelResults bounds LabelNames and LabelValues when the caller sets no
// limit.
const maxLabelResults = 1_000_000

// rawQuerier returns a querier over the raw tier only, [mint, maxt]
// (milliseconds, inclusive).
func (db *DB) rawQuerier(mint, maxt int64) (*querier, error) {
	if err := db.readLock(); err != nil {
		return nil, err
	}
	db.readUnlock()
	return &querier{db: db, mint: mint, maxt: maxt}, nil
}

// ChunkQuerier returns the raw sample querier re-encoded as XOR chunks, for
// the remote-read path of web/api/v1 (remote read serves raw data only).
func (db *DB) ChunkQuerier(mint, maxt int64) (promstorage.ChunkQuerier, error) {
	q, err := db.rawQuerier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &chunkQuerier{querier: q}, nil
}

// ExemplarQuerier returns a querier that finds no exemplars: the storage
// keeps none.
func (db *DB) ExemplarQuerier(context.Context) (promstorage.ExemplarQuerier, error) {
	return noExemplars{}, nil
}

type noExemplars struct{}

func (noExemplars) Select(int64, int64, ...[]*labels.Matcher) ([]exemplar.QueryResult, error) {
	return nil, nil
}

type querier struct {
	db         *DB
	mint, maxt int64
	// tier is the tier LabelNames and LabelValues search (Select reads
	// raw only; the tiered querier does the rest).
	tier Tier
}

type chunkQuerier struct {
	*querier
}

func (q *chunkQuerier) Select(ctx context.Context, sortSeries bool, hints *promstorage.SelectHints, ms ...*labels.Matcher) promstorage.ChunkSeriesSet {
	return promstorage.NewSeriesSetToChunkSet(q.querier.Select(ctx, sortSeries, hints, ms...))
}

func (*querier) Close() error { return nil }

// Select returns the series matching ms, always sorted by labels. With
// hints.Func == "series" it returns labels only, without reading samples.
func (q *querier) Select(ctx context.Context, _ bool, hints *promstorage.SelectHints, ms ...*labels.Matcher) promstorage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		// PromQL narrows each selector's range in its hints, as
		// Prometheus' own block querier honours.
		mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
		if hints.Start == 0 && hints.End == 0 {
			mint, maxt = q.mint, q.maxt
		}
	}
	if mint > maxt {
		return promstorage.EmptySeriesSet()
	}
	if err := ctx.Err(); err != nil {
		return promstorage.ErrSeriesSet(err)
	}
	// The reserved rollup label means the same here as in the tiered
	// querier (a query rewritten for tiers still reads right from raw).
	user, agg, ok := splitRollupMatchers(ms)
	if !ok {
		return promstorage.EmptySeriesSet()
	}
	labelsOnly := hints != nil && hints.Func == "series"
	if !labelsOnly && agg == readDefault {
		// Rules read the last minutes of the same selectors every
		// interval: the recent window answers them from memory.
		set, ok, err := q.db.recent.read(user, mint, maxt, q.db.opts.MaxSeriesPerQuery, q.db.opts.MaxSamplesPerQuery)
		if err != nil {
			return promstorage.ErrSeriesSet(err)
		}
		if ok {
			return newSeriesSet(set, hints) // sorted already
		}
	}
	var set []*series
	var err error
	if labelsOnly {
		set, err = q.db.searchTier(ctx, TierRaw, user, mint, maxt, hints.Limit)
	} else {
		set, err = q.db.readRaw(ctx, user, agg, mint, maxt)
	}
	if err != nil {
		return promstorage.ErrSeriesSet(err)
	}
	slices.SortFunc(set, func(a, b *series) int { return labels.Compare(a.lset, b.lset) })
	return newSeriesSet(set, hints)
}

// newSeriesSet applies hints.Limit to set, sorted by labels.
func newSeriesSet(set []*series, hints *promstorage.SelectHints) promstorage.SeriesSet {
	if hints != nil && hints.Limit > 0 && len(set) > hints.Limit {
		set = set[:hints.Limit]
	}
	return &seriesSet{series: set, i: -1}
}

// LabelNames returns the sorted label names of series matching ms in the
// querier's range.
func (q *querier) LabelNames(ctx context.Context, hints *promstorage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	tfs, err := toTagFilters(ms)
	if err != nil {
		return nil, nil, err
	}
	db := q.db
	if err := db.readLock(); err != nil {
		return nil, nil, err
	}
	defer db.readUnlock()
	var fromHead []*series
	if q.tier == TierRaw {
		fromHead = db.head.read(ms, q.mint, q.maxt, true) // before VM, see head.go
	}
	names, err := db.tiers[q.tier].vm.SearchLabelNames(nil, tfs, timeRange(q.mint, q.maxt), labelSearchLimit(hints), labelScanSeries(hints, db.opts.MaxSeriesPerQuery), vmDeadline(ctx))
	if err != nil {
		return nil, nil, tooManySeries(searchError("search label names", err), db.opts.MaxSeriesPerQuery)
	}
	for _, s := range fromHead {
		s.lset.Range(func(l labels.Label) { names = append(names, l.Name) })
	}
	slices.Sort(names)
	names = slices.Compact(names) // the head's names repeat VictoriaMetrics'
	names, _ = hints.ApplyLimit(names)
	return names, nil, nil
}

// LabelValues returns the sorted values of label name on series matching
// ms in the querier's range.
func (q *querier) LabelValues(ctx context.Context, name string, hints *promstorage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	tfs, err := toTagFilters(ms)
	if err != nil {
		return nil, nil, err
	}
	db := q.db
	if err := db.readLock(); err != nil {
		return nil, nil, err
	}
	defer db.readUnlock()
	var fromHead []string
	if q.tier == TierRaw {
		fromHead = db.head.labelValues(name, ms, q.mint, q.maxt) // before VM, see head.go
	}
	values, err := db.tiers[q.tier].vm.SearchLabelValues(nil, name, tfs, timeRange(q.mint, q.maxt), labelSearchLimit(hints), labelScanSeries(hints, db.opts.MaxSeriesPerQuery), vmDeadline(ctx))
	if err != nil {
		return nil, nil, tooManySeries(searchError("search label values", err), db.opts.MaxSeriesPerQuery)
	}
	values = append(values, fromHead...)
	slices.Sort(values)
	values = slices.Compact(values) // the head's values repeat VictoriaMetrics'
	values, _ = hints.ApplyLimit(values)
	return values, nil, nil
}

// labelSearchLimit asks VictoriaMetrics for just the limit when any subset
// will do; otherwise for everything, so that sorting yields the smallest.
func labelSearchLimit(h *promstorage.LabelHints) int {
	if h.AllowsEarlyStop() {
		return h.Limit
	}
	return maxLabelResults
}

// toTagFilters converts Prometheus matchers into one VictoriaMetrics filter
// set. VictoriaMetrics has the same semantics for the cases that matter:
// regexps are anchored, `l=""` and `l=~""` match series without l, `l!=""`
// requires l. One difference: Prometheus compiles regexps with (?s), so `.`
// matches a newline in a label value; VictoriaMetrics does not.
func toTagFilters(ms []*labels.Matcher) ([]*vmstorage.TagFilters, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	tfs := vmstorage.NewTagFilters()
	for _, m := range ms {
		key := []byte(m.Name)
		if m.Name == labels.MetricName {
			key = nil // VM's metric group has the empty key
		}
		var negative, regexp bool
		switch m.Type {
		case labels.MatchEqual:
		case labels.MatchNotEqual:
			negative = true
		case labels.MatchRegexp:
			regexp = true
		case labels.MatchNotRegexp:
			negative, regexp = true, true
		default:
			return nil, fmt.Errorf("unsupported matcher %s", m)
		}
		if err := tfs.Add(key, []byte(m.Value), negative, regexp); err != nil {
			return nil, fmt.Errorf("invalid matcher %s: %w", m, err)
		}
	}
	return []*vmstorage.TagFilters{tfs}, nil
}

func timeRange(mint, maxt int64) vmstorage.TimeRange {
	return vmstorage.TimeRange{MinTimestamp: max(mint, 0), MaxTimestamp: max(maxt, 0)}
}

// vmDeadline converts ctx's deadline to VictoriaMetrics' (unix seconds).
func vmDeadline(ctx context.Context) uint64 {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(defaultQueryTimeout)
	}
	return uint64(max(d.Unix()+1, 0))
}

// searchError wraps VM's errors, mapping "too many series" to
// ErrQueryTooLarge and its deadline to context.DeadlineExceeded.
func searchError(op string, err error) error {
	if errors.Is(err, vmstorage.ErrDeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// searchSeries returns the series matching tfs with labels only.
func (db *DB) searchSeries(ctx context.Context, tier Tier, tfs []*vmstorage.TagFilters, mint, maxt int64) ([]*series, error) {
	if err := db.readLock(); err != nil {
		return nil, err
	}
	defer db.readUnlock()
	names, err := db.tiers[tier].vm.SearchMetricNames(nil, tfs, timeRange(mint, maxt), db.opts.MaxSeriesPerQuery, vmDeadline(ctx))
	if err != nil {
		return nil, tooManySeries(searchError("search series", err), db.opts.MaxSeriesPerQuery)
	}
	if len(names) > db.opts.MaxSeriesPerQuery {
		return nil, errTooManySeries(db.opts.MaxSeriesPerQuery)
	}
	var mn vmstorage.MetricName
	var b labels.ScratchBuilder
	set := make([]*series, 0, len(names))
	for _, name := range names {
		if err := mn.UnmarshalString(name); err != nil {
			return nil, fmt.Errorf("search series: corrupt metric name: %w", err)
		}
		set = append(set, &series{lset: metricNameToLabels(&b, &mn)})
	}
	return set, ctx.Err()
}

// readSeries reads every block of the matching series in [mint, maxt] and
// merges the blocks of each series into one sorted, de-duplicated list;
// with sw, of the samples in its windows only (raw: each sample stands
// for itself, so which are kept does not depend on the others).
func (db *DB) readSeries(ctx context.Context, tier Tier, tfs []*vmstorage.TagFilters, mint, maxt int64) (set []*series, err error) {
	return db.readSeriesAt(ctx, tier, tfs, mint, maxt, nil)
}

func (db *DB) readSeriesAt(ctx context.Context, tier Tier, tfs []*vmstorage.TagFilters, mint, maxt int64, sw *stepWindows) (set []*series, err error) {
	return db.readSeriesReduced(ctx, tier, tfs, mint, maxt, sw, nil)
}

// errSeriesSplit is readSeriesReduced's answer when a series' blocks did
// not all come together, so that reduce saw only some of its rows.
var errSeriesSplit = errors.New("a series' blocks came apart")

// readSeriesReduced is readSeriesAt handing each series' rows to reduce
// on the decoding goroutine, before they are copied to the series: a
// series' blocks are decoded in one batch (VM hands them over together,
// ordered by TSID), so reduce sees all of them; when they do not come
// together it fails with errSeriesSplit.
func (db *DB) readSeriesReduced(ctx context.Context, tier Tier, tfs []*vmstorage.TagFilters, mint, maxt int64, sw *stepWindows, reduce reduceFunc) (set []*series, err error) {
	if err := db.readLock(); err != nil {
		return nil, err
	}
	defer db.readUnlock()
	// Reading a block panics on a disk error.
	defer func() {
		if r := recover(); r != nil {
			set, err = nil, fmt.Errorf("read %s tier: %v", tier, r)
		}
	}()

	tr := timeRange(mint, maxt)
	var sr vmstorage.Search
	found := sr.Init(nil, db.tiers[tier].vm, tfs, tr, db.opts.MaxSeriesPerQuery, vmDeadline(ctx))
	defer sr.MustClose()
	// VM checks maxMetrics on some index paths only (not for a lone
	// metric name filter), so check the count it found as well.
	if found > db.opts.MaxSeriesPerQuery {
		return nil, errTooManySeries(db.opts.MaxSeriesPerQuery)
	}

	// Blocks are read one after another while the search is open and
	// decoded in parallel in batches of up to decodeBatchBlocks, one
	// series per task, so memory stays bounded however many series match.
	// Decoding (zstd and decimal) was 76% of a 90-day query on one core
	// (bench/tiers profile); VictoriaMetrics' vmselect splits the work the
	// same way.
	var (
		all     []*series
		byName  = make(map[string]*series)
		last    *series
		batch   decodeBatch
		samples atomic.Int64
		n       int
	)
	defer batch.release()
	flush := func() error {
		if err := batch.decodeReduced(ctx, tr, sw, reduce, &samples); err != nil {
			return fmt.Errorf("read %s tier: %w", tier, err)
		}
		if samples.Load() > int64(db.opts.MaxSamplesPerQuery) {
			return errTooManySamples(db.opts.MaxSamplesPerQuery)
		}
		return nil
	}
	for sr.NextMetricBlock() {
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		mbr := &sr.MetricBlockRef
		// Blocks of one series arrive together (VM orders them by TSID),
		// so the previous series is the common case.
		s := last
		if s == nil || s.name != string(mbr.MetricName) {
			// With reduce a batch ends only between series.
			if reduce != nil && batch.blocks >= decodeBatchBlocks {
				if err := flush(); err != nil {
					return nil, err
				}
			}
			s = byName[string(mbr.MetricName)]
			if s == nil {
				s = &series{name: string(mbr.MetricName)}
				byName[s.name] = s
				all = append(all, s)
			} else if reduce != nil && len(s.blocks) == 0 {
				return nil, errSeriesSplit
			}
			last = s
		}
		blk := getBlock()
		mbr.BlockRef.MustReadBlock(blk)
		batch.add(s, blk)
		if reduce == nil && batch.blocks >= decodeBatchBlocks {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := sr.Error(); err != nil {
		return nil, tooManySeries(searchError("read series", err), db.opts.MaxSeriesPerQuery)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	// Needed even for one block: VM keeps duplicate timestamps.
	parallel(ctx, len(all), func(i int) error { all[i].sortAndDedup(); return nil })

	var mn vmstorage.MetricName
	var b labels.ScratchBuilder
	out := all[:0]
	for _, s := range all {
		if len(s.ts) == 0 && !s.reduced {
			continue // only blocks outside the range
		}
		if err := mn.UnmarshalString(s.name); err != nil {
			return nil, fmt.Errorf("read series: corrupt metric name: %w", err)
		}
		s.lset = metricNameToLabels(&b, &mn)
		s.name = ""
		out = append(out, s)
	}
	return out, ctx.Err()
}

// tooManySeries turns VM's "too many series" error into ErrQueryTooLarge;
// VictoriaMetrics has no sentinel for it.
func tooManySeries(err error, limit int) error {
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if strings.Contains(err.Error(), "the number of matching timeseries exceeds") {
		// VM's own message suggests its command-line flags; ours cannot.
		return errTooManySeries(limit)
	}
	return err
}

func errTooManySeries(limit int) error {
	return fmt.Errorf("%w: more than %d series match; narrow the matchers or the time range", ErrQueryTooLarge, limit)
}

func errTooManySamples(limit int) error {
	return fmt.Errorf("%w: more than %d samples in the time range; narrow the matchers or the range", ErrQueryTooLarge, limit)
}

func metricNameToLabels(b *labels.ScratchBuilder, mn *vmstorage.MetricName) labels.Labels {
	b.Reset()
	if len(mn.MetricGroup) > 0 {
		b.Add(labels.MetricName, string(mn.MetricGroup))
	}
	for i := range mn.Tags {
		t := &mn.Tags[i]
		b.Add(string(t.Key), string(t.Value))
	}
	b.Sort()
	return b.Labels()
}
