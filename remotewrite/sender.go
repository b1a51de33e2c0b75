package remotewrite

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/golang/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/record"
)

// sendSettings are what the sender takes from queue_config.
type sendSettings struct {
	maxSamples    int
	deadline      time.Duration
	minBackoff    time.Duration
	maxBackoff    time.Duration
	proto         remoteapi.WriteMessageType
	idleRetryWait time.Duration // how long to wait for a write before looking again
}

// sender reads one queue and sends it to one remote.
type sender struct {
	q      *queue
	client remote.WriteClient
	set    sendSettings
	logger *slog.Logger
	m      *queueMetrics

	dec    record.Decoder
	series map[chunks.HeadSeriesRef]labels.Labels
	rs     []record.RefSeries
	recBuf []record.RefSample
	// pending are the samples read and not sent; pendingEnd is the number
	// of records of the segment they complete; acked is the records of
	// the segment acknowledged.
	pending    []record.RefSample
	pendingEnd int
	acked      int
	since      time.Time // when the oldest pending sample was read

	// request building
	v1      prompb.WriteRequest
	v2      writev2.Request
	symbols writev2.SymbolsTable
	index   map[chunks.HeadSeriesRef]int
	refs    []uint32
	pbuf    []byte
	sbuf    []byte
}

func newSender(q *queue, client remote.WriteClient, set sendSettings, logger *slog.Logger) *sender {
	return &sender{
		q: q, client: client, set: set, logger: logger, m: q.m,
		dec:     record.NewDecoder(nil, logger),
		series:  make(map[chunks.HeadSeriesRef]labels.Labels),
		symbols: writev2.NewSymbolTable(),
		index:   make(map[chunks.HeadSeriesRef]int),
	}
}

// run sends until ctx ends. Samples answered are acknowledged in the
// queue; a request in flight when ctx ends is sent again at the next start.
func (s *sender) run(ctx context.Context) {
	for ctx.Err() == nil {
		seg, recs, _, _ := s.q.position()
		r, err := openSegmentReader(s.q.dir, seg)
		if err != nil {
			// Dropped or finished meanwhile: look again.
			if !s.wait(ctx, s.set.idleRetryWait) {
				return
			}
			continue
		}
		s.readSegment(ctx, r, recs)
		r.close()
	}
}

// readSegment sends segment r from record skip on, until it is complete
// and sent (then it is finished), the bound drops it, or ctx ends.
func (s *sender) readSegment(ctx context.Context, r *segmentReader, skip int) {
	clear(s.series)
	s.pending, s.pendingEnd, s.acked = s.pending[:0], skip, skip
	for ctx.Err() == nil {
		rec, err := r.next()
		if err == nil {
			if r.n <= skip {
				s.noteSeries(rec) // its samples were sent before
				continue
			}
			s.take(rec, r.n)
			for len(s.pending) >= s.set.maxSamples {
				if !s.flush(ctx, r.idx) {
					return
				}
			}
			continue
		}
		// The end of what is written so far.
		_, _, complete, dropped := s.q.position()
		if dropped {
			return
		}
		if complete {
			// The writer moved on before this read; read the rest.
			for {
				rec, err := r.next()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						s.logger.Warn("remote write queue: corrupt segment tail skipped", "segment", r.idx, "err", err)
					}
					break
				}
				s.take(rec, r.n)
				for len(s.pending) >= s.set.maxSamples {
					if !s.flush(ctx, r.idx) {
						return
					}
				}
			}
			for len(s.pending) > 0 {
				if !s.flush(ctx, r.idx) {
					return
				}
			}
			s.q.finish(r.idx)
			return
		}
		if len(s.pending) > 0 {
			if wait := s.set.deadline - time.Since(s.since); wait > 0 {
				s.wait(ctx, wait)
				continue
			}
			if !s.flush(ctx, r.idx) {
				return
			}
			continue
		}
		s.wait(ctx, s.set.idleRetryWait)
	}
}

// wait waits for a write to the queue, d, or the end of ctx; false when
// ctx ended.
func (s *sender) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.q.notify:
	case <-t.C:
	}
	return true
}

// noteSeries keeps the labels of a series record.
func (s *sender) noteSeries(rec []byte) {
	if s.dec.Type(rec) != record.Series {
		return
	}
	var err error
	s.rs, err = s.dec.Series(rec, s.rs[:0])
	if err != nil {
		s.logger.Warn("remote write queue: bad series record", "err", err)
		return
	}
	for _, x := range s.rs {
		s.series[x.Ref] = x.Labels
	}
}

// take decodes record n of the segment: series are noted, samples join
// pending.
func (s *sender) take(rec []byte, n int) {
	switch s.dec.Type(rec) {
	case record.Series:
		s.noteSeries(rec)
	case record.Samples:
		var err error
		s.recBuf, err = s.dec.Samples(rec, s.recBuf[:0])
		if err != nil {
			s.logger.Warn("remote write queue: bad samples record", "err", err)
			break
		}
		if len(s.pending) == 0 {
			s.since = time.Now()
		}
		for _, x := range s.recBuf {
			if _, ok := s.series[x.Ref]; ok {
				s.pending = append(s.pending, x)
			}
		}
	}
	s.pendingEnd = n
}

// flush sends the oldest pending samples (up to max_samples_per_send) and
// acknowledges them; false when ctx ended or the bound dropped the
// segment meanwhile.
func (s *sender) flush(ctx context.Context, seg int) bool {
	n := min(len(s.pending), s.set.maxSamples)
	batch := s.pending[:n]
	recs := s.acked
	if n == len(s.pending) {
		recs = s.pendingEnd
	}
	if !s.send(ctx, seg, batch) {
		return false
	}
	s.pending = append(s.pending[:0], s.pending[n:]...)
	if len(s.pending) > 0 {
		s.since = time.Now()
	}
	s.acked = recs
	return s.q.ack(seg, recs, int64(n))
}

// send sends batch until it is answered: retried with backoff on
// recoverable errors (5xx, 429, network), dropped and counted on others.
// It returns false when ctx ended or the segment was dropped first.
func (s *sender) send(ctx context.Context, seg int, batch []record.RefSample) bool {
	req, highest := s.encode(batch)
	s.q.sending(seg, int64(len(batch)))
	backoff := s.set.minBackoff
	for attempt := 0; ; attempt++ {
		_, err := s.client.Store(ctx, req, attempt)
		if err == nil {
			s.m.samples.Add(float64(len(batch)))
			s.m.bytes.Add(float64(len(req)))
			s.m.highestSent.Set(float64(highest) / 1000)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		var rerr remote.RecoverableError
		if !errors.As(err, &rerr) {
			s.m.failed.Add(float64(len(batch)))
			s.logger.Warn("remote write: the remote refused samples; they are dropped", "samples", len(batch), "err", err)
			return true
		}
		s.m.retried.Add(float64(len(batch)))
		if attempt == 0 || attempt%10 == 0 {
			s.logger.Warn("remote write: send failed; retrying", "samples", len(batch), "attempt", attempt+1, "backoff", backoff, "err", err)
		}
		if !s.sleep(ctx, backoff) {
			return false
		}
		if s.q.gone(seg) {
			s.q.abandon(len(batch))
			return false
		}
		backoff = min(2*backoff, s.set.maxBackoff)
	}
}

func (s *sender) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// encode builds the snappy-compressed request of batch in the remote's
// protobuf message, one series with its samples in order; it returns the
// newest timestamp too.
func (s *sender) encode(batch []record.RefSample) ([]byte, int64) {
	clear(s.index)
	var highest int64
	var err error
	if s.set.proto == remoteapi.WriteV2MessageType {
		s.symbols.Reset()
		ts := s.v2.Timeseries[:0]
		for _, x := range batch {
			highest = max(highest, x.T)
			i, ok := s.index[x.Ref]
			if !ok {
				i = len(ts)
				s.index[x.Ref] = i
				s.refs = s.symbols.SymbolizeLabels(s.series[x.Ref], s.refs[:0])
				if i < cap(ts) {
					ts = ts[:i+1]
					ts[i].LabelsRefs = append(ts[i].LabelsRefs[:0], s.refs...)
					ts[i].Samples = ts[i].Samples[:0]
				} else {
					ts = append(ts, writev2.TimeSeries{LabelsRefs: append([]uint32(nil), s.refs...)})
				}
			}
			ts[i].Samples = append(ts[i].Samples, writev2.Sample{Value: x.V, Timestamp: x.T})
		}
		s.v2.Timeseries = ts
		s.v2.Symbols = s.symbols.Symbols()
		s.pbuf, err = s.v2.OptimizedMarshal(s.pbuf)
	} else {
		ts := s.v1.Timeseries[:0]
		for _, x := range batch {
			highest = max(highest, x.T)
			i, ok := s.index[x.Ref]
			if !ok {
				i = len(ts)
				s.index[x.Ref] = i
				if i < cap(ts) {
					ts = ts[:i+1]
					ts[i].Labels = ts[i].Labels[:0]
					ts[i].Samples = ts[i].Samples[:0]
				} else {
					ts = append(ts, prompb.TimeSeries{})
				}
				s.series[x.Ref].Range(func(l labels.Label) {
					ts[i].Labels = append(ts[i].Labels, prompb.Label{Name: l.Name, Value: l.Value})
				})
			}
			ts[i].Samples = append(ts[i].Samples, prompb.Sample{Value: x.V, Timestamp: x.T})
		}
		s.v1.Timeseries = ts
		s.pbuf = s.pbuf[:0]
		if n := s.v1.Size(); cap(s.pbuf) < n {
			s.pbuf = make([]byte, n)
		} else {
			s.pbuf = s.pbuf[:n]
		}
		var n int
		n, err = s.v1.MarshalToSizedBuffer(s.pbuf)
		s.pbuf = s.pbuf[len(s.pbuf)-n:]
	}
	if err != nil {
		s.logger.Error("remote write: cannot encode a request", "err", err)
	}
	s.sbuf = snappy.Encode(s.sbuf[:cap(s.sbuf)], s.pbuf)
	return s.sbuf, highest
}
