package exemplars

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// DefaultMaxExemplars is Prometheus' default storage.exemplars.max_exemplars.
const DefaultMaxExemplars = 100_000

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
	es, err := tsdb.NewCircularExemplarStorage(opts.MaxExemplars, tsdb.NewExemplarMetrics(libReg), 0)
	if err != nil {
		return nil, fmt.Errorf("create exemplar storage: %w", err)
	}
	ring, ok := es.(*tsdb.CircularExemplarStorage)
	if !ok {
		return nil, fmt.Errorf("create exemplar storage: unexpected type %T", es)
	}
	s := &Storage{ring: ring, dropped: prometheus.NewCounter(prometheus.CounterOpts{
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

// Resize changes the ring's size (storage.exemplars.max_exemplars on
// reload), keeping the newest exemplars that fit.
func (s *Storage) Resize(n int64) { s.ring.Resize(n) }

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
		}
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
