package query

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/util/annotations"
	"go.yaml.in/yaml/v2"
)

// RemoteRead is the set of remote_read endpoints (prometheus.yml's
// section) the engine reads besides the Queryable of each query, as
// Prometheus' fanout storage does: the query's own Queryable is the
// primary, each endpoint a secondary. A secondary that fails (down, slow,
// refusing) turns into a warning of the answer naming it, never a failed
// query.
//
// The endpoints are Prometheus' own read clients (storage/remote:
// NewReadClient, NewSampleAndChunkQueryableClient), built as
// remote.Storage.ApplyConfig builds them: remote_timeout, headers,
// http_config (basic_auth, authorization, TLS, proxy), required_matchers,
// filter_external_labels and read_recent behave as in Prometheus. With
// read_recent false (the default) an endpoint is asked only for the part
// of a range older than the local start, which is what localStart returns
// (the start of the raw tier's retention).
//
// The set is replaced whole on reload, in two phases (Prepare builds the
// clients and changes nothing, Apply swaps them in); queries in flight keep
// the set they started with. The zero value and nil read no endpoint.
type RemoteRead struct {
	localStart func() (int64, error)
	cur        atomic.Pointer[remoteSet]
}

// RemoteReadNext is a prepared set of endpoints, for Apply.
type RemoteReadNext struct{ set *remoteSet }

type remoteSet struct{ sources []remoteSource }

type remoteSource struct {
	name, url string
	q         storage.SampleAndChunkQueryable
}

// NewRemoteRead returns an empty set; localStart is the time (Unix ms)
// from which the local storage answers, for read_recent false.
func NewRemoteRead(localStart func() (int64, error)) *RemoteRead {
	return &RemoteRead{localStart: localStart}
}

// Prepare builds the read clients of cfgs, with global.external_labels
// external; it changes nothing. An endpoint configured twice, or whose
// HTTP config does not build, is an error naming it.
func (r *RemoteRead) Prepare(cfgs []*promconfig.RemoteReadConfig, external labels.Labels) (*RemoteReadNext, error) {
	set := &remoteSet{}
	seen := map[string]bool{}
	for i, c := range cfgs {
		if c == nil || c.URL == nil {
			return nil, fmt.Errorf("remote_read[%d]: url is required", i)
		}
		b, err := yaml.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("remote_read %s: %w", c.URL, err)
		}
		sum := sha256.Sum256(b)
		hash := hex.EncodeToString(sum[:])
		if seen[hash] {
			return nil, fmt.Errorf("remote_read %s: configured twice", c.URL)
		}
		seen[hash] = true
		name := hash[:6]
		if c.Name != "" {
			name = c.Name
		}
		client, err := remote.NewReadClient(name, &remote.ClientConfig{
			URL:              c.URL,
			Timeout:          c.RemoteTimeout,
			ChunkedReadLimit: c.ChunkedReadLimit,
			HTTPClientConfig: c.HTTPClientConfig,
			Headers:          c.Headers,
		})
		if err != nil {
			return nil, fmt.Errorf("remote_read %s: %w", c.URL, err)
		}
		ext := external
		if !c.FilterExternalLabels {
			ext = labels.EmptyLabels()
		}
		set.sources = append(set.sources, remoteSource{
			name: name,
			url:  c.URL.String(),
			q:    remote.NewSampleAndChunkQueryableClient(client, ext, equalityMatchers(c.RequiredMatchers), c.ReadRecent, r.start),
		})
	}
	return &RemoteReadNext{set: set}, nil
}

// Apply swaps in a prepared set: queries from now on read it.
func (r *RemoteRead) Apply(n *RemoteReadNext) {
	if n != nil {
		r.cur.Store(n.set)
	}
}

// Len is the number of endpoints in force.
func (r *RemoteRead) Len() int {
	if r == nil {
		return 0
	}
	if s := r.cur.Load(); s != nil {
		return len(s.sources)
	}
	return 0
}

func (r *RemoteRead) start() (int64, error) {
	if r.localStart == nil {
		return int64(model.Latest), nil
	}
	return r.localStart()
}

// queryable returns local with the endpoints in force as secondaries, or
// local itself when there are none.
func (r *RemoteRead) queryable(local storage.Queryable) storage.Queryable {
	if r == nil {
		return local
	}
	s := r.cur.Load()
	if s == nil || len(s.sources) == 0 {
		return local
	}
	return fanoutQueryable{local: local, set: s}
}

// fanoutQueryable is the read half of storage.NewFanout: the local
// querier as primary, the endpoints as secondaries whose errors are
// warnings.
type fanoutQueryable struct {
	local storage.Queryable
	set   *remoteSet
}

func (f fanoutQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	primary, err := f.local.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	secondaries := make([]storage.Querier, 0, len(f.set.sources))
	for _, src := range f.set.sources {
		q, err := src.q.Querier(mint, maxt)
		if err != nil {
			// The local start could not be read: the endpoint is left
			// out, and the answer says so.
			secondaries = append(secondaries, failedQuerier{src: src, err: err})
			continue
		}
		if q == storage.NoopQuerier() {
			// Nothing to ask (read_recent false, a range the local
			// storage holds): left out unwrapped, so that the merge
			// querier drops it and, with no other endpoint, the query
			// reads the local querier alone rather than merging.
			continue
		}
		secondaries = append(secondaries, namedQuerier{Querier: q, src: src})
	}
	return storage.NewMergeQuerier([]storage.Querier{primary}, secondaries, storage.ChainedSeriesMerge), nil
}

// namedQuerier puts the endpoint's name and URL in its errors, which the
// merge querier turns into the answer's warnings.
type namedQuerier struct {
	storage.Querier
	src remoteSource
}

func (q namedQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	return namedSeriesSet{SeriesSet: q.Querier.Select(ctx, sortSeries, hints, ms...), src: q.src}
}

func (q namedQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	v, ws, err := q.Querier.LabelValues(ctx, name, hints, ms...)
	return v, ws, q.src.wrap(err)
}

func (q namedQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	v, ws, err := q.Querier.LabelNames(ctx, hints, ms...)
	return v, ws, q.src.wrap(err)
}

type namedSeriesSet struct {
	storage.SeriesSet
	src remoteSource
}

func (s namedSeriesSet) Err() error { return s.src.wrap(s.SeriesSet.Err()) }

// failedQuerier answers nothing and the error, as a warning.
type failedQuerier struct {
	src remoteSource
	err error
}

func (q failedQuerier) Select(context.Context, bool, *storage.SelectHints, ...*labels.Matcher) storage.SeriesSet {
	return storage.ErrSeriesSet(q.src.wrap(q.err))
}

func (q failedQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, q.src.wrap(q.err)
}

func (q failedQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, q.src.wrap(q.err)
}

func (failedQuerier) Close() error { return nil }

func (s remoteSource) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("remote_read %q (%s): %w", s.name, s.url, err)
}

func equalityMatchers(ls model.LabelSet) []*labels.Matcher {
	ms := make([]*labels.Matcher, 0, len(ls))
	for k, v := range ls {
		ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, string(k), string(v)))
	}
	return ms
}
