package downsample

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aiserve/appliance/storage"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/bbolt"
)

// Store is what the downsampler needs of the storage; *storage.DB
// implements it.
type Store interface {
	// Rollup writes the rollups of tier for the windows in [start, end)
	// from the next finer tier. Rolling the same windows up again must be
	// harmless (storage.DB writes only what changed).
	Rollup(ctx context.Context, tier storage.Tier, start, end time.Time) (storage.RollupStats, error)
	// SetRolledUpTo tells queries they may read tier up to t.
	SetRolledUpTo(tier storage.Tier, t time.Time)
	// RolledUpTo returns what SetRolledUpTo set last.
	RolledUpTo(tier storage.Tier) time.Time
	// OnLateCommit registers a function called with the time range of
	// raw samples committed below the 1m watermark.
	OnLateCommit(fn func(minT, maxT int64))
	// Retention returns how long tier keeps data.
	Retention(tier storage.Tier) time.Duration
	// State is the bbolt file; the downsampler uses its own bucket.
	State() *bbolt.DB
	// Flush makes everything written so far searchable.
	Flush()
	// SetLateHorizon announces that raw data up to t is about to be read,
	// so that commits below it from then on are reported as late.
	SetLateHorizon(t time.Time)
	// CompactQuietMonths merges the parts of each finished month (ending
	// at or before `before`) that got rollup rows but none in the last
	// `quiet`, and returns the months merged.
	CompactQuietMonths(tier storage.Tier, before time.Time, quiet time.Duration) ([]time.Time, error)
}

// Options configure a Downsampler. Zero fields take the defaults.
type Options struct {
	// Interval is the time between passes (default 15s).
	Interval time.Duration
	// Delay is how long after a raw 1-minute window ends it is rolled up
	// (default 1m): a scrape that started in the window has committed by
	// then. Samples that come later still are rolled up as late data.
	Delay time.Duration
	// DurableAfter is how long (wall-clock) rows must have been written
	// before the watermark that covers them is saved (default 30s).
	// VictoriaMetrics keeps fresh rows in memory and writes them to disk
	// within a few seconds (its in-memory parts are flushed every 5s):
	// saving the watermark at once could, after kill -9, skip windows
	// whose rows were lost. Waiting means a restart redoes up to this
	// much work instead, which writes identical rows that readers
	// de-duplicate.
	DurableAfter time.Duration
	// Span1m and Span5m bound the time one Rollup call covers during
	// catch-up (defaults 10m and 1h): the call holds all source samples
	// of that span in memory, e.g. 100k series at 15s for 10m is 4M
	// samples, about 100 MB.
	Span1m, Span5m time.Duration
	// CompactAfter is how long a finished month of a rollup tier must
	// have gone without new rows before its parts are merged into one
	// (default 1m; see storage.DB.CompactQuietMonths).
	CompactAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives progress and errors; nil discards them.
	Logger *slog.Logger
	// Registerer receives the appliance_downsample_* metrics; may be nil.
	Registerer prometheus.Registerer

	// wall is the clock DurableAfter is measured on (default time.Now):
	// VictoriaMetrics flushes on real time, whatever Now says.
	wall func() time.Time
	// afterWrite, when set (tests), runs after each Rollup call and before
	// anything records its progress; an error aborts the pass as a crash
	// at that point would.
	afterWrite func(tier storage.Tier, start, end int64) error
}

// DefaultOptions returns the options the appliance runs with.
func DefaultOptions() Options {
	return Options{
		Interval:     15 * time.Second,
		Delay:        time.Minute,
		DurableAfter: 30 * time.Second,
		Span1m:       10 * time.Minute,
		Span5m:       time.Hour,
		CompactAfter: time.Minute,
		Now:          time.Now,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Interval <= 0 {
		o.Interval = d.Interval
	}
	if o.Delay <= 0 {
		o.Delay = d.Delay
	}
	if o.DurableAfter <= 0 {
		o.DurableAfter = d.DurableAfter
	}
	if o.Span1m <= 0 {
		o.Span1m = d.Span1m
	}
	if o.Span5m <= 0 {
		o.Span5m = d.Span5m
	}
	if o.CompactAfter <= 0 {
		o.CompactAfter = d.CompactAfter
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.wall == nil {
		o.wall = time.Now
	}
	return o
}

var rollupTiers = []storage.Tier{storage.Tier1m, storage.Tier5m}

// Downsampler rolls raw data up into the 1m tier and 1m into the 5m tier.
// Step is not safe for concurrent use: one goroutine (Run) owns it.
type Downsampler struct {
	store Store
	opts  Options
	log   *slog.Logger

	// wm is the in-memory watermark per tier (ms): rows below it are
	// written (maybe not yet on disk).
	wm [storage.NumTiers]int64
	// dirty lists the spans below wm to roll up again, per tier.
	dirty [storage.NumTiers][]span
	// pending are progress records not yet old enough to save.
	pending []pendingRecord

	// unflushed says that rollups wrote rows the store has not been
	// flushed since (Step).
	unflushed bool

	lateMu sync.Mutex
	late   []span
	// passes counts the passes that ended without an error (Passes).
	passes atomic.Uint64

	metrics *metrics
}

// pendingRecord is progress made at `at`: a watermark reached, or a dirty
// span rolled up again.
type pendingRecord struct {
	at    int64
	tier  storage.Tier
	wm    int64 // 0 for a dirty span
	clean span
}

// New loads the watermarks from the state file and registers for late
// data. It starts nothing: call Run.
func New(store Store, opts Options) (*Downsampler, error) {
	opts = opts.withDefaults()
	d := &Downsampler{store: store, opts: opts, log: opts.Logger}
	now := opts.Now().UnixMilli()
	err := store.State().Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucket); err != nil {
			return err
		}
		for _, t := range rollupTiers {
			res := t.Resolution().Milliseconds()
			wm, ok := loadWatermark(tx, t)
			if !ok {
				// First start: begin where raw data may begin.
				wm = floor(now-store.Retention(storage.TierRaw).Milliseconds(), res)
				if t == storage.Tier5m {
					wm = floor(d.wm[storage.Tier1m], res)
				}
				if err := saveWatermark(tx, t, wm); err != nil {
					return err
				}
			}
			d.wm[t] = wm
			spans, err := loadDirty(tx, t)
			if err != nil {
				return err
			}
			d.dirty[t] = spans
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load downsampling state: %w", err)
	}
	d.metrics = newMetrics(d)
	if err := d.metrics.register(opts.Registerer); err != nil {
		return nil, fmt.Errorf("register downsampling metrics: %w", err)
	}
	for _, t := range rollupTiers {
		store.SetRolledUpTo(t, time.UnixMilli(d.wm[t]))
	}
	store.OnLateCommit(d.noteLate)
	return d, nil
}

// Close unregisters the metrics. It is safe to call more than once.
func (d *Downsampler) Close() { d.metrics.unregister() }

// noteLate is the storage's late-commit hook.
func (d *Downsampler) noteLate(minT, maxT int64) {
	d.lateMu.Lock()
	d.late = addSpan(d.late, span{minT, maxT + 1})
	d.lateMu.Unlock()
}

// Watermark returns the time up to which tier is rolled up and
// searchable. It is safe to call from any goroutine.
func (d *Downsampler) Watermark(tier storage.Tier) time.Time {
	return d.store.RolledUpTo(tier)
}

// Run runs a pass every Interval until ctx ends. A failed pass is logged
// and retried at the next tick; Run returns nil when ctx ends.
func (d *Downsampler) Run(ctx context.Context) error {
	tick := time.NewTicker(d.opts.Interval)
	defer tick.Stop()
	for {
		if err := d.Step(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("downsampling pass failed; retrying at the next tick", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Step runs one pass: it takes in late data, rolls every finished window
// up into 1m and then 5m, rolls dirty windows up again, and saves the
// progress that is old enough to be on disk.
//
// It flushes the store (storage.DB.Flush: the raw tier's head written to
// VictoriaMetrics, every tier made searchable) only before it reads raw
// and after a tier got rows: each flush that hands VictoriaMetrics rows
// costs a fresh 8 MiB row buffer per store, and a pass that rolls nothing
// up (three of four at the default 15 s interval) reads and writes
// nothing. Raw samples are queryable without a flush (the head), and the
// head flushes itself when nothing flushed it for 30 s.
func (d *Downsampler) Step(ctx context.Context) error {
	// Late raw rows reported by OnLateCommit must be searchable before
	// they are rolled up again. Commit reports rows after the head took
	// them, so flushing after taking the reports covers every reported
	// row; flushing before would miss the rows of a commit that reports
	// between the flush and absorbLate, whose span would then be rolled
	// up without them and counted as done (bench/tiers found such
	// 40-minute gaps in the 1m tier during a backfill).
	if err := d.absorbLate(); err != nil {
		return err
	}
	if len(d.dirty[storage.Tier1m]) > 0 {
		d.store.Flush()
	}
	var errs error
	for _, t := range rollupTiers {
		before := d.wm[t]
		if err := d.advance(ctx, t); err != nil {
			errs = err
			break
		}
		if err := d.redoDirty(ctx, t, before); err != nil {
			errs = err
			break
		}
		// The next tier and queries up to the watermark read what this
		// one wrote.
		if d.unflushed {
			d.store.Flush()
			d.unflushed = false
		}
		d.store.SetRolledUpTo(t, time.UnixMilli(d.wm[t]))
		d.compactMonths(t)
	}
	if err := d.save(); err != nil {
		errs = errors.Join(errs, err)
	}
	if errs == nil {
		d.passes.Add(1)
	}
	return errs
}

// Passes is the number of passes that ended without an error. A pass
// takes in the late data reported before it began and rolls it up again
// before it ends, so two more passes after a late commit was reported
// have rolled it up (the query range cache, ui/rangecache, waits for
// them). It is safe to call from any goroutine.
func (d *Downsampler) Passes() uint64 { return d.passes.Load() }

// compactMonths merges the finished months of tier that rollups stopped
// writing to (storage.DB.CompactQuietMonths). A failure costs only disk
// space and read speed, so it is logged, not returned.
func (d *Downsampler) compactMonths(t storage.Tier) {
	start := d.opts.wall()
	months, err := d.store.CompactQuietMonths(t, time.UnixMilli(d.wm[t]), d.opts.CompactAfter)
	for _, m := range months {
		d.log.Info("compacted a finished month of a rollup tier", "tier", t, "month", m.Format("2006-01"), "took", d.opts.wall().Sub(start))
	}
	if err != nil {
		d.log.Warn("compacting a finished month of a rollup tier failed; its data stays as it is", "tier", t, "err", err)
	}
}

func floor(t, res int64) int64 {
	if r := t % res; r != 0 {
		if t < 0 {
			return t - r - res
		}
		return t - r
	}
	return t
}

func ceil(t, res int64) int64 {
	f := floor(t, res)
	if f == t {
		return t
	}
	return f + res
}

func (d *Downsampler) span(t storage.Tier) int64 {
	if t == storage.Tier1m {
		return d.opts.Span1m.Milliseconds()
	}
	return d.opts.Span5m.Milliseconds()
}

// target is where tier's watermark may go now: for 1m, the end of the
// last raw window finished Delay ago; for 5m, the last 5-minute boundary
// the 1m tier has passed.
func (d *Downsampler) target(t storage.Tier) int64 {
	res := t.Resolution().Milliseconds()
	if t == storage.Tier1m {
		return floor(d.opts.Now().Add(-d.opts.Delay).UnixMilli(), res)
	}
	return floor(d.wm[storage.Tier1m], res)
}

// advance rolls up the windows between tier's watermark and its target.
func (d *Downsampler) advance(ctx context.Context, t storage.Tier) error {
	target := d.target(t)
	spanMs := max(d.span(t), t.Resolution().Milliseconds())
	if t == storage.Tier1m && d.wm[t] < target {
		// Announce the whole read before making raw searchable, once
		// per pass: a commit below target either is seen by the reads
		// or is reported late (see storage.DB.SetLateHorizon). A flush
		// per span made a fresh start, which walks the raw retention's
		// empty windows span by span, flush VictoriaMetrics a thousand
		// times (bench/ingest -short, appliance alone: 10.6 -> 8.5 CPU
		// seconds per million samples, peak RSS 757 -> 569 MiB).
		d.store.SetLateHorizon(time.UnixMilli(target))
		d.store.Flush()
	}
	for d.wm[t] < target {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := min(d.wm[t]+spanMs, target)
		if err := d.rollup(ctx, t, d.wm[t], end); err != nil {
			// Too many samples for one call (storage's
			// MaxSamplesPerQuery): halve the span down to one window.
			if res := t.Resolution().Milliseconds(); errors.Is(err, storage.ErrQueryTooLarge) && spanMs > res {
				spanMs = max(res, floor(spanMs/2, res))
				d.log.Info("rollup span too large; halving it", "tier", t, "span", time.Duration(spanMs)*time.Millisecond)
				continue
			}
			return err
		}
		d.wm[t] = end
		d.pending = append(d.pending, pendingRecord{at: d.opts.wall().UnixMilli(), tier: t, wm: end})
	}
	return nil
}

// redoDirty rolls up again the windows below upTo (the watermark before
// this pass's advance) that received late samples, and marks the 5m
// windows above them dirty. The windows above upTo were rolled up by
// advance after every reported commit was searchable, so they hold the
// late samples already (a late commit's span may reach past the old
// watermark); rolling them up again in the same pass, before a flush,
// would not find the rows advance wrote and write them a second time.
func (d *Downsampler) redoDirty(ctx context.Context, t storage.Tier, upTo int64) error {
	res := t.Resolution().Milliseconds()
	spanMs := max(d.span(t), res)
	spans := d.dirty[t]
	d.dirty[t] = nil
	for i, s := range spans {
		// s holds sample times [s.start, s.end); a sample at t is in
		// window (floor(t-1), ceil(t)]. Samples after the watermark are
		// rolled up by advance.
		start, end := floor(s.start-1, res), min(ceil(s.end-1, res), upTo)
		if start >= end {
			continue
		}
		for from := start; from < end; from += spanMs {
			err := ctx.Err()
			if err == nil {
				err = d.rollup(ctx, t, from, min(from+spanMs, end))
			}
			if err != nil {
				// Keep this span and the rest for the next pass.
				for _, rest := range spans[i:] {
					d.dirty[t] = addSpan(d.dirty[t], rest)
				}
				return err
			}
		}
		d.pending = append(d.pending, pendingRecord{at: d.opts.wall().UnixMilli(), tier: t, clean: s})
		if t == storage.Tier1m {
			// Added at once (and saved before the 1m span is dropped):
			// a 5m window rolled up twice costs nothing.
			d.dirty[storage.Tier5m] = addSpan(d.dirty[storage.Tier5m], span{start + 1, end + 1})
		}
	}
	return nil
}

func (d *Downsampler) rollup(ctx context.Context, t storage.Tier, start, end int64) error {
	began := time.Now()
	st, err := d.store.Rollup(ctx, t, time.UnixMilli(start), time.UnixMilli(end))
	d.metrics.duration.WithLabelValues(t.String()).Observe(time.Since(began).Seconds())
	if err != nil {
		d.metrics.errors.WithLabelValues(t.String()).Inc()
		return fmt.Errorf("roll up %s windows [%s, %s): %w", t, time.UnixMilli(start).UTC(), time.UnixMilli(end).UTC(), err)
	}
	d.metrics.rows.WithLabelValues(t.String()).Add(float64(st.Rows))
	if st.Rows > 0 {
		d.unflushed = true
	}
	if d.opts.afterWrite != nil {
		if err := d.opts.afterWrite(t, start, end); err != nil {
			return err
		}
	}
	return nil
}

// absorbLate moves the spans reported by noteLate into the 1m dirty list
// and saves it before anything is rolled up.
func (d *Downsampler) absorbLate() error {
	d.lateMu.Lock()
	late := d.late
	d.late = nil
	d.lateMu.Unlock()
	if len(late) == 0 {
		return nil
	}
	for _, s := range late {
		d.dirty[storage.Tier1m] = addSpan(d.dirty[storage.Tier1m], s)
	}
	return d.save()
}

// save writes the watermarks and dirty lists that are durable: progress
// recorded at least DurableAfter ago.
func (d *Downsampler) save() error {
	cutoff := d.opts.wall().Add(-d.opts.DurableAfter).UnixMilli()
	var wm [storage.NumTiers]int64
	dirty := d.dirty
	for _, t := range rollupTiers {
		dirty[t] = append([]span(nil), d.dirty[t]...)
	}
	keep := d.pending[:0]
	for _, p := range d.pending {
		if p.at <= cutoff {
			if p.wm != 0 {
				wm[p.tier] = max(wm[p.tier], p.wm)
			}
			continue
		}
		keep = append(keep, p)
		if p.wm == 0 {
			// Not yet durable: still dirty on disk.
			dirty[p.tier] = addSpan(dirty[p.tier], p.clean)
		}
	}
	err := d.store.State().Update(func(tx *bbolt.Tx) error {
		for _, t := range rollupTiers {
			if wm[t] != 0 {
				if err := saveWatermark(tx, t, wm[t]); err != nil {
					return err
				}
			}
			if err := saveDirty(tx, t, dirty[t]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save downsampling state: %w", err)
	}
	d.pending = keep
	return nil
}

// lag is how far tier's watermark is behind now, in seconds. It reads the
// watermark the storage publishes (SetRolledUpTo), which is safe to read
// from any goroutine.
func (d *Downsampler) lag(t storage.Tier) float64 {
	wm := d.store.RolledUpTo(t)
	return max(0, d.opts.Now().Sub(wm).Seconds())
}
