package storage

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
)

// ErrSeriesLimit is wrapped by the error Append returns for a sample of a
// series that is new while Options.MaxSeries series are active
// (storage.max_series). The error also matches Prometheus'
// storage.ErrOutOfBounds, so that a scrape skips the sample and keeps the
// target's other series, as it does for a sample out of the time range;
// the HTTP ingest stores the rest of the request and answers 400.
var ErrSeriesLimit = errors.New("series limit reached")

// seriesLimitError is ErrSeriesLimit for one series.
type seriesLimitError struct {
	limit  int
	series string
}

func (e *seriesLimitError) Error() string {
	return fmt.Sprintf("new series %s refused: storage.max_series (%d active series) reached", e.series, e.limit)
}

// Is matches ErrSeriesLimit and promstorage.ErrOutOfBounds (see ErrSeriesLimit).
func (e *seriesLimitError) Is(target error) bool {
	return target == ErrSeriesLimit || target == promstorage.ErrOutOfBounds
}

const (
	// guardShards splits the guard's locks like the head's.
	guardShards = 16
	// guardGeneration is how long a generation of the guard lasts: a
	// series counts as active from its first sample until one to two
	// generations after its last, VictoriaMetrics' own notion of an active
	// series (the current or the previous hour).
	guardGeneration = time.Hour
	// maxRefusalTargets bounds the targets the guard keeps refusals for;
	// the rest are counted under job and instance "other".
	maxRefusalTargets = 1000
)

// seriesGuard admits new series while fewer than limit are active and
// refuses the rest, counted per target (job, instance). It knows a series
// by its ref (the labels' hash, see seriesCache), 8 bytes plus map
// overhead (about 40 bytes) per active series. Safe for concurrent use.
type seriesGuard struct {
	limit int
	count atomic.Int64
	// next is when the current generation ends (Unix ms).
	next   atomic.Int64
	shards [guardShards]guardShard

	refusedMu sync.Mutex
	refused   map[TargetKey]*SeriesRefusal
	refusedC  *prometheus.CounterVec
}

type guardShard struct {
	mu         sync.RWMutex
	curr, prev map[uint64]struct{}
	_          [40]byte
}

// TargetKey names the target a series came from: its job and instance
// labels (empty when it has none, as a push may).
type TargetKey struct {
	Job, Instance string
}

// SeriesRefusal is what the guard refused of one target.
type SeriesRefusal struct {
	TargetKey
	// Samples is the number of samples of new series refused since Open.
	Samples int64
	// Last is when the last one was refused; Example is its series.
	Last    time.Time
	Example string
}

func newSeriesGuard(limit int, now time.Time) *seriesGuard {
	g := &seriesGuard{
		limit:   limit,
		refused: make(map[TargetKey]*SeriesRefusal),
		refusedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "appliance_storage_series_refused_total",
			Help: "Samples of new series refused because storage.max_series series were active, by the job and instance labels of the series.",
		}, []string{"job", "instance"}),
	}
	for i := range g.shards {
		g.shards[i].curr = make(map[uint64]struct{})
	}
	g.next.Store(now.Add(guardGeneration).UnixMilli())
	return g
}

// rotate starts a new generation when the current one is over: series
// not seen during the previous generation stop counting.
func (g *seriesGuard) rotate(nowMs int64) {
	next := g.next.Load()
	if nowMs < next || !g.next.CompareAndSwap(next, nowMs+guardGeneration.Milliseconds()) {
		return
	}
	for i := range g.shards {
		sh := &g.shards[i]
		sh.mu.Lock()
		g.count.Add(-int64(len(sh.prev)))
		sh.prev, sh.curr = sh.curr, make(map[uint64]struct{}, len(sh.curr))
		sh.mu.Unlock()
	}
}

// admit reports whether a sample of the series ref may be stored: the
// series is active already, or fewer than limit are. force admits a new
// series whatever the count (WAL replay, the appliance's own series).
func (g *seriesGuard) admit(ref uint64, force bool) bool {
	sh := &g.shards[ref%guardShards]
	sh.mu.RLock()
	_, ok := sh.curr[ref]
	sh.mu.RUnlock()
	if ok {
		return true
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.curr[ref]; ok {
		return true
	}
	if _, ok := sh.prev[ref]; ok {
		delete(sh.prev, ref)
		sh.curr[ref] = struct{}{}
		return true
	}
	if !force && g.count.Load() >= int64(g.limit) {
		return false
	}
	sh.curr[ref] = struct{}{}
	g.count.Add(1)
	return true
}

// refuse counts a refused sample of ls and returns the error for it.
func (g *seriesGuard) refuse(ls labels.Labels, now time.Time) error {
	k := TargetKey{Job: ls.Get("job"), Instance: ls.Get("instance")}
	series := SeriesPrefix(ls)
	g.refusedMu.Lock()
	r := g.refused[k]
	if r == nil {
		if len(g.refused) >= maxRefusalTargets {
			k = TargetKey{Job: "other", Instance: "other"}
			r = g.refused[k]
		}
		if r == nil {
			r = &SeriesRefusal{TargetKey: k}
			g.refused[k] = r
		}
	}
	r.Samples++
	r.Last, r.Example = now, series
	g.refusedMu.Unlock()
	g.refusedC.WithLabelValues(k.Job, k.Instance).Inc()
	return &seriesLimitError{limit: g.limit, series: series}
}

// refusals returns the guard's refusals, most recent first.
func (g *seriesGuard) refusals() []SeriesRefusal {
	g.refusedMu.Lock()
	out := make([]SeriesRefusal, 0, len(g.refused))
	for _, r := range g.refused {
		out = append(out, *r)
	}
	g.refusedMu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Last.After(out[j].Last) })
	return out
}

// SeriesLimit is the state of the storage.max_series guard.
type SeriesLimit struct {
	// Limit is storage.max_series; 0 when the guard is off.
	Limit int
	// Active is the number of active series the guard counts (0 when off).
	Active int
	// Refusals lists, per target, the samples of new series refused,
	// most recent first.
	Refusals []SeriesRefusal
}

// SeriesLimit reports the storage.max_series guard.
func (db *DB) SeriesLimit() SeriesLimit {
	g := db.guard
	if g == nil {
		return SeriesLimit{}
	}
	return SeriesLimit{Limit: g.limit, Active: int(g.count.Load()), Refusals: g.refusals()}
}

// guardCollectors are the guard's self-metrics.
func (g *seriesGuard) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		g.refusedC,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "appliance_storage_max_series",
			Help: "storage.max_series: new series beyond this many active ones are refused.",
		}, func() float64 { return float64(g.limit) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "appliance_storage_guarded_series",
			Help: "Active series as the storage.max_series guard counts them (seen in the current or the previous hour).",
		}, func() float64 { return float64(g.count.Load()) }),
	}
}
