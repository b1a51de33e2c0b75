package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// Tier names one of the three VictoriaMetrics storages: raw samples and the
// 1-minute and 5-minute rollups.
type Tier int

const (
	TierRaw Tier = iota // raw samples as scraped or pushed
	Tier1m              // 1-minute rollups of raw
	Tier5m              // 5-minute rollups of 1m
)

// NumTiers is the number of tiers; Tier values are 0..NumTiers-1.
const NumTiers = 3

// Tiers lists the tiers from finest to coarsest.
var Tiers = [NumTiers]Tier{TierRaw, Tier1m, Tier5m}

// ErrUnknownTier is returned by ParseTier.
var ErrUnknownTier = errors.New("unknown tier; want raw, 1m or 5m")

func (t Tier) String() string {
	switch t {
	case TierRaw:
		return "raw"
	case Tier1m:
		return "1m"
	case Tier5m:
		return "5m"
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

// Resolution is the width of the tier's rollup windows; 0 for raw.
func (t Tier) Resolution() time.Duration {
	switch t {
	case Tier1m:
		return time.Minute
	case Tier5m:
		return 5 * time.Minute
	}
	return 0
}

// ParseTier parses "raw", "1m" or "5m" (Thanos' max_source_resolution
// values; "0s" is accepted for raw, as Thanos does).
func ParseTier(s string) (Tier, error) {
	switch s {
	case "raw", "0", "0s":
		return TierRaw, nil
	case "1m":
		return Tier1m, nil
	case "5m":
		return Tier5m, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownTier, s)
}

// tierStore is one VictoriaMetrics storage under <Path>/tsdb/<tier>.
type tierStore struct {
	tier      Tier
	path      string
	retention time.Duration
	vm        *vmstorage.Storage

	// rolledUpTo is the downsampler's watermark for this tier (ms): every
	// window (w*res, (w+1)*res] with (w+1)*res <= rolledUpTo is rolled
	// up. Raw has none.
	rolledUpTo atomic.Int64
	// minT and maxT are the oldest and newest timestamps written since Open.
	minT, maxT atomic.Int64
	// flushes counts the DebugFlush calls made through debugFlush
	// (rollup.go): Rollup's reads name it, so that none of them reuses
	// the series set VictoriaMetrics cached before the last flush.
	flushes atomic.Uint64

	// touched maps the months (UTC) of a rollup tier that got rows since
	// Open and have not been compacted since to when they last got rows.
	monthsMu sync.Mutex
	touched  map[time.Time]time.Time
}

func (ts *tierStore) noteTimeRange(minT, maxT int64) {
	for {
		cur := ts.minT.Load()
		if minT >= cur || ts.minT.CompareAndSwap(cur, minT) {
			break
		}
	}
	for {
		cur := ts.maxT.Load()
		if maxT <= cur || ts.maxT.CompareAndSwap(cur, maxT) {
			break
		}
	}
}

// openTiers opens the 1m and 5m storages next to raw.
func openTiers(root string, opts Options) (_ [NumTiers]*tierStore, err error) {
	var out [NumTiers]*tierStore
	defer func() {
		if err != nil {
			for _, ts := range out {
				if ts != nil && ts.vm != nil && ts.tier != TierRaw {
					closeVM(ts.vm)
				}
			}
		}
	}()
	ret := [NumTiers]time.Duration{opts.RetentionRaw, opts.Retention1m, opts.Retention5m}
	for _, t := range Tiers {
		ts := &tierStore{tier: t, path: filepath.Join(root, "tsdb", t.String()), retention: ret[t]}
		ts.minT.Store(1<<63 - 1)
		ts.maxT.Store(-1 << 63)
		out[t] = ts
		if t == TierRaw {
			continue // opened by Open, which owns the error messages
		}
		if err := checkWritableDir(ts.path); err != nil {
			return out, fmt.Errorf("open tier %s: %w", t, err)
		}
		vm, err := openVM(ts.path, ts.retention, true)
		if err != nil {
			return out, fmt.Errorf("open tier %s %s: %w", t, ts.path, err)
		}
		ts.vm = vm
	}
	return out, nil
}

func closeVM(vm *vmstorage.Storage) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	vm.MustClose()
	return nil
}

// SetRolledUpTo records the downsampler's watermark for tier (1m or 5m):
// every window ending at or before t is rolled up, so queries may read the
// tier up to t. The downsampler calls it at start (with the persisted
// watermark) and after each pass.
func (db *DB) SetRolledUpTo(tier Tier, t time.Time) {
	if tier <= TierRaw || tier >= NumTiers {
		return
	}
	db.tiers[tier].rolledUpTo.Store(t.UnixMilli())
}

// RolledUpTo returns the watermark set with SetRolledUpTo (zero time: none).
func (db *DB) RolledUpTo(tier Tier) time.Time {
	if tier <= TierRaw || tier >= NumTiers {
		return time.Time{}
	}
	ms := db.tiers[tier].rolledUpTo.Load()
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// CompactQuietMonths merges, for each calendar month (UTC) of a rollup
// tier that ended at or before `before` and got rows since Open but none
// in the last `quiet` (wall clock), the month's parts into one, as
// VictoriaMetrics' force merge does, and returns the months it merged.
//
// Rollups arrive as many small writes (a window at a time, or the spans
// of a backfill); a month that is then only read is smaller and faster to
// read as one part, with fewer and longer blocks per series. The
// downsampler calls it with the tier's watermark, so the month being
// written is never merged; late data that reaches a merged month makes it
// a candidate again.
func (db *DB) CompactQuietMonths(tier Tier, before time.Time, quiet time.Duration) (merged []time.Time, err error) {
	if tier <= TierRaw || tier >= NumTiers {
		return nil, fmt.Errorf("compact tier %s: %w", tier, ErrUnknownTier)
	}
	ts := db.tiers[tier]
	due := ts.quietMonths(before, time.Now().Add(-quiet))
	if len(due) == 0 {
		return nil, nil
	}
	if err := db.readLock(); err != nil {
		return nil, err
	}
	defer db.readUnlock()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("compact tier %s: %v", tier, r)
		}
	}()
	for _, m := range due {
		// VictoriaMetrics names monthly partitions YYYY_MM.
		name := m.month.Format("2006_01")
		if err := ts.vm.ForceMergePartitions(name); err != nil {
			return merged, fmt.Errorf("compact tier %s month %s: %w", tier, name, err)
		}
		ts.mergedMonth(m)
		merged = append(merged, m.month)
	}
	return merged, nil
}

// monthTouch is the last time (wall clock) rows went into a month.
type monthTouch struct {
	month time.Time
	at    time.Time
}

// touchMonths records that rows in [minT, maxT] (ms) were just written.
func (ts *tierStore) touchMonths(minT, maxT int64) {
	now := time.Now()
	ts.monthsMu.Lock()
	defer ts.monthsMu.Unlock()
	if ts.touched == nil {
		ts.touched = make(map[time.Time]time.Time)
	}
	last := monthOf(time.UnixMilli(maxT))
	for m := monthOf(time.UnixMilli(minT)); !m.After(last); m = m.AddDate(0, 1, 0) {
		ts.touched[m] = now
	}
}

// quietMonths lists the touched months that end at or before `before`
// and were last touched before quietSince, oldest first.
func (ts *tierStore) quietMonths(before, quietSince time.Time) []monthTouch {
	ts.monthsMu.Lock()
	defer ts.monthsMu.Unlock()
	var out []monthTouch
	for m, at := range ts.touched {
		if !m.AddDate(0, 1, 0).After(before) && at.Before(quietSince) {
			out = append(out, monthTouch{m, at})
		}
	}
	slices.SortFunc(out, func(a, b monthTouch) int { return a.month.Compare(b.month) })
	return out
}

// mergedMonth forgets m unless rows went into it after the merge began.
func (ts *tierStore) mergedMonth(m monthTouch) {
	ts.monthsMu.Lock()
	defer ts.monthsMu.Unlock()
	if ts.touched[m.month].Equal(m.at) {
		delete(ts.touched, m.month)
	}
}

// monthOf is the first instant of t's calendar month, UTC.
func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Retention returns how long tier keeps data.
func (db *DB) Retention(tier Tier) time.Duration { return db.tiers[tier].retention }

// now is the DB's clock (Options.Now).
func (db *DB) now() time.Time { return db.opts.Now() }

// coverage returns the time range [lo, hi) a tier can answer for (ms):
// raw from its retention on, a rollup tier from its retention up to and
// including its watermark.
func (db *DB) coverage(t Tier, now int64) (lo, hi int64) {
	ts := db.tiers[t]
	lo = now - ts.retention.Milliseconds()
	if t == TierRaw {
		return lo, 1<<63 - 1
	}
	wm := ts.rolledUpTo.Load()
	if wm == 0 {
		return lo, lo
	}
	return lo, wm + 1
}

// lateHooks are the functions called by Commit with the time range of rows
// older than the 1m watermark (late or backfilled data).
type lateHooks struct {
	mu    sync.RWMutex
	hooks []func(minT, maxT int64)
}

// OnLateCommit registers fn to be called after a Commit wrote raw samples
// at or before the 1m tier's watermark, with their oldest and newest
// timestamp (ms). The downsampler uses it to roll those windows up again.
// fn runs on the committing goroutine and must be quick.
func (db *DB) OnLateCommit(fn func(minT, maxT int64)) {
	db.late.mu.Lock()
	defer db.late.mu.Unlock()
	db.late.hooks = append(db.late.hooks, fn)
}

// SetLateHorizon tells Commit that the downsampler is about to read raw
// data up to t for the 1m tier. A Commit that writes samples at or before
// the horizon after the downsampler's read may have missed them reports
// them as late, so they are rolled up again. The downsampler sets it
// before it flushes and reads each span: a commit whose rows were written
// before that flush is seen by the read, and one whose rows land after it
// sees the horizon (Commit checks after writing). Without it, backfill
// arriving while the downsampler catches up (its published watermark moves
// only at the end of a pass) left hours of windows without rollups.
func (db *DB) SetLateHorizon(t time.Time) {
	ms := t.UnixMilli()
	for {
		old := db.lateHorizon.Load()
		if ms <= old || db.lateHorizon.CompareAndSwap(old, ms) {
			return
		}
	}
}

func (db *DB) noteCommitted(minT, maxT int64) {
	wm := max(db.tiers[Tier1m].rolledUpTo.Load(), db.lateHorizon.Load())
	if wm == 0 || minT > wm {
		return
	}
	db.late.mu.RLock()
	defer db.late.mu.RUnlock()
	for _, fn := range db.late.hooks {
		fn(minT, maxT)
	}
}
