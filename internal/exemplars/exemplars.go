package exemplars

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// DefaultMaxExemplars is Prometheus' default storage.exemplars.max_exemplars.
const DefaultMaxExemplars = 100_000

// initialRing is the ring's size before any exemplar came: it doubles as
// exemplars fill it, up to MaxExemplars. Prometheus allocates the whole
// ring at once (100,000 entries: 6.6 MB, most of it never used on a box
// whose targets send no exemplars).
const initialRing = 256

// Options configure a Storage.
type Options struct {
	// MaxExemplars is the size of the ring; 0 keeps none (query_exemplars
	// then answers []), negative takes DefaultMaxExemplars.
	MaxExemplars int64
	// Registerer receives Prometheus' exemplar metrics, prefixed as the
	// other Prometheus libraries' (appliance_prometheus_tsdb_exemplar_*),
	// and appliance_exemplars_dropped_total; nil registers none.
	Registerer prometheus.Registerer
}

// Storage is the in-memory exemplar ring. It is safe for concurrent use.
type Storage struct {
	ring    *tsdb.CircularExemplarStorage
	dropped prometheus.Counter

	// mu guards the ring's growth: size is its length, max the
	// configured bound, added the exemplars it took (duplicates, which
	// it accepts without keeping, included: the ring grows early, never
	// late).
	mu               sync.Mutex
	size, max, added int64
}

// New builds a Storage.
func New(opts Options) (*Storage, error) {
	if opts.MaxExemplars < 0 {
		opts.MaxExemplars = DefaultMaxExemplars
	}
	var libReg prometheus.Registerer
	if opts.Registerer != nil {
		libReg = prometheus.WrapRegistererWithPrefix("appliance_", opts.Registerer)
	}
	size := min(opts.MaxExemplars, initialRing)
	es, err := tsdb.NewCircularExemplarStorage(size, tsdb.NewExemplarMetrics(libReg), 0)
	if err != nil {
		return nil, fmt.Errorf("create exemplar storage: %w", err)
	}
	ring, ok := es.(*tsdb.CircularExemplarStorage)
	if !ok {
		return nil, fmt.Errorf("create exemplar storage: unexpected type %T", es)
	}
	s := &Storage{ring: ring, size: size, max: opts.MaxExemplars, dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "appliance_exemplars_dropped_total",
		Help: "Exemplars of scrapes and remote write not kept (out of order, label set too long, or storage.exemplars.max_exemplars is 0).",
	})}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(s.dropped); err != nil {
			if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
				if c, ok := are.ExistingCollector.(prometheus.Counter); ok {
					s.dropped = c
				}
			}
		}
	}
	return s, nil
}

// Resize changes the ring's bound (storage.exemplars.max_exemplars on
// reload): a ring over it shrinks at once, keeping the newest exemplars
// that fit; a smaller one grows up to it as exemplars come.
func (s *Storage) Resize(n int64) {
	n = max(n, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max = n
	if s.size > n {
		s.size = n
		s.ring.Resize(n)
	}
	s.grow()
}

// grow doubles the ring when the exemplars it took fill it, up to max;
// s.mu is held. Growing keeps every exemplar.
func (s *Storage) grow() {
	if s.added < s.size || s.size >= s.max {
		return
	}
	s.size = min(max(2*s.size, initialRing), s.max)
	s.ring.Resize(s.size)
}

// ExemplarQuerier implements storage.ExemplarQueryable.
func (s *Storage) ExemplarQuerier(ctx context.Context) (storage.ExemplarQuerier, error) {
	return s.ring.ExemplarQuerier(ctx)
}

// Add adds exemplars of the series ls; those the ring refuses are
// counted and dropped.
func (s *Storage) Add(ls labels.Labels, es []exemplar.Exemplar) {
	for _, e := range es {
		if err := s.ring.AddExemplar(ls, e); err != nil {
			s.dropped.Inc()
			continue
		}
		s.mu.Lock()
		s.added++
		s.grow()
		s.mu.Unlock()
	}
}

// Appendable wraps next so that its appenders keep exemplars here.
func (s *Storage) Appendable(next storage.AppendableV2) storage.AppendableV2 {
	return appendable{s: s, next: next}
}

type appendable struct {
	s    *Storage
	next storage.AppendableV2
}

func (a appendable) AppenderV2(ctx context.Context) storage.AppenderV2 {
	return a.s.Appender(a.next.AppenderV2(ctx))
}

// Appender wraps next: samples go to next, exemplars are held until
// Commit succeeds and then added to s. Like any storage.AppenderV2 it is
// for one goroutine.
func (s *Storage) Appender(next storage.AppenderV2) storage.AppenderV2 {
	return &appender{s: s, next: next}
}

type appender struct {
	s       *Storage
	next    storage.AppenderV2
	pending []pending
}

// pending are a series' exemplars held until Commit; they are copies, as
// the caller may reuse its slices.
type pending struct {
	ls labels.Labels
	es []exemplar.Exemplar
}

var _ storage.ExemplarAppenderV2 = (*appender)(nil)

func (a *appender) Append(ref storage.SeriesRef, ls labels.Labels, st, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AOptions) (storage.SeriesRef, error) {
	es := opts.Exemplars
	opts.Exemplars = nil
	ref, err := a.next.Append(ref, ls, st, t, v, h, fh, opts)
	if err == nil && len(es) > 0 {
		a.hold(ls, es)
	}
	return ref, err
}

func (a *appender) hold(ls labels.Labels, es []exemplar.Exemplar) {
	a.pending = append(a.pending, pending{ls: ls.Copy(), es: append([]exemplar.Exemplar(nil), es...)})
}

// AppendExemplars implements storage.ExemplarAppenderV2.
func (a *appender) AppendExemplars(ref storage.SeriesRef, ls labels.Labels, es []exemplar.Exemplar) (storage.SeriesRef, error) {
	if len(es) > 0 {
		a.hold(ls, es)
	}
	return ref, nil
}

func (a *appender) Commit() error {
	err := a.next.Commit()
	if err == nil {
		for _, p := range a.pending {
			a.s.Add(p.ls, p.es)
		}
	}
	a.pending = nil
	return err
}

func (a *appender) Rollback() error {
	a.pending = nil
	return a.next.Rollback()
}
