package remotewrite

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/record"
	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"

	"github.com/aiserve/appliance/storage"
)

const (
	// ackFile holds the sender's position: segment, records sent, samples
	// sent in it.
	ackFile = "ack"
	// wlogSegmentSize is the wlog's own segment size; the queue cuts
	// segments itself well below it (cutSize), so that every segment
	// starts by naming its series.
	wlogSegmentSize = 128 << 20
	// maxCutSize and minCutSize bound a segment's size.
	maxCutSize = 16 << 20
	minCutSize = 64 << 10
	// maxSamplesPerRecord splits a big commit (an import) into records.
	maxSamplesPerRecord = 5000
	// ackInterval is how often the sender's position is written while
	// it sends: rewriting the file after every request took 44% of the
	// sender's CPU (a profile of 210k samples in 2000-sample requests).
	// A crash resends at most this much (at least once); finishing a
	// segment and closing write it at once.
	ackInterval = time.Second
)

// segInfo is one segment of the queue.
type segInfo struct {
	idx     int
	samples int64 // samples written to it
	bytes   int64 // on disk (closed) or an estimate (the current one)
}

// queue is one remote's durable queue. The writer (Committed) and the
// sender (readSegment and ack) share it; mu guards the fields below it.
type queue struct {
	dir     string
	logger  *slog.Logger
	maxDisk int64
	cutSize int64
	wl      *wlog.WL
	// process turns a stored series into the series sent (external
	// labels, write_relabel_configs); false drops it.
	process func(labels.Labels) (labels.Labels, bool)
	notify  chan struct{} // a write happened (capacity 1)
	m       *queueMetrics

	mu     sync.Mutex
	closed bool
	segs   []segInfo // oldest first; the last is the one written
	// known maps the storage's series refs named in the current segment
	// to the queue's series ids; 0: dropped by relabelling.
	known   map[uint64]chunks.HeadSeriesRef
	nextID  chunks.HeadSeriesRef
	enc     record.Encoder
	buf     []byte
	series  []record.RefSeries
	samples []record.RefSample
	sb      labels.ScratchBuilder
	// The sender's position: segment readSeg, readRecs records of it
	// sent, readSent samples of it sent (readSentAck at readRecs).
	readSeg               int
	readRecs              int
	readSent, readSentAck int64
	dropped               bool // the sender's segment was dropped
	// inflight are the samples of readSeg in the request being sent;
	// they are not counted as dropped with their segment unless the
	// sender gives the request up (abandon).
	inflight int64
	ackedAt  time.Time // when the position was last written
}

// openQueue opens (or creates) the queue in dir and counts what the
// segments an earlier process left hold. maxDisk bounds it.
func openQueue(dir string, maxDisk int64, logger *slog.Logger, m *queueMetrics, process func(labels.Labels) (labels.Labels, bool)) (*queue, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create remote write queue %s: %w", dir, err)
	}
	q := &queue{
		dir: dir, logger: logger, maxDisk: maxDisk, process: process, m: m,
		notify: make(chan struct{}, 1),
		known:  make(map[uint64]chunks.HeadSeriesRef),
		sb:     labels.NewScratchBuilder(16),
	}
	q.cutSize = min(max(maxDisk/8, minCutSize), maxCutSize)
	first, last, err := wlog.Segments(dir)
	if err != nil {
		return nil, fmt.Errorf("list remote write queue %s: %w", dir, err)
	}
	for i := first; first >= 0 && i <= last; i++ {
		info, err := countSegment(dir, i)
		if err != nil {
			return nil, err
		}
		q.segs = append(q.segs, info)
	}
	q.readSeg, q.readRecs, q.readSentAck = readAck(dir)
	q.readSent = q.readSentAck
	if len(q.segs) > 0 && q.readSeg < q.segs[0].idx {
		q.readSeg, q.readRecs, q.readSent, q.readSentAck = q.segs[0].idx, 0, 0, 0
	}
	// A new segment after the old ones (wlog starts one).
	q.wl, err = wlog.NewSize(logger, nil, dir, wlogSegmentSize, compression.Snappy)
	if err != nil {
		return nil, fmt.Errorf("open remote write queue %s: %w", dir, err)
	}
	_, cur, err := wlog.Segments(dir)
	if err != nil {
		_ = q.wl.Close()
		return nil, fmt.Errorf("list remote write queue %s: %w", dir, err)
	}
	q.segs = append(q.segs, segInfo{idx: cur})
	if len(q.segs) == 1 || q.readSeg > cur {
		q.readSeg, q.readRecs, q.readSent, q.readSentAck = q.segs[0].idx, 0, 0, 0
	}
	q.updatePendingLocked()
	return q, nil
}

// countSegment reads segment i and counts its samples.
func countSegment(dir string, i int) (segInfo, error) {
	info := segInfo{idx: i}
	f, err := os.Open(wlog.SegmentName(dir, i))
	if err != nil {
		return info, fmt.Errorf("read remote write queue: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		info.bytes = st.Size()
	}
	var (
		dec     = record.NewDecoder(nil, nil)
		samples []record.RefSample
	)
	r := wlog.NewLiveReader(nil, nil, f)
	for r.Next() {
		rec := r.Record()
		if dec.Type(rec) != record.Samples {
			continue
		}
		samples, err = dec.Samples(rec, samples[:0])
		if err != nil {
			break // a torn tail: what is before it counts
		}
		info.samples += int64(len(samples))
	}
	return info, nil
}

// readAck reads the sender's position; zeros when there is none.
func readAck(dir string) (seg, recs int, sent int64) {
	b, err := os.ReadFile(filepath.Join(dir, ackFile))
	if err != nil {
		return 0, 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, 0, 0
	}
	seg, _ = strconv.Atoi(f[0])
	recs, _ = strconv.Atoi(f[1])
	sent, _ = strconv.ParseInt(f[2], 10, 64)
	return seg, recs, sent
}

// write appends a commit's samples, named by series in this segment.
// It never fails the commit: a write error is logged and the samples are
// counted as dropped.
func (q *queue) write(b *storage.CommitBatch) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	n := b.Len()
	wrote := false
	for start := 0; start < n; start += maxSamplesPerRecord {
		if q.segs[len(q.segs)-1].bytes >= q.cutSize {
			if err := q.cutLocked(); err != nil {
				q.logger.Warn("remote write queue: cannot start a segment", "err", err)
			}
		}
		end := min(start+maxSamplesPerRecord, n)
		q.series, q.samples = q.series[:0], q.samples[:0]
		var maxT int64
		for i := start; i < end; i++ {
			ref := b.Ref(i)
			id, ok := q.known[ref]
			if !ok {
				ls, err := b.Labels(i, &q.sb)
				if err == nil {
					if out, keep := q.process(ls); keep {
						q.nextID++
						id = q.nextID
						q.series = append(q.series, record.RefSeries{Ref: id, Labels: out})
					}
				}
				q.known[ref] = id
			}
			if id == 0 {
				continue
			}
			t, v := b.Sample(i)
			maxT = max(maxT, t)
			q.samples = append(q.samples, record.RefSample{Ref: id, T: t, V: v})
		}
		if len(q.samples) == 0 {
			continue
		}
		recs := make([][]byte, 0, 2)
		buf := q.buf[:0]
		if len(q.series) > 0 {
			buf = q.enc.Series(q.series, buf)
			recs = append(recs, buf)
		}
		k := len(buf)
		buf = q.enc.Samples(q.samples, buf)
		recs = append(recs, buf[k:])
		q.buf = buf
		if err := q.wl.Log(recs...); err != nil {
			// The series records may be lost: name every series again.
			clear(q.known)
			q.logger.Warn("remote write queue: cannot write; samples dropped", "samples", len(q.samples), "err", err)
			q.m.dropped.Add(float64(len(q.samples)))
			continue
		}
		cur := &q.segs[len(q.segs)-1]
		cur.samples += int64(len(q.samples))
		cur.bytes += int64(len(buf))
		q.m.highestIn.Set(float64(maxT) / 1000)
		wrote = true
	}
	if !wrote {
		return
	}
	if b.Sync {
		if err := q.wl.Sync(); err != nil {
			q.logger.Warn("remote write queue: cannot fsync", "err", err)
		}
	}
	q.enforceBoundLocked()
	q.updatePendingLocked()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// cutLocked starts a new segment, which names its series anew.
func (q *queue) cutLocked() error {
	idx, err := q.wl.NextSegmentSync()
	if err != nil {
		return err
	}
	last := &q.segs[len(q.segs)-1]
	if st, err := os.Stat(wlog.SegmentName(q.dir, last.idx)); err == nil {
		last.bytes = st.Size()
	}
	q.segs = append(q.segs, segInfo{idx: idx})
	clear(q.known)
	return nil
}

// enforceBoundLocked drops the oldest segments while the queue holds more
// than maxDisk; the one being written stays.
func (q *queue) enforceBoundLocked() {
	var total int64
	for _, s := range q.segs {
		total += s.bytes
	}
	for total > q.maxDisk && len(q.segs) > 1 {
		s := q.segs[0]
		unsent := s.samples
		if s.idx == q.readSeg {
			unsent -= q.readSent + q.inflight
			q.dropped = true
		} else if s.idx < q.readSeg {
			unsent = 0
		}
		if err := os.Remove(wlog.SegmentName(q.dir, s.idx)); err != nil && !errors.Is(err, os.ErrNotExist) {
			q.logger.Warn("remote write queue: cannot delete a segment", "err", err)
			return
		}
		q.segs = q.segs[1:]
		total -= s.bytes
		if unsent > 0 {
			q.m.dropped.Add(float64(unsent))
			q.logger.Warn("remote write queue is full (max_disk_bytes): dropped its oldest samples", "samples", unsent, "max_disk_bytes", q.maxDisk)
		}
		if q.readSeg <= s.idx {
			q.readSeg, q.readRecs, q.readSent, q.readSentAck = q.segs[0].idx, 0, 0, 0
			q.inflight = 0
		}
	}
}

// updatePendingLocked sets samples_pending.
func (q *queue) updatePendingLocked() {
	var n int64
	for _, s := range q.segs {
		if s.idx >= q.readSeg {
			n += s.samples
		}
	}
	q.m.pending.Set(float64(n - q.readSent))
}

// position returns where the sender is: its segment, the records of it
// sent, and whether the writer has moved past that segment (it is
// complete). dropped reports (once) that the bound dropped the segment the
// sender was reading.
func (q *queue) position() (seg, recs int, complete, dropped bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	dropped, q.dropped = q.dropped, false
	return q.readSeg, q.readRecs, q.segs[len(q.segs)-1].idx > q.readSeg, dropped
}

// ack records that samples of segment seg were answered, up to record
// recs complete; the file is rewritten (at most every ackInterval) so that
// a restart resumes there. It returns false when the bound dropped that
// segment meanwhile.
func (q *queue) ack(seg, recs int, samples int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if seg != q.readSeg {
		return false
	}
	q.readSent += samples
	q.inflight = 0
	if recs > q.readRecs {
		q.readRecs = recs
		q.readSentAck = q.readSent
	}
	q.updatePendingLocked()
	if now := time.Now(); now.Sub(q.ackedAt) >= ackInterval {
		q.ackedAt = now
		_ = q.writeAckLocked()
	}
	return true
}

// finish marks segment seg as sent: it is deleted and the sender moves to
// the next one.
func (q *queue) finish(seg int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if seg != q.readSeg || q.closed {
		return
	}
	for len(q.segs) > 1 && q.segs[0].idx <= seg {
		if err := os.Remove(wlog.SegmentName(q.dir, q.segs[0].idx)); err != nil && !errors.Is(err, os.ErrNotExist) {
			q.logger.Warn("remote write queue: cannot delete a sent segment", "err", err)
		}
		q.segs = q.segs[1:]
	}
	q.readSeg, q.readRecs, q.readSent, q.readSentAck = q.segs[0].idx, 0, 0, 0
	q.updatePendingLocked()
	_ = q.writeAckLocked()
}

func (q *queue) writeAckLocked() error {
	tmp := filepath.Join(q.dir, ackFile+".tmp")
	s := fmt.Sprintf("%d %d %d\n", q.readSeg, q.readRecs, q.readSentAck)
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		q.logger.Warn("remote write queue: cannot write its position", "err", err)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(q.dir, ackFile)); err != nil {
		q.logger.Warn("remote write queue: cannot write its position", "err", err)
		return err
	}
	return nil
}

// close closes the queue; later writes are ignored.
func (q *queue) close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	_ = q.writeAckLocked()
	if err := q.wl.Close(); err != nil {
		return fmt.Errorf("close remote write queue %s: %w", q.dir, err)
	}
	return nil
}

// segmentReader reads one segment's records for the sender.
type segmentReader struct {
	f   *os.File
	r   *wlog.LiveReader
	idx int
	n   int // records read
}

func openSegmentReader(dir string, idx int) (*segmentReader, error) {
	f, err := os.Open(wlog.SegmentName(dir, idx))
	if err != nil {
		return nil, err
	}
	return &segmentReader{f: f, r: wlog.NewLiveReader(nil, nil, f), idx: idx}, nil
}

// next returns the next record, or nil at the end of what is written
// (io.EOF: try again later) or on a corrupt tail (another error).
func (s *segmentReader) next() ([]byte, error) {
	if s.r.Next() {
		s.n++
		return s.r.Record(), nil
	}
	err := s.r.Err()
	if err == nil {
		err = io.EOF
	}
	return nil, err
}

func (s *segmentReader) close() { _ = s.f.Close() }

// sending notes the request in flight (n samples of segment seg); 0 when
// it was answered.
func (q *queue) sending(seg int, n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if seg == q.readSeg {
		q.inflight = n
	}
}

// abandon counts as dropped a request given up because the bound dropped
// its segment while it was retried.
func (q *queue) abandon(n int) {
	q.m.dropped.Add(float64(n))
}

// gone says whether the sender's segment seg was dropped by the bound.
func (q *queue) gone(seg int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return seg != q.readSeg
}
