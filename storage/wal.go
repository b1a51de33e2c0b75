package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/record"
	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"
)

// walDirName is the write-ahead log's directory under Options.Path.
const walDirName = "wal"

const (
	// walCutInterval is how often the WAL starts a new generation: a new
	// segment whose first records name again every series they use, so
	// that the segments before it can be deleted on their own.
	walCutInterval = 30 * time.Second
	// walKeep is how long a finished generation is kept after the next one
	// started. The head hands a sample to VictoriaMetrics at its next
	// flush: the downsampler's once a minute, or a Commit's when nothing
	// flushed for headFlushAfter (30 s); VictoriaMetrics writes the
	// in-memory parts a flush makes to files within 5 s
	// (dataFlushInterval), the index the same way. A sample is thus on
	// disk at most about 65 s after its commit; 90 s leaves room for
	// merges that run behind. The WAL therefore holds about
	// walCutInterval+walKeep of ingest, and a restart after kill -9
	// replays at most that much.
	walKeep = 90 * time.Second
	// walMaxSamplesPerRecord splits a huge commit (a big text import)
	// into records far below a segment's size.
	walMaxSamplesPerRecord = 50_000
	// walBytesPerSample is what Commit books against the free-disk
	// watermark per sample: the WAL's share (a samples record is about
	// 2-9 bytes a sample after snappy) plus VictoriaMetrics' in-memory
	// parts written to files before they are merged, rounded up.
	walBytesPerSample = 16
	// indexBytesPerNameByte is what a new series costs the index per byte
	// of its name: VictoriaMetrics writes it in about five index items
	// (name to ID and back, each label to IDs, and the per-day copies),
	// measured 2.2 KB for a 430-byte name before compression. New series
	// dominate a fill: without them a push of new 400-byte series outran
	// the watermark on a 64 MiB tmpfs (e2e TestDiskFullTurnsReadOnly).
	indexBytesPerNameByte = 6
)

// wal is the write-ahead log of committed samples: Prometheus' tsdb/wlog
// (32 KiB pages with CRCs, 128 MiB segments, snappy) holding
// tsdb/record series and samples records, keyed by the appender's series
// refs (the labels' hash, see seriesCache).
//
// Generations. Every walCutInterval the log moves to a new segment and
// forgets which series it has named, so each generation (the segments from
// one cut to the next) names every series it uses before its samples. A
// generation is deleted whole, walKeep after the next one started, by
// which time VictoriaMetrics has all of its samples on disk.
//
// A wal is safe for concurrent use.
type wal struct {
	w      *wlog.WL
	logger *slog.Logger
	now    func() time.Time

	mu sync.Mutex
	// gen numbers the current generation for the series cache's entries:
	// an entry whose walGen is gen was named by a series record in it,
	// by the small ref walID (sequential numbers delta-encode in 1-3 bytes
	// where the appenders' hash refs take 9-10: 16.4 bytes a sample in
	// BenchmarkWALLog with hash refs). Starting a generation, or
	// forgetting what this one named, is gen+1. The refs are never
	// reused, so one ref names one series in the whole log.
	gen      uint64
	nextRef  chunks.HeadSeriesRef
	enc      record.Encoder
	buf      []byte
	series   []record.RefSeries
	samples  []record.RefSample
	ids      []chunks.HeadSeriesRef // the commit's rows' record refs
	lb       labels.ScratchBuilder
	mn       vmstorage.MetricName
	genFirst int       // first segment of the current generation
	genStart time.Time // when it started
	done     []walGen  // finished generations, oldest first
	seq      uint64    // commits logged

	// syncMu serialises fsyncs; synced is the last seq known on disk.
	// Concurrent committers that ask for an fsync share one (group commit).
	syncMu sync.Mutex
	synced uint64
}

// walGen is a finished generation: segments [first, end).
type walGen struct {
	first, end int
	ended      time.Time
}

// openWAL opens (or creates) the log in dir for writing. It does not read
// the old segments: replayWAL does, and then calls startAfterReplay.
func openWAL(dir string, logger *slog.Logger, now func() time.Time) (*wal, error) {
	w, err := wlog.NewSize(logger, nil, dir, wlog.DefaultSegmentSize, compression.Snappy)
	if err != nil {
		return nil, fmt.Errorf("open write-ahead log %s: %w", dir, err)
	}
	if now == nil {
		now = time.Now
	}
	return &wal{w: w, logger: logger, now: now, gen: 1, lb: labels.NewScratchBuilder(8)}, nil
}

// startAfterReplay begins the first generation at the current segment and
// books every older segment (replayed into the store) as a finished
// generation, deleted walKeep from now.
func (l *wal) startAfterReplay() error {
	first, last, err := wlog.Segments(l.w.Dir())
	if err != nil {
		return fmt.Errorf("list write-ahead log segments: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.genFirst, l.genStart = last, l.now()
	if first >= 0 && first < last {
		l.done = append(l.done, walGen{first: first, end: last, ended: l.genStart})
	}
	return nil
}

// log appends one commit: a series record for every series not named yet
// in this generation, then its samples. rows and ents (the rows' series
// cache entries) are parallel. It returns the commit's sequence number,
// for sync.
func (l *wal) log(rows []vmstorage.MetricRow, ents []*seriesEntry) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.maybeCutLocked(); err != nil {
		return 0, err
	}
	l.series = l.series[:0]
	l.ids = l.ids[:0]
	buf := append(l.buf[:0], byte(record.Series))
	for i := range rows {
		e := ents[i]
		if e.walGen != l.gen {
			l.nextRef++
			e.walID, e.walGen = l.nextRef, l.gen // also de-duplicates within this commit
			var ok bool
			if buf, ok = appendRawSeries(buf, e.walID, e.raw); !ok {
				// Not in label order (no appender makes such a name):
				// through the labels, which sorts them.
				if err := l.mn.UnmarshalRaw(e.raw); err != nil {
					l.forgetLocked()
					return 0, fmt.Errorf("write-ahead log: series name: %w", err)
				}
				l.series = append(l.series, record.RefSeries{Ref: e.walID, Labels: metricNameToLabels(&l.lb, &l.mn)})
			}
		}
		l.ids = append(l.ids, e.walID)
	}
	if len(l.series) > 0 {
		// Appends to the record of the others: a series record is its
		// type byte, then the series one after another.
		buf = append(buf, l.enc.Series(l.series, nil)[1:]...)
	}
	recs := make([][]byte, 0, 2+len(rows)/walMaxSamplesPerRecord)
	if len(buf) > 1 {
		recs = append(recs, buf)
	} else {
		buf = buf[:0]
	}
	for start := 0; start < len(rows); start += walMaxSamplesPerRecord {
		end := min(start+walMaxSamplesPerRecord, len(rows))
		l.samples = l.samples[:0]
		for i := start; i < end; i++ {
			l.samples = append(l.samples, record.RefSample{Ref: l.ids[i], T: rows[i].Timestamp, V: rows[i].Value})
		}
		n := len(buf)
		buf = l.enc.Samples(l.samples, buf)
		recs = append(recs, buf[n:])
	}
	l.buf = buf
	if err := l.w.Log(recs...); err != nil {
		l.forgetLocked()
		return 0, fmt.Errorf("write-ahead log: %w", err)
	}
	l.seq++
	return l.seq, nil
}

// forgetLocked drops what this generation named: after a failed write
// the series records of the commit may not be on disk, so every series is
// named again.
func (l *wal) forgetLocked() {
	l.gen++
}

// appendRawSeries appends one series of a series record (tsdb/record's
// encoding: the ref in 8 bytes big-endian, the number of labels, each
// name and value with its length as a uvarint) from a raw name, without
// decoding it into labels. It returns false, and dst as it was, when the
// raw name is malformed or its labels are not in label order (a series
// record's labels must be: the reader does not sort them).
func appendRawSeries(dst []byte, ref chunks.HeadSeriesRef, raw []byte) ([]byte, bool) {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(ref))
	n := 0
	for rest := raw; len(rest) > 0; n++ {
		kl, vl, ok := rawLabelLens(rest)
		if !ok {
			return dst[:start], false
		}
		rest = rest[4+kl+vl:]
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	var prev []byte
	for rest := raw; len(rest) > 0; {
		kl, vl, _ := rawLabelLens(rest)
		name, value := rest[2:2+kl], rest[4+kl:4+kl+vl]
		if kl == 0 {
			name = metricNameBytes
		}
		if prev != nil && bytes.Compare(prev, name) >= 0 {
			return dst[:start], false
		}
		prev = name
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		dst = append(dst, name...)
		dst = binary.AppendUvarint(dst, uint64(len(value)))
		dst = append(dst, value...)
		rest = rest[4+kl+vl:]
	}
	return dst, true
}

var metricNameBytes = []byte(labels.MetricName)

// sync makes every commit up to seq survive a power loss (fsync). A caller
// that finds its commit synced by another's fsync returns at once.
func (l *wal) sync(seq uint64) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.synced >= seq {
		return nil
	}
	l.mu.Lock()
	upTo := l.seq
	err := l.w.Sync()
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("sync write-ahead log: %w", err)
	}
	l.synced = upTo
	return nil
}

// maybeCutLocked starts a new generation when the current one is
// walCutInterval old, and deletes the generations VictoriaMetrics has had
// walKeep to write.
func (l *wal) maybeCutLocked() error {
	now := l.now()
	if now.Sub(l.genStart) >= walCutInterval {
		// Synchronously: the previous segment is fsynced before the new
		// generation starts, so a generation never depends on an
		// unsynced predecessor.
		seg, err := l.w.NextSegmentSync()
		if err != nil {
			return fmt.Errorf("write-ahead log: next segment: %w", err)
		}
		l.done = append(l.done, walGen{first: l.genFirst, end: seg, ended: now})
		l.genFirst, l.genStart = seg, now
		l.gen++
	}
	keep := 0
	truncateBefore := -1
	for i, g := range l.done {
		if now.Sub(g.ended) < walKeep {
			break
		}
		truncateBefore, keep = g.end, i+1
	}
	if truncateBefore < 0 {
		return nil
	}
	if err := l.w.Truncate(truncateBefore); err != nil {
		// Not fatal: the segments are deleted on the next try, and the
		// free-disk watermark still bounds the total.
		l.logger.Warn("cannot delete old write-ahead log segments", "before", truncateBefore, "err", err)
		return nil
	}
	l.done = append(l.done[:0], l.done[keep:]...)
	return nil
}

// size is the bytes the log holds on disk.
func (l *wal) size() int64 {
	n, err := l.w.Size()
	if err != nil {
		return 0
	}
	return n
}

// close closes the log. With clean set (the store was closed and wrote
// everything), every segment is deleted: nothing needs replaying.
func (l *wal) close(clean bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Close(); err != nil {
		return fmt.Errorf("close write-ahead log: %w", err)
	}
	if !clean {
		return nil
	}
	entries, err := os.ReadDir(l.w.Dir())
	if err != nil {
		return fmt.Errorf("clear write-ahead log: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(l.w.Dir(), e.Name())); err != nil {
			return fmt.Errorf("clear write-ahead log: %w", err)
		}
	}
	return nil
}

// syncCommitKey marks a context whose appenders fsync the WAL at Commit.
type syncCommitKey struct{}

// WithSyncCommit returns a context whose appenders (AppenderV2(ctx)) fsync
// the write-ahead log before Commit returns, so that their samples survive
// a power loss and not only a crash of the process. The HTTP ingest
// (remote write, text import) uses it: those senders drop their copy on
// 2xx. Scrapes and rules do not: they lose at most what the OS had not
// written at a power loss, and a scrape repeats every interval.
func WithSyncCommit(ctx context.Context) context.Context {
	return context.WithValue(ctx, syncCommitKey{}, true)
}

func syncCommit(ctx context.Context) bool {
	v, _ := ctx.Value(syncCommitKey{}).(bool)
	return v
}

// logCommit is Commit's first step: check the free-disk watermark, then
// write the commit to the WAL (and fsync it when asked). Replayed samples
// skip both: they were acknowledged before the restart.
func (db *DB) logCommit(a *appender) error {
	if a.replay {
		return nil
	}
	newNames := db.names.takeNewNameBytes()
	need := uint64(len(a.rows))*walBytesPerSample + newNames*indexBytesPerNameByte
	if err := db.disk.reserve(need, a.self); err != nil {
		if db.disk.takeEntered() {
			// Make what was acknowledged before the watermark searchable
			// now: VictoriaMetrics' own flush of its pending rows was seen
			// to stall for more than 10 s on a nearly full disk
			// (e2e TestDiskFullTurnsReadOnly). Commit holds the read lock.
			db.vm.DebugFlush()
		}
		db.names.newNameBytes.Add(newNames) // not stored: book them with the next commit
		db.metrics.appendErrors(reasonDiskFull, len(a.rows))
		db.disk.rejected.Add(float64(len(a.rows)))
		return err
	}
	if db.wal == nil {
		return nil
	}
	seq, err := db.wal.log(a.rows, a.ents)
	if err == nil && a.sync {
		err = db.wal.sync(seq)
	}
	if err != nil {
		db.metrics.appendErrors(reasonWAL, len(a.rows))
		return err
	}
	return nil
}

// IngestError says whether the DB takes new samples: nil, or the
// ErrDiskFull error with the free bytes and the limit. /-/ready and the
// HTTP ingest ask it.
func (db *DB) IngestError() error {
	err := db.disk.status()
	if err != nil && db.disk.takeEntered() {
		db.Flush() // see logCommit
	}
	return err
}

// openWAL opens the write-ahead log under Options.Path and replays what
// an earlier process left in it.
func (db *DB) openWAL() error {
	if db.opts.DisableWAL {
		return nil
	}
	dir := filepath.Join(db.opts.Path, walDirName)
	l, err := openWAL(dir, db.logger, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	n, err := db.replayWAL(l)
	if err != nil {
		_ = l.close(false)
		return err
	}
	if n > 0 {
		// Searchable at once, as before the crash.
		db.Flush()
		db.logger.Info("replayed the write-ahead log", "samples", n, "took", time.Since(start).Round(time.Millisecond))
	}
	db.walReplayed.Add(float64(n))
	db.wal = l
	return nil
}

// durabilityCollectors are the WAL's and the watermark's self-metrics.
func (db *DB) durabilityCollectors() []prometheus.Collector {
	db.walReplayed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "appliance_storage_wal_replayed_samples_total",
		Help: "Samples replayed from the write-ahead log at start (left by a crash).",
	})
	return append(db.disk.collectors(),
		db.walReplayed,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "appliance_storage_wal_bytes",
			Help: "Bytes the write-ahead log holds on disk.",
		}, func() float64 {
			if db.wal == nil {
				return 0
			}
			return float64(db.wal.size())
		}),
	)
}
