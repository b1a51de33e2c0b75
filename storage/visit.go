package storage

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
)

// Visiting series. Select hands back every series of a read with its
// samples in memory: each series decoded into a scratch buffer, copied
// to a slice of its own, then read by the caller. A caller that needs
// each series once, in no particular order, and keeps nothing of its
// samples (the query engine's aggregation pushdown) can instead have each
// series decoded on one of GOMAXPROCS workers into that worker's buffer
// and handed to it there: no slice per series, no copy, nothing for the
// garbage collector. In a 24-hour query the copy and the collector were
// a quarter of the CPU.

// VisitFunc receives one series of a visit: its labels and its samples
// in the read's range, sorted by timestamp, one per timestamp, staleness
// markers included. ts and vs are valid only until it returns; lset is
// its own. It is called on up to GOMAXPROCS goroutines at once.
type VisitFunc func(lset labels.Labels, ts []int64, vs []float64) error

// VisitSeries is Select for a VisitFunc: it calls visit for each series
// Select with these hints and matchers would return, in no particular
// order, and returns the first error (visit's or the read's). Only a read
// of the raw tier alone, without an explicit rollup matcher, can be
// visited; for any other (handled false) nothing was visited and the
// caller uses Select.
func (q *tieredQuerier) VisitSeries(ctx context.Context, hints *promstorage.SelectHints, sw *stepWindows, visit func(lset labels.Labels, ts []int64, vs []float64) error, ms ...*labels.Matcher) (handled bool, err error) {
	db := q.raw.db
	mint, maxt, step, fn := q.raw.mint, q.raw.maxt, int64(0), ""
	if hints != nil {
		if hints.Start != 0 || hints.End != 0 {
			mint, maxt = max(mint, hints.Start), min(maxt, hints.End)
		}
		step, fn = hints.Step, hints.Func
	}
	if mint > maxt || fn == "series" || (hints != nil && hints.Limit > 0) {
		return false, nil
	}
	user, explicit, ok := splitRollupMatchers(ms)
	if !ok || explicit != readDefault {
		return false, nil
	}
	// The tiers as sel plans them.
	maxTier := MaxSourceResolution(ctx)
	prefer := TierForStep(time.Duration(step)*time.Millisecond, maxTier)
	for _, m := range ms {
		if t, ok := tierMatcher(m); ok {
			prefer = min(max(prefer, t), maxTier)
		}
	}
	pieces := db.plan(mint, maxt, prefer, maxTier)
	if len(pieces) != 1 || pieces[0].tier != TierRaw {
		return false, nil
	}
	n, err := db.visitRaw(ctx, user, pieces[0].mint, pieces[0].maxt, sw, visit)
	if n > 0 {
		recorderFrom(ctx).note(TierRaw)
	}
	return true, err
}

// visitRaw visits the raw series matching ms in [mint, maxt] (with sw,
// only the samples in its windows), the head's samples merged in as
// readRawAt merges them, and returns how many it visited.
func (db *DB) visitRaw(ctx context.Context, ms []*labels.Matcher, mint, maxt int64, sw *stepWindows, visit VisitFunc) (visited int, err error) {
	// The head first, then the filters, as in readRawAt. A series
	// VictoriaMetrics also holds takes the head's samples into its own
	// visit (claimed); the others are visited on their own at the end.
	heads := make(map[string]*headPart)
	for _, s := range db.head.read(ms, mint, maxt, false) {
		s.ts, s.vs = filterSteps(sw, s.ts, s.vs)
		heads[string(s.lset.Bytes(nil))] = &headPart{s: s}
	}
	tfs, err := db.readFilters(TierRaw, ms)
	if err != nil {
		return 0, err
	}
	if err := db.readLock(); err != nil {
		return 0, err
	}
	defer db.readUnlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := &visitor{
		db: db, tr: timeRange(mint, maxt), sw: sw, heads: heads, visit: visit,
		jobs: make(chan visitJob, 2*runtime.GOMAXPROCS(0)), cancel: cancel,
	}
	for range runtime.GOMAXPROCS(0) {
		v.wg.Go(v.work)
	}
	readErr := v.read(ctx, tfs)
	close(v.jobs)
	v.wg.Wait()
	if err := errors.Join(readErr, v.firstErr()); err != nil {
		return 0, err
	}
	for _, h := range heads {
		if h.claimed.Load() || len(h.s.ts) == 0 {
			continue
		}
		if err := v.count(len(h.s.ts)); err != nil {
			return 0, err
		}
		if err := visit(h.s.lset, h.s.ts, h.s.vs); err != nil {
			return 0, err
		}
		v.visited.Add(1)
	}
	return int(v.visited.Load()), ctx.Err()
}

// headPart is the head's part of one series in a visit.
type headPart struct {
	s       *series
	claimed atomic.Bool
}

// visitJob is one series' blocks, read and not decoded.
type visitJob struct {
	name   string // VictoriaMetrics' marshalled metric name
	blocks []*vmstorage.Block
}

// visitor is one visitRaw: the goroutine that reads blocks hands each
// series' blocks to the workers, which it owns and waits for.
type visitor struct {
	db     *DB
	tr     vmstorage.TimeRange
	sw     *stepWindows
	heads  map[string]*headPart
	visit  VisitFunc
	jobs   chan visitJob
	cancel context.CancelFunc
	wg     sync.WaitGroup

	samples, visited atomic.Int64
	failed           atomic.Bool
	errOnce          sync.Once
	err              error
}

func (v *visitor) fail(err error) {
	v.errOnce.Do(func() { v.err = err })
	v.failed.Store(true)
	v.cancel()
}

// firstErr is the first error a worker failed with; call it after the
// workers are done.
func (v *visitor) firstErr() error { return v.err }

// count adds a series' samples to the read's and checks the limit.
func (v *visitor) count(n int) error {
	if v.samples.Add(int64(n)) > int64(v.db.opts.MaxSamplesPerQuery) {
		return errTooManySamples(v.db.opts.MaxSamplesPerQuery)
	}
	return nil
}

// read searches the raw tier and sends each series' blocks to the
// workers; blocks of one series arrive together (VM orders them by TSID).
func (v *visitor) read(ctx context.Context, tfs []*vmstorage.TagFilters) (err error) {
	var job visitJob
	defer func() {
		// Reading a block panics on a disk error.
		if r := recover(); r != nil {
			err = fmt.Errorf("read raw tier: %v", r)
		}
		for _, b := range job.blocks {
			putBlock(b)
		}
	}()
	var sr vmstorage.Search
	found := sr.Init(nil, v.db.tiers[TierRaw].vm, tfs, v.tr, v.db.opts.MaxSeriesPerQuery, vmDeadline(ctx))
	defer sr.MustClose()
	if found > v.db.opts.MaxSeriesPerQuery {
		return errTooManySeries(v.db.opts.MaxSeriesPerQuery)
	}
	send := func() bool {
		select {
		case v.jobs <- job:
			job = visitJob{}
			return true
		case <-ctx.Done():
			return false
		}
	}
	for sr.NextMetricBlock() {
		mbr := &sr.MetricBlockRef
		if len(job.blocks) > 0 && job.name != string(mbr.MetricName) && !send() {
			return ctx.Err()
		}
		if len(job.blocks) == 0 {
			job.name = string(mbr.MetricName)
		}
		blk := getBlock()
		mbr.BlockRef.MustReadBlock(blk)
		job.blocks = append(job.blocks, blk)
	}
	if err := sr.Error(); err != nil {
		return tooManySeries(searchError("read series", err), v.db.opts.MaxSeriesPerQuery)
	}
	if len(job.blocks) > 0 && !send() {
		return ctx.Err()
	}
	return nil
}

// work decodes and visits series until the jobs channel closes; after a
// failure it only returns the blocks it is sent to the pool.
func (v *visitor) work() {
	var (
		s   series // the worker's buffers, reused for every series
		mn  vmstorage.MetricName
		b   labels.ScratchBuilder
		key []byte
	)
	for job := range v.jobs {
		if v.failed.Load() {
			for _, blk := range job.blocks {
				putBlock(blk)
			}
			continue
		}
		_ = v.visitOne(&s, job, &mn, &b, &key) // its error is v's
	}
}

func (v *visitor) visitOne(s *series, job visitJob, mn *vmstorage.MetricName, b *labels.ScratchBuilder, key *[]byte) error {
	var err error
	s.blocks = job.blocks
	s.ts, s.vs, err = s.appendRows(s.ts[:0], s.vs[:0], v.tr, v.sw)
	s.blocks = nil
	for _, blk := range job.blocks {
		putBlock(blk)
	}
	if err != nil {
		v.fail(fmt.Errorf("read raw tier: %w", err))
		return err
	}
	s.sortAndDedup()
	if err := mn.UnmarshalString(job.name); err != nil {
		err = fmt.Errorf("read series: corrupt metric name: %w", err)
		v.fail(err)
		return err
	}
	lset := metricNameToLabels(b, mn)
	*key = lset.Bytes(*key)
	if h := v.heads[string(*key)]; h != nil && h.claimed.CompareAndSwap(false, true) {
		s.ts, s.vs = append(s.ts, h.s.ts...), append(s.vs, h.s.vs...)
		s.sortAndDedup()
	}
	if len(s.ts) == 0 {
		return nil // only blocks outside the range
	}
	if err := v.count(len(s.ts)); err != nil {
		v.fail(err)
		return err
	}
	if err := v.visit(lset, s.ts, s.vs); err != nil {
		v.fail(err)
		return err
	}
	v.visited.Add(1)
	return nil
}
