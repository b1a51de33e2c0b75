package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"go.etcd.io/bbolt"
)

// Compile-time checks of the interfaces Prometheus' scrape manager, rules
// manager, PromQL engine and web/api/v1 use.
var (
	_ promstorage.AppendableV2            = (*DB)(nil)
	_ promstorage.Appendable              = (*DB)(nil)
	_ promstorage.SampleAndChunkQueryable = (*DB)(nil)
	_ promstorage.ExemplarQueryable       = (*DB)(nil)
)

// Sentinel errors callers may branch on.
var (
	// ErrClosed is returned by operations on a DB after Close.
	ErrClosed = errors.New("storage is closed")
	// ErrNotSupported is returned by admin operations the VictoriaMetrics
	// engine cannot do (snapshots through the Prometheus API, deleting part
	// of a series' time range).
	ErrNotSupported = errors.New("not supported by this storage")
)

const (
	// precisionBits is what AddRows keeps of each value: 64 means VM's
	// decimal encoding loses nothing beyond its ~15-17 significant digits.
	precisionBits = 64

	// futureRetention is how far ahead of now VictoriaMetrics accepts
	// samples (its minimum, -futureRetention=2d).
	futureRetention = 48 * time.Hour

	// defaultMaxSeriesPerQuery bounds one Select, LabelNames or LabelValues:
	// VictoriaMetrics fails a search that matches more series with an error.
	defaultMaxSeriesPerQuery = 1_000_000
	// defaultMaxSamplesPerQuery bounds the samples one Select loads into
	// memory (16 bytes each: 50M is 800 MB).
	defaultMaxSamplesPerQuery = 50_000_000
	// defaultRollupPageSize is Options.RollupPageSize's default.
	defaultRollupPageSize = 10_000
	// defaultQueryTimeout applies when the context of a query has no deadline.
	defaultQueryTimeout = 5 * time.Minute
)

// Options configure a DB. Start from DefaultOptions.
type Options struct {
	// Path is the data directory: the tiers live in <Path>/tsdb/{raw,1m,5m}
	// and the bbolt state file is <Path>/state.db.
	Path string
	// RetentionRaw is how long raw samples are kept (default 7 days).
	// Samples older than that go straight into the rollup tiers that
	// still keep their time (see Commit), or are refused.
	RetentionRaw time.Duration
	// Retention1m and Retention5m are how long the 1-minute and 5-minute
	// rollups are kept (defaults 30 and 90 days). Open refuses
	// 5m < 1m < raw.
	Retention1m, Retention5m time.Duration
	// Now is the clock for retention bounds and tier coverage; nil means
	// time.Now. Tests move it.
	Now func() time.Time
	// MemoryBudget is how many bytes VictoriaMetrics' caches may use in this
	// process; 0 means 25% of RAM (or of the cgroup limit), at least 256 MiB
	// and at most 2 GiB. It is process-wide: the first Open sets it.
	MemoryBudget int64
	// Logger receives the DB's and VictoriaMetrics' warnings; nil discards them.
	Logger *slog.Logger
	// Registerer receives the appliance_storage_* self-metrics; may be nil.
	Registerer prometheus.Registerer

	// MaxSeriesPerQuery bounds the series one query may touch (0 = 1e6).
	MaxSeriesPerQuery int
	// MaxSamplesPerQuery bounds the samples one Select may load (0 = 5e7).
	MaxSamplesPerQuery int
	// RollupPageSize is how many source series Rollup holds at a time
	// (0 = 10,000). Rollups have no series cap: they page through every
	// series of their windows.
	RollupPageSize int
	// StartFresh lets Open start with an empty state file (state.db
	// missing or zero bytes) next to existing series data; without it
	// Open refuses, since alerts' state, silences and the notification
	// log would be gone unnoticed (see CheckStateFile).
	StartFresh bool

	// MinFreeDisk is the free-disk watermark (storage.min_free_disk): below
	// it Commit refuses samples with ErrDiskFull. 0 means
	// DefaultMinFreeDisk, a negative value turns the watermark off.
	MinFreeDisk int64
	// FreeDiskBytes reads the free space of the filesystem holding a path;
	// nil means statfs. Tests inject a source.
	FreeDiskBytes func(path string) (uint64, error)
	// SelfMonitoring tells, from the first series of a commit, the
	// appliance's own samples (its self-scrape): below MinFreeDisk they are
	// still taken down to half of it, so the self-alert on
	// appliance_storage_read_only can fire. The HTTP ingest checks the
	// watermark before it appends, so only scrapes and rules get here.
	// nil: none are.
	SelfMonitoring func(first labels.Labels) bool
	// DisableWAL turns the write-ahead log off (benchmarks compare): a
	// commit is then durable only on VictoriaMetrics' own schedule.
	DisableWAL bool
	// HeadBatchWrites makes Commit leave raw samples in the head and the
	// head's flush (the downsampler's, about once a minute, else at most
	// every headFlushAfter) write them to VictoriaMetrics several samples
	// per series at once, VictoriaMetrics' fast path. On in
	// DefaultOptions: each write costs VictoriaMetrics a fresh 8 MiB row
	// buffer, and one write per flush instead of one per commit cut the
	// small box's allocations by 30% (README, "The small box").
	HeadBatchWrites bool
	// MaxSeries is storage.max_series: while this many series are active
	// (samples in the current or the previous hour), samples of a new
	// series are refused with ErrSeriesLimit and counted per target in
	// appliance_storage_series_refused_total; existing series keep
	// flowing. The appliance's own series (rules, the self-scrape) and
	// WAL replay are counted and never refused. 0 turns the guard off.
	MaxSeries int
}

// DefaultOptions returns the options the appliance runs with; set Path.
func DefaultOptions() Options {
	return Options{
		RetentionRaw:       7 * 24 * time.Hour,
		Retention1m:        30 * 24 * time.Hour,
		Retention5m:        90 * 24 * time.Hour,
		Now:                time.Now,
		MaxSeriesPerQuery:  defaultMaxSeriesPerQuery,
		MaxSamplesPerQuery: defaultMaxSamplesPerQuery,
		RollupPageSize:     defaultRollupPageSize,
		HeadBatchWrites:    true,
	}
}

// DB is the appliance's time-series store. All its methods are safe for
// concurrent use; the appenders it hands out are not (one per goroutine).
type DB struct {
	opts   Options
	logger *slog.Logger

	// vm is the raw tier's storage (tiers[TierRaw].vm).
	vm    *vmstorage.Storage
	tiers [NumTiers]*tierStore
	state *bbolt.DB
	late  lateHooks
	// lateHorizon is the newest raw time the downsampler has started to
	// read (ms); see SetLateHorizon.
	lateHorizon atomic.Int64

	names *seriesCache
	meta  *metadataStore
	// recent holds the last minutes of the raw series rules read; see
	// recent_window.go. Commit feeds it.
	recent *recentWindow
	// head holds the committed samples VictoriaMetrics may not show yet;
	// raw reads merge it in (head.go). Commit feeds it, Flush trims it.
	head *head
	// sink receives every commit (SetCommitSink); nil when none.
	sink atomic.Pointer[CommitSink]

	// closeMu is held for reading by every operation that touches vm, and
	// for writing by Close, so that nothing reaches a closed VM storage
	// (which would crash the process rather than return an error).
	closeMu sync.RWMutex
	closed  bool

	// rollupMu serializes the read-modify-write merges of samples older
	// than the raw retention into the rollup tiers (rollupOld).
	rollupMu sync.Mutex

	// addRowsSem bounds concurrent AddRows calls to the number of CPUs, as
	// VictoriaMetrics asks.
	addRowsSem chan struct{}

	// minT and maxT are the oldest and newest timestamps committed since
	// Open, for Stats.
	minT, maxT atomic.Int64

	metrics *dbMetrics

	// guard is the storage.max_series guard (series_guard.go); nil when
	// Options.MaxSeries is 0.
	guard *seriesGuard

	// wal is the write-ahead log of committed samples (nil when
	// Options.DisableWAL); disk is the free-disk watermark. See wal.go.
	wal         *wal
	disk        *diskGuard
	walReplayed prometheus.Counter
}

// Open opens or creates the storage under opts.Path. It starts no goroutines
// of its own (VictoriaMetrics runs its background mergers until Close).
func Open(opts Options) (db *DB, err error) {
	def := DefaultOptions()
	if opts.Path == "" {
		return nil, errors.New("open storage: empty data path")
	}
	if opts.RetentionRaw <= 0 {
		opts.RetentionRaw = def.RetentionRaw
	}
	if opts.RetentionRaw < 24*time.Hour {
		return nil, fmt.Errorf("open storage: raw retention %s is below the minimum of 24h", opts.RetentionRaw)
	}
	if opts.Retention1m <= 0 {
		opts.Retention1m = max(def.Retention1m, opts.RetentionRaw)
	}
	if opts.Retention5m <= 0 {
		opts.Retention5m = max(def.Retention5m, opts.Retention1m)
	}
	if opts.Retention1m < opts.RetentionRaw || opts.Retention5m < opts.Retention1m {
		return nil, fmt.Errorf("open storage: retention must grow with the tier (raw %s <= 1m %s <= 5m %s)",
			opts.RetentionRaw, opts.Retention1m, opts.Retention5m)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxSeriesPerQuery <= 0 {
		opts.MaxSeriesPerQuery = def.MaxSeriesPerQuery
	}
	if opts.MaxSamplesPerQuery <= 0 {
		opts.MaxSamplesPerQuery = def.MaxSamplesPerQuery
	}
	if opts.RollupPageSize <= 0 {
		opts.RollupPageSize = def.RollupPageSize
	}
	if opts.MaxSeries < 0 {
		return nil, fmt.Errorf("open storage: negative max_series %d", opts.MaxSeries)
	}
	if opts.MemoryBudget < 0 {
		return nil, fmt.Errorf("open storage: negative memory budget %d", opts.MemoryBudget)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := vmInit(opts.MemoryBudget, opts.MinFreeDisk, opts.Logger); err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}

	rawPath := filepath.Join(opts.Path, "tsdb", "raw")
	if err := checkWritableDir(rawPath); err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}

	// Damaged files are refused here, with the file and the fix named,
	// before VictoriaMetrics or bbolt panic on them (open_check.go).
	statePath := filepath.Join(opts.Path, "state.db")
	if err := checkStateFile(statePath, opts.Path, opts.StartFresh); err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}
	if err := checkTiers(opts.Path); err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}
	state, err := openState(statePath)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = state.Close()
		}
	}()

	meta, err := loadMetadata(state, log)
	if err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}

	tiers, err := openTiers(opts.Path, opts)
	if err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}
	vm, err := openVM(rawPath, opts.RetentionRaw, false)
	if err != nil {
		for _, ts := range tiers[TierRaw+1:] {
			_ = closeVM(ts.vm)
		}
		return nil, fmt.Errorf("open raw tier %s: %w", rawPath, err)
	}
	tiers[TierRaw].vm = vm

	db = &DB{
		opts:       opts,
		logger:     log,
		vm:         vm,
		tiers:      tiers,
		state:      state,
		names:      newSeriesCache(seriesCacheSize(opts.MemoryBudget)),
		recent:     newRecentWindow(opts.Now, maxRecentSeries(opts.MemoryBudget), log),
		head:       newHead(nil),
		meta:       meta,
		addRowsSem: make(chan struct{}, runtime.GOMAXPROCS(0)),
	}
	db.recent.fill = func(name string, mint, maxt int64) ([]*series, error) {
		ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name)}
		return db.readRaw(context.Background(), ms, readDefault, mint, maxt)
	}
	if opts.HeadBatchWrites {
		db.head.write = func(rows []vmstorage.MetricRow) error {
			if err := db.addRows(rows); err != nil {
				db.metrics.appendErrors(reasonWrite, len(rows))
				db.logger.Warn("cannot write the head's samples to the raw tier", "samples", len(rows), "err", err)
				return err
			}
			return nil
		}
	}
	if opts.MaxSeries > 0 {
		db.guard = newSeriesGuard(opts.MaxSeries, opts.Now())
	}
	db.minT.Store(math.MaxInt64)
	db.maxT.Store(math.MinInt64)
	db.disk = newDiskGuard(opts.Path, opts.MinFreeDisk, opts.FreeDiskBytes)
	db.metrics = newDBMetrics(db, opts.Registerer)
	db.metrics.collectors = append(db.metrics.collectors, db.durabilityCollectors()...)
	if err := db.openWAL(); err != nil {
		db.metrics.reg = nil // nothing registered yet
		_ = db.Close()
		return nil, fmt.Errorf("open storage: %w", err)
	}
	if err := db.metrics.register(); err != nil {
		db.metrics.reg = nil // nothing to unregister
		_ = db.Close()
		return nil, fmt.Errorf("open storage: register metrics: %w", err)
	}
	return db, nil
}

// vmCacheDir is where VictoriaMetrics keeps its caches under a storage
// path.
const vmCacheDir = "cache"

// openVM opens VictoriaMetrics storage and turns its panics (a corrupt
// part, a lock held by another process, a disk error) into an error.
//
// globalIndexOnly turns VictoriaMetrics' per-day index off: the rollup
// tiers hold the same long-lived series over months, where a per-day
// index costs disk for every series on every day and turns a 90-day
// search into 90 searches, and buys nothing (it pays off only when series
// come and go; VictoriaMetrics' -disablePerDayIndex).
func openVM(path string, retention time.Duration, globalIndexOnly bool) (vm *vmstorage.Storage, err error) {
	defer func() {
		if r := recover(); r != nil {
			vm = nil
			err = fmt.Errorf("victoriametrics: %v; check the disk and the directory permissions, and that no other appliance uses it", r)
		}
	}()
	return vmstorage.MustOpenStorage(path, vmstorage.OpenOptions{
		Retention:          retention,
		FutureRetention:    futureRetention,
		DisablePerDayIndex: globalIndexOnly,
	}), nil
}

// checkWritableDir creates dir if needed and proves a file can be written
// and synced there, so that VictoriaMetrics does not panic on first write.
func checkWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable: %w", dir, err)
	}
	name := f.Name()
	defer os.Remove(name)
	if _, err := f.Write([]byte("ok")); err != nil {
		f.Close()
		return fmt.Errorf("write to data directory %s: %w", dir, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync data directory %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write to data directory %s: %w", dir, err)
	}
	return nil
}

// seriesCacheSize is the number of label sets whose marshalled VM name the
// appenders keep: about 1/8 of the memory budget at ~200 bytes a series.
func seriesCacheSize(budget int64) int {
	if budget <= 0 {
		budget = vmMemoryBudget
	}
	return int(min(max(budget/8/200, 100_000), 4_000_000))
}

// Close flushes pending samples to disk and closes VictoriaMetrics and the
// state file. It is safe to call more than once; appenders and queriers used
// afterwards return ErrClosed.
func (db *DB) Close() (err error) {
	db.closeMu.Lock()
	defer db.closeMu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	db.metrics.unregister()
	if db.head.write != nil {
		// The head's samples reach the raw tier before it closes.
		if e := db.head.flush(func() {}, true); e != nil {
			err = fmt.Errorf("write the head to the raw tier: %w", e)
		}
	}
	for _, ts := range db.tiers {
		if e := closeVM(ts.vm); e != nil {
			err = errors.Join(err, fmt.Errorf("close tier %s: %w", ts.tier, e))
			continue
		}
		if ts.tier != TierRaw {
			// VictoriaMetrics saves its lookup caches (metric name to
			// series ID and back) at close, a few MiB per store however
			// few its series. A rollup tier's series are looked up
			// once by the first rollup after a restart, so the caches
			// buy nothing there; the raw tier's speed up ingestion
			// after a restart and stay.
			if e := os.RemoveAll(filepath.Join(ts.path, vmCacheDir)); e != nil {
				err = errors.Join(err, fmt.Errorf("remove tier %s caches: %w", ts.tier, e))
			}
		}
	}
	if db.wal != nil {
		// Only after every tier wrote everything may the WAL go.
		if e := db.wal.close(err == nil); e != nil {
			err = errors.Join(err, e)
		}
	}
	if e := db.state.Close(); e != nil {
		err = errors.Join(err, fmt.Errorf("close state file: %w", e))
	}
	return err
}

// Flush makes everything written so far searchable in VictoriaMetrics
// itself (its DebugFlush on every tier) and trims the head, which showed
// the raw samples to queries until then. Committed samples are queryable
// at once whether Flush is called or not (the head), and become durable
// on VM's own schedule (a few seconds to disk; the WAL before that).
func (db *DB) Flush() {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return
	}
	_ = db.head.flush(func() { // a failed write is counted and logged
		for _, ts := range db.tiers {
			ts.debugFlush()
		}
	}, true)
}

// State returns the bbolt file for state that is not a time series. Each
// package uses its own bucket; the storage package uses "storage.metadata".
// It must not be used after Close.
func (db *DB) State() *bbolt.DB { return db.state }

// ActiveSeries is the number of series that received samples in the current
// or the previous hour (VictoriaMetrics' hour index), the closest figure to
// Prometheus' head series.
func (db *DB) ActiveSeries() int {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return 0
	}
	var m vmstorage.Metrics
	db.vm.UpdateMetrics(&m)
	return int(m.HourMetricIDCacheSize)
}

// readLock takes the close lock for an operation on vm.
func (db *DB) readLock() error {
	db.closeMu.RLock()
	if db.closed {
		db.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (db *DB) readUnlock() { db.closeMu.RUnlock() }

// noteTimeRange widens the committed time range seen since Open.
func (db *DB) noteTimeRange(minT, maxT int64) {
	for {
		cur := db.minT.Load()
		if minT >= cur || db.minT.CompareAndSwap(cur, minT) {
			break
		}
	}
	for {
		cur := db.maxT.Load()
		if maxT <= cur || db.maxT.CompareAndSwap(cur, maxT) {
			break
		}
	}
}
