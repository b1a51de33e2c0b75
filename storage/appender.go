package storage

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/VictoriaMetrics/lib/decimal"
	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	promstorage "github.com/prometheus/prometheus/storage"
)

// Reasons a sample is not stored, the reason label of
// appliance_storage_append_errors_total.
const (
	reasonOutOfBounds     = "out_of_bounds"    // older than retention or > 2 days ahead; ErrOutOfBounds
	reasonNaN             = "nan"              // a NaN other than the staleness marker; dropped silently
	reasonNativeHistogram = "native_histogram" // ErrNativeHistogramsDisabled
	reasonInvalidLabels   = "invalid_labels"   // no labels, or a label VM cannot encode
	reasonClosed          = "closed"           // Commit after Close
	reasonWrite           = "write"            // VictoriaMetrics failed to add rows (disk)
	reasonDiskFull        = "disk_full"        // free disk below storage.min_free_disk; ErrDiskFull
	reasonWAL             = "wal"              // the write-ahead log could not be written
)

// AppenderV2 returns an appender for one scrape, rule evaluation or
// remote-write request. It buffers samples until Commit.
func (db *DB) AppenderV2(ctx context.Context) promstorage.AppenderV2 {
	a := db.newAppender()
	a.sync = syncCommit(ctx)
	return a
}

// Own returns an Appendable for the appliance's own series (rule
// results, ALERTS): the storage.max_series guard counts them and never
// refuses them, so alerts keep their state at the limit.
func (db *DB) Own() promstorage.AppendableV2 { return ownAppendable{db} }

type ownAppendable struct{ db *DB }

func (o ownAppendable) AppenderV2(ctx context.Context) promstorage.AppenderV2 {
	a := o.db.newAppender()
	a.sync = syncCommit(ctx)
	a.force = true
	return a
}

// Appender returns a Prometheus v1 appender (the rules manager uses it).
func (db *DB) Appender(_ context.Context) promstorage.Appender {
	a := db.newAppender()
	// Rule results are the appliance's own series: the series guard
	// counts them and never refuses them.
	a.force = true
	return &appenderV1{a: a}
}

// maxPooledRows is the largest row buffer kept for reuse: a big import
// should not pin its buffer for the life of the process.
const maxPooledRows = 1 << 18

var appenderPool sync.Pool

func (db *DB) newAppender() *appender {
	a, _ := appenderPool.Get().(*appender)
	if a == nil {
		a = &appender{}
	}
	a.db = db
	// Bounds are taken once per appender, not per sample; Commit checks
	// again with a fresh clock.
	wall := db.now()
	now := wall.UnixMilli()
	a.minT = now - db.oldestAccepted().Milliseconds()
	a.maxT = now + futureRetention.Milliseconds()
	a.wall = wall
	if db.guard != nil {
		db.guard.rotate(now)
	}
	return a
}

// appender buffers rows for VictoriaMetrics. It is not safe for concurrent
// use and must not be used after Commit or Rollback.
type appender struct {
	db *DB

	rows []vmstorage.MetricRow
	// refs are the rows' series refs, for the WAL's records; ents their
	// series cache entries, by which the WAL and the head find the series.
	refs    []uint64
	ents    []*seriesEntry
	scratch []byte
	// sync asks Commit to fsync the WAL (WithSyncCommit); replay marks
	// the appender of WAL replay, whose Commit does not log again.
	// self marks the appliance's own samples (Options.SelfMonitoring).
	sync, replay, self bool
	// force admits new series past storage.max_series (rules, replay).
	force bool

	minT, maxT int64
	wall       time.Time

	// batch hands the commit to the CommitSink without allocating.
	batch CommitBatch

	meta                []metaUpdate
	lastFamily          string
	lastMeta            metadata.Metadata
	droppedNaN, dropOOB int
}

func (a *appender) release() {
	if cap(a.rows) > maxPooledRows {
		a.rows = nil
	}
	if cap(a.refs) > maxPooledRows {
		a.refs = nil
	}
	if cap(a.ents) > maxPooledRows {
		a.ents = nil
	}
	clear(a.rows) // drop references to cached names
	clear(a.ents)
	a.rows = a.rows[:0]
	a.refs = a.refs[:0]
	a.ents = a.ents[:0]
	a.sync, a.replay, a.self, a.force = false, false, false, false
	a.meta = a.meta[:0]
	a.lastFamily, a.lastMeta = "", metadata.Metadata{}
	a.droppedNaN, a.dropOOB = 0, 0
	a.db = nil
	appenderPool.Put(a)
}

// Append implements storage.AppenderV2. Exemplars and the start timestamp
// are accepted and not stored.
func (a *appender) Append(ref promstorage.SeriesRef, ls labels.Labels, _, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts promstorage.AppendV2Options) (promstorage.SeriesRef, error) {
	if h != nil || fh != nil {
		a.db.metrics.appendErrors(reasonNativeHistogram, 1)
		return ref, promstorage.ErrNativeHistogramsDisabled
	}
	ref, err := a.appendFloat(ref, ls, t, v)
	if err != nil {
		return ref, err
	}
	if opts.Metadata != (metadata.Metadata{}) {
		a.noteMetadata(opts.MetricFamilyName, ls, opts.Metadata)
	}
	return ref, nil
}

func (a *appender) appendFloat(ref promstorage.SeriesRef, ls labels.Labels, t int64, v float64) (promstorage.SeriesRef, error) {
	ref, e, scratch, added, err := a.db.names.lookup(ref, ls, a.scratch)
	a.scratch = scratch
	if err != nil {
		a.db.metrics.appendErrors(reasonInvalidLabels, 1)
		return 0, fmt.Errorf("series %s: %w", SeriesPrefix(ls), err)
	}
	if t < a.minT || t > a.maxT {
		a.dropOOB++
		return ref, promstorage.ErrOutOfBounds
	}
	if math.IsNaN(v) && !decimal.IsStaleNaN(v) {
		// VictoriaMetrics' decimal encoding has no NaN other than the
		// staleness marker and drops such rows; count them here instead.
		a.droppedNaN++
		return ref, nil
	}
	if len(a.rows) == 0 && a.db.opts.SelfMonitoring != nil {
		// One scrape is one target: its first series says whose it is.
		a.self = a.db.opts.SelfMonitoring(ls)
	}
	if g := a.db.guard; g != nil && !g.admit(uint64(ref), a.force || a.replay || a.self) {
		if added {
			// Not stored: its name books no index space (diskspace.go).
			a.db.names.unbook(len(e.raw))
		}
		return 0, g.refuse(ls, a.wall)
	}
	a.rows = append(a.rows, vmstorage.MetricRow{MetricNameRaw: e.raw, Timestamp: t, Value: v})
	a.refs = append(a.refs, uint64(ref))
	a.ents = append(a.ents, e)
	return ref, nil
}

// noteMetadata stages metadata for Commit if it differs from what is stored.
// It allocates only when the metadata changed.
func (a *appender) noteMetadata(family string, ls labels.Labels, m metadata.Metadata) {
	if family == "" {
		family = familyFromName(ls.Get(labels.MetricName), m.Type)
	}
	if family == "" || (family == a.lastFamily && m == a.lastMeta) {
		return
	}
	if owned, same := a.db.meta.same(family, m); same {
		a.lastFamily, a.lastMeta = owned, m
		return
	}
	// Later samples of the family in this batch skip the lookup.
	a.lastFamily, a.lastMeta = strings.Clone(family), m
	a.meta = append(a.meta, metaUpdate{family: a.lastFamily, m: m})
}

// Commit writes the buffered rows to VictoriaMetrics. Rows whose timestamp
// fell out of the accepted range since Append are dropped and counted.
func (a *appender) Commit() (err error) {
	defer a.release()
	db := a.db
	if a.droppedNaN > 0 {
		db.metrics.appendErrors(reasonNaN, a.droppedNaN)
	}
	if a.dropOOB > 0 {
		db.metrics.appendErrors(reasonOutOfBounds, a.dropOOB)
	}
	if len(a.rows) == 0 && len(a.meta) == 0 {
		return nil
	}
	if err := db.readLock(); err != nil {
		if len(a.rows) > 0 {
			db.metrics.appendErrors(reasonClosed, len(a.rows))
		}
		return err
	}
	defer db.readUnlock()
	if len(a.meta) > 0 {
		if err := db.meta.set(a.meta); err != nil {
			db.logger.Warn("cannot persist metric metadata", "err", err)
		}
	}
	if len(a.rows) == 0 {
		return nil
	}
	// Acknowledged means durable: the samples reach the WAL before
	// anything else (and before Commit returns to the HTTP handler).
	if err := db.logCommit(a); err != nil {
		return err
	}

	now := db.now().UnixMilli()
	lo, hi := now-db.oldestAccepted().Milliseconds(), now+futureRetention.Milliseconds()
	rawLo := now - db.opts.RetentionRaw.Milliseconds()
	minT, maxT := int64(math.MaxInt64), int64(math.MinInt64)
	rows, refs, ents := a.rows[:0], a.refs[:0], a.ents[:0]
	var (
		old     []vmstorage.MetricRow
		oldRefs []uint64
	)
	for i, r := range a.rows {
		if r.Timestamp < lo || r.Timestamp > hi {
			continue
		}
		if r.Timestamp < rawLo {
			old = append(old, r)
			oldRefs = append(oldRefs, a.refs[i])
			continue
		}
		minT, maxT = min(minT, r.Timestamp), max(maxT, r.Timestamp)
		rows = append(rows, r)
		refs = append(refs, a.refs[i])
		ents = append(ents, a.ents[i])
	}
	if n := len(a.rows) - len(rows) - len(old); n > 0 {
		db.metrics.appendErrors(reasonOutOfBounds, n)
	}
	// Remote write out gets what is stored, before it is stored: a
	// failure below is the local disk's, not the remote's.
	db.teeCommit(a, rows, refs)
	db.teeCommit(a, old, oldRefs)
	if len(old) > 0 {
		if err := db.rollupOld(old); err != nil {
			db.metrics.appendErrors(reasonWrite, len(old))
			return err
		}
		db.metrics.samplesAppended.Add(float64(len(old)))
	}
	if len(rows) == 0 {
		return nil
	}
	if db.head.write == nil {
		if err := db.addRows(rows); err != nil {
			db.metrics.appendErrors(reasonWrite, len(rows))
			return err
		}
	}
	// Queryable from here on: the head shows the rows until
	// VictoriaMetrics does (head.go). Only after AddRows returned, so a
	// flush that closes this generation finds them in VictoriaMetrics;
	// with HeadBatchWrites the flush writes them itself.
	if skipped := db.head.add(rows, refs, ents, nil); len(skipped) > 0 && db.head.write != nil {
		if err := db.addRows(skipped); err != nil {
			db.metrics.appendErrors(reasonWrite, len(skipped))
			return err
		}
	}
	if db.head.due() {
		// Nothing flushed for a while (no downsampler): bound the head.
		// The read lock is held already; a failed write is counted.
		_ = db.head.flush(db.tiers[TierRaw].debugFlush, false)
	}
	db.recent.add(rows)
	db.metrics.samplesAppended.Add(float64(len(rows)))
	db.noteTimeRange(minT, maxT)
	db.noteCommitted(minT, maxT)
	return nil
}

// oldestAccepted is the age past which Append refuses a sample: the
// longest retention of any tier. Samples older than the raw retention are
// rolled up at Commit straight into the tiers that keep their time.
func (db *DB) oldestAccepted() time.Duration {
	return max(db.opts.RetentionRaw, db.opts.Retention1m, db.opts.Retention5m)
}

// addRows hands rows to VictoriaMetrics, at most GOMAXPROCS calls at a time,
// and turns its panics (disk errors) into an error.
func (db *DB) addRows(rows []vmstorage.MetricRow) (err error) {
	db.addRowsSem <- struct{}{}
	defer func() {
		<-db.addRowsSem
		if r := recover(); r != nil {
			err = fmt.Errorf("write samples to raw tier: %v", r)
		}
	}()
	vmAddRows(db.vm, rows, precisionBits)
	return nil
}

// AppendExemplars implements storage.ExemplarAppenderV2, which Prometheus'
// remote-write receiver requires. There is no exemplar storage: the
// exemplars are accepted and dropped, as Append does with inline ones.
func (a *appender) AppendExemplars(ref promstorage.SeriesRef, _ labels.Labels, _ []exemplar.Exemplar) (promstorage.SeriesRef, error) {
	return ref, nil
}

var _ promstorage.ExemplarAppenderV2 = (*appender)(nil)

// Rollback drops the buffered rows and metadata.
func (a *appender) Rollback() error {
	a.release()
	return nil
}

// appenderV1 adapts the appender to Prometheus' v1 Appender interface.
type appenderV1 struct {
	a *appender
}

func (a *appenderV1) Append(ref promstorage.SeriesRef, l labels.Labels, t int64, v float64) (promstorage.SeriesRef, error) {
	return a.a.appendFloat(ref, l, t, v)
}

func (a *appenderV1) Commit() error   { return a.a.Commit() }
func (a *appenderV1) Rollback() error { return a.a.Rollback() }

func (*appenderV1) SetOptions(*promstorage.AppendOptions) {}

// AppendExemplar accepts and drops the exemplar: there is no exemplar storage.
func (*appenderV1) AppendExemplar(ref promstorage.SeriesRef, _ labels.Labels, _ exemplar.Exemplar) (promstorage.SeriesRef, error) {
	return ref, nil
}

func (a *appenderV1) AppendHistogram(ref promstorage.SeriesRef, _ labels.Labels, _ int64, _ *histogram.Histogram, _ *histogram.FloatHistogram) (promstorage.SeriesRef, error) {
	a.a.db.metrics.appendErrors(reasonNativeHistogram, 1)
	return ref, promstorage.ErrNativeHistogramsDisabled
}

func (a *appenderV1) AppendHistogramSTZeroSample(ref promstorage.SeriesRef, _ labels.Labels, _, _ int64, _ *histogram.Histogram, _ *histogram.FloatHistogram) (promstorage.SeriesRef, error) {
	a.a.db.metrics.appendErrors(reasonNativeHistogram, 1)
	return ref, promstorage.ErrNativeHistogramsDisabled
}

// AppendSTZeroSample accepts and ignores the start timestamp: no synthetic
// zero sample is written.
func (*appenderV1) AppendSTZeroSample(ref promstorage.SeriesRef, _ labels.Labels, _, _ int64) (promstorage.SeriesRef, error) {
	return ref, nil
}

// UpdateMetadata stages metadata for the series' metric family until Commit.
func (a *appenderV1) UpdateMetadata(ref promstorage.SeriesRef, l labels.Labels, m metadata.Metadata) (promstorage.SeriesRef, error) {
	a.a.noteMetadata("", l, m)
	return ref, nil
}
