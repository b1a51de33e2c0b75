package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"

	"github.com/aiserve/appliance/internal/histconv"
	"github.com/aiserve/appliance/storage"
)

// The HTTP ingest (remote write, text import) answers a sender so that it
// knows whether to keep its data:
//
//	2xx  stored, and in the WAL with an fsync (storage.WithSyncCommit):
//	     the sender may drop its copy.
//	400  a series the store cannot hold (over the index limit, or over
//	     the label_limit, label_name_length_limit or
//	     label_value_length_limit of the global section); the error names
//	     the series (a prefix) and the limit. Nothing of the request is
//	     stored: a retry would fail the same way.
//	400  every sample of the request was a native histogram that cannot
//	     be stored (internal/histconv drops invalid ones); the error
//	     names the first. A request with anything storable is stored
//	     without the dropped histograms (counted in
//	     appliance_native_histograms_dropped_total) and answered 2xx, so
//	     that one bad series never stalls a sender's queue.
//	400  samples of new series past storage.max_series
//	     (storage.ErrSeriesLimit): the request's other samples, those of
//	     series already stored, are stored; the error names the first
//	     refused series. A retry would be refused the same way.
//	503  the disk is below storage.min_free_disk (storage.ErrDiskFull),
//	     with the reason and Retry-After: the sender keeps its data and
//	     retries; nothing of the request is stored.
//
// Rejected samples are counted in appliance_ingest_rejected_samples_total
// by reason.

// Reasons of appliance_ingest_rejected_samples_total.
const (
	rejectSeriesTooLarge   = "series_too_large"
	rejectLabelLimit       = "label_limit"
	rejectLabelNameLength  = "label_name_length_limit"
	rejectLabelValueLength = "label_value_length_limit"
	rejectDiskFull         = "disk_full"
	rejectNativeHistogram  = "native_histogram"
	rejectMaxSeries        = "max_series"
)

// retryAfterSeconds is what a 503 asks a sender to wait: a few disk-space
// checks (storage checks at most every 250 ms).
const retryAfterSeconds = 5

// LabelLimits are Prometheus' label limits, applied to pushed series as a
// scrape applies them to scraped ones; 0 means no limit.
type LabelLimits struct {
	Count       int // label_limit
	NameLength  int // label_name_length_limit
	ValueLength int // label_value_length_limit
}

// errLabelLimit is a pushed series over one of the LabelLimits.
type errLabelLimit struct {
	reason string
	msg    string
}

func (e *errLabelLimit) Error() string { return e.msg }

// check returns the first limit ls exceeds, or nil.
func (l LabelLimits) check(ls labels.Labels) error {
	if l.Count > 0 && ls.Len() > l.Count {
		return &errLabelLimit{rejectLabelLimit, fmt.Sprintf("series %s has %d labels, more than label_limit %d",
			storage.SeriesPrefix(ls), ls.Len(), l.Count)}
	}
	if l.NameLength <= 0 && l.ValueLength <= 0 {
		return nil
	}
	var err error
	ls.Range(func(lb labels.Label) {
		switch {
		case err != nil:
		case l.NameLength > 0 && len(lb.Name) > l.NameLength:
			err = &errLabelLimit{rejectLabelNameLength, fmt.Sprintf("series %s: label name %.64q is %d bytes, longer than label_name_length_limit %d",
				storage.SeriesPrefix(ls), lb.Name, len(lb.Name), l.NameLength)}
		case l.ValueLength > 0 && len(lb.Value) > l.ValueLength:
			err = &errLabelLimit{rejectLabelValueLength, fmt.Sprintf("series %s: value of label %.64q is %d bytes, longer than label_value_length_limit %d",
				storage.SeriesPrefix(ls), lb.Name, len(lb.Value), l.ValueLength)}
		}
	})
	return err
}

// ingestMetrics count what the HTTP ingest refused.
type ingestMetrics struct {
	rejected *prometheus.CounterVec
}

func newIngestMetrics(reg prometheus.Registerer) *ingestMetrics {
	// The command hands ui a registerer that prefixes "appliance_" (as
	// for the Prometheus API's own metrics), so the exposed name is
	// appliance_ingest_rejected_samples_total.
	m := &ingestMetrics{rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ingest_rejected_samples_total",
		Help: "Samples of remote-write and import requests refused, by reason (series_too_large, label_limit, label_name_length_limit, label_value_length_limit, native_histogram, max_series: 400; disk_full: 503).",
	}, []string{"reason"})}
	for _, r := range []string{rejectSeriesTooLarge, rejectLabelLimit, rejectLabelNameLength, rejectLabelValueLength, rejectDiskFull, rejectNativeHistogram, rejectMaxSeries} {
		m.rejected.WithLabelValues(r)
	}
	if reg != nil {
		// A second server on the same registry (tests) shares the counter.
		if err := reg.Register(m.rejected); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				m.rejected = are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	return m
}

// ingestError classifies an error of Append or Commit for the answer: the
// status code (0 when it is none of the ingest's own) and the reason.
func ingestError(err error) (code int, reason string) {
	var lim *errLabelLimit
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &lim):
		return http.StatusBadRequest, lim.reason
	case errors.Is(err, storage.ErrSeriesLimit):
		return http.StatusBadRequest, rejectMaxSeries
	case errors.Is(err, storage.ErrInvalidSeries):
		return http.StatusBadRequest, rejectSeriesTooLarge
	case errors.Is(err, storage.ErrDiskFull):
		return http.StatusServiceUnavailable, rejectDiskFull
	}
	return 0, ""
}

// ingestBlocked is the storage's refusal of new samples (nil when it takes
// them), for /-/ready and the ingest handlers.
func (s *Server) ingestBlocked() error {
	if st, ok := s.opts.Storage.(interface{ IngestError() error }); ok {
		return st.IngestError()
	}
	return nil
}

func (s *Server) labelLimits() LabelLimits {
	if s.opts.LabelLimits == nil {
		return LabelLimits{}
	}
	return s.opts.LabelLimits()
}

// unavailable answers 503 with the reason and Retry-After.
func unavailable(w http.ResponseWriter, err error) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	http.Error(w, err.Error(), http.StatusServiceUnavailable)
}

// ingestRefusal is the first refusal an ingest request's appender met;
// the request's context carries it to the handler's wrapper.
type ingestRefusal struct {
	err    error
	code   int
	reason string
	// partial: the request's other samples were stored (max_series).
	partial bool
}

type ingestRefusalKey struct{}

// guardRemoteWrite wraps Prometheus' remote-write handler: 503 while the
// disk is below the watermark, and, when the appender refused a series
// (which Prometheus' handler answers 500 after a rollback), 400 or 503 with
// the storage's reason instead.
func (s *Server) guardRemoteWrite(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.ingestBlocked(); err != nil {
			s.ingest.rejected.WithLabelValues(rejectDiskFull).Inc()
			unavailable(w, err)
			return
		}
		ref := &ingestRefusal{}
		r = r.WithContext(context.WithValue(r.Context(), ingestRefusalKey{}, ref))
		bw := &heldResponse{header: w.Header()}
		next.ServeHTTP(bw, r)
		switch {
		case ref.code == http.StatusServiceUnavailable:
			unavailable(w, ref.err)
		case ref.partial:
			http.Error(w, ref.err.Error()+"; the request's other samples were stored", ref.code)
		case ref.code != 0:
			http.Error(w, ref.err.Error()+"; nothing of this request was stored", ref.code)
		default:
			bw.flush(w)
		}
	})
}

// heldResponse holds a handler's answer until guardRemoteWrite knows
// whether to replace it. Remote-write answers are a few bytes.
type heldResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *heldResponse) Header() http.Header { return b.header }
func (b *heldResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *heldResponse) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.body.Write(p)
}

func (b *heldResponse) flush(w http.ResponseWriter) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	w.WriteHeader(b.code)
	_, _ = w.Write(b.body.Bytes())
}

// ingestAppendable is the storage as the remote-write handler appends to
// it: commits are fsynced, pushed series checked against the label
// limits, native histograms stored as classic ones, exemplars kept, and
// refusals recorded for guardRemoteWrite.
type ingestAppendable struct{ s *Server }

func (a ingestAppendable) AppenderV2(ctx context.Context) promstorage.AppenderV2 {
	ref, _ := ctx.Value(ingestRefusalKey{}).(*ingestRefusal)
	app := a.s.opts.Storage.AppenderV2(storage.WithSyncCommit(ctx))
	if a.s.opts.Exemplars != nil {
		app = a.s.opts.Exemplars.Appender(app)
	}
	return &ingestAppender{Appender: a.s.opts.Histograms.Appender(app), s: a.s, limits: a.s.labelLimits(), refusal: ref}
}

// ingestAppender wraps the histogram converter, whose AppendExemplars it
// keeps (moving a native series' exemplars to its _bucket series, on to
// the exemplar storage); Prometheus' remote-write handler requires that
// method.
type ingestAppender struct {
	*histconv.Appender
	s       *Server
	limits  LabelLimits
	refusal *ingestRefusal
	n       int // samples appended, counted as rejected on a refusal
}

func (a *ingestAppender) refuse(err error, samples int) error {
	code, reason := ingestError(err)
	if code == 0 {
		return err
	}
	a.s.ingest.rejected.WithLabelValues(reason).Add(float64(samples))
	if a.refusal != nil && a.refusal.code == 0 {
		*a.refusal = ingestRefusal{err: err, code: code, reason: reason}
	}
	return err
}

func (a *ingestAppender) Append(ref promstorage.SeriesRef, ls labels.Labels, st, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts promstorage.AppendV2Options) (promstorage.SeriesRef, error) {
	if err := a.limits.check(ls); err != nil {
		return ref, a.refuse(err, a.n+1)
	}
	dropped, _ := a.Dropped()
	ref, err := a.Appender.Append(ref, ls, st, t, v, h, fh, opts)
	if errors.Is(err, storage.ErrSeriesLimit) {
		// The sample is skipped, the rest of the request stored.
		a.s.ingest.rejected.WithLabelValues(rejectMaxSeries).Inc()
		if a.refusal != nil && a.refusal.code == 0 {
			*a.refusal = ingestRefusal{err: err, code: http.StatusBadRequest, reason: rejectMaxSeries, partial: true}
		}
		return ref, nil
	}
	if err != nil {
		return ref, a.refuse(err, a.n+1)
	}
	if now, _ := a.Dropped(); now > dropped {
		return ref, nil // a native histogram dropped and counted
	}
	a.n++
	return ref, nil
}

func (a *ingestAppender) Commit() error {
	if err := a.refuse(a.Appender.Commit(), a.n); err != nil {
		return err
	}
	if n, first := a.Dropped(); a.n == 0 && n > 0 {
		// Nothing of the request could be stored: say why, with 400
		// (a retry would fail the same way).
		a.s.ingest.rejected.WithLabelValues(rejectNativeHistogram).Add(float64(n))
		if a.refusal != nil && a.refusal.code == 0 {
			*a.refusal = ingestRefusal{
				err:    fmt.Errorf("%d native histogram(s) cannot be stored, the first: %w", n, first),
				code:   http.StatusBadRequest,
				reason: rejectNativeHistogram,
			}
		}
	}
	return nil
}

var _ promstorage.ExemplarAppenderV2 = (*ingestAppender)(nil)
