package query

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/stats"

	"github.com/aiserve/appliance/config"
)

// RemoteQuery is hub mode (storage.remote_query): the engine sends every
// PromQL query to a remote Prometheus HTTP API (Thanos Query, vmselect,
// Mimir, Prometheus) instead of evaluating it over the local storage, as
// vmalert and Thanos Ruler evaluate over a query API. Thanos Query and
// vmselect serve no remote-read API, so the query text is forwarded, not
// the samples read back; the remote plans its own downsampling, so tier
// planning is skipped.
//
// Because every consumer hands its queries to the one Engine (the HTTP
// API, rules, the SLO reports, the dashboard's back-end, explain), they
// all read the remote at once. What the API reads without PromQL
// (series, labels, label values, and the dashboard's discovery of
// services) goes through Queryable, which answers from the remote too.
// The remote's answers are used instead of the local storage's, not
// merged with them: the local storage keeps the hub's own data (its
// self-metrics, its rules' ALERTS and recorded series, the rules' for
// state, which rules restore from it) and state; remote_write them to the
// same engine to see them in the hub's queries, as vmalert does.
//
// A remote that is down or refuses fails the query with an error naming
// it (remote_query <url>: ...); a rule's evaluation fails the same way,
// and the rule shows it in /api/v1/rules.
//
// The configuration is replaced whole on reload (Prepare, Apply); nil
// and the zero value query the local storage.
type RemoteQuery struct {
	cur atomic.Pointer[remoteAPI]
}

// RemoteQueryNext is a prepared configuration, for Apply.
type RemoteQueryNext struct{ api *remoteAPI }

type remoteAPI struct {
	url     string
	api     promv1.API
	timeout time.Duration
	boxes   []string
}

// NewRemoteQuery returns a RemoteQuery in local mode.
func NewRemoteQuery() *RemoteQuery { return &RemoteQuery{} }

// Prepare builds the client of c (nil: local mode); it changes nothing.
func (r *RemoteQuery) Prepare(c *config.RemoteQueryConfig) (*RemoteQueryNext, error) {
	if c == nil {
		return &RemoteQueryNext{}, nil
	}
	if c.URL == nil || c.URL.URL == nil {
		return nil, errors.New("remote_query: url is required")
	}
	u := c.URL.String()
	rt, err := commoncfg.NewRoundTripperFromConfig(c.HTTPClientConfig, "remote_query")
	if err != nil {
		return nil, fmt.Errorf("remote_query %s: %w", u, err)
	}
	if len(c.Headers) > 0 {
		rt = headerRoundTripper{next: rt, headers: c.Headers}
	}
	client, err := api.NewClient(api.Config{Address: u, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("remote_query %s: %w", u, err)
	}
	return &RemoteQueryNext{api: &remoteAPI{
		url:     redactURL(c.URL),
		api:     promv1.NewAPI(client),
		timeout: c.RequestTimeout(),
		boxes:   slices.Clone(c.Boxes()),
	}}, nil
}

// Apply puts a prepared configuration in force: queries from now on read
// it; queries in flight keep the one they started with.
func (r *RemoteQuery) Apply(n *RemoteQueryNext) {
	if n != nil {
		r.cur.Store(n.api)
	}
}

// URL is the remote API in force (its password redacted), "" in local
// mode.
func (r *RemoteQuery) URL() string {
	if a := r.current(); a != nil {
		return a.url
	}
	return ""
}

// BoxLabels are the labels that identify a box in hub mode (nil in local
// mode), for the dashboard's box selector.
func (r *RemoteQuery) BoxLabels() []string {
	if a := r.current(); a != nil {
		return a.boxes
	}
	return nil
}

func (r *RemoteQuery) current() *remoteAPI {
	if r == nil {
		return nil
	}
	return r.cur.Load()
}

// Queryable returns what reads in local's place: the remote API in hub
// mode (series, labels and label values from its endpoints; samples
// through a range-vector query), local otherwise. Chunk queries (remote
// read of the hub itself) always read local.
func (r *RemoteQuery) Queryable(local storage.SampleAndChunkQueryable) storage.SampleAndChunkQueryable {
	return hubQueryable{r: r, local: local}
}

type hubQueryable struct {
	r     *RemoteQuery
	local storage.SampleAndChunkQueryable
}

func (h hubQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	if a := h.r.current(); a != nil {
		return remoteQuerier{api: a, mint: mint, maxt: maxt}, nil
	}
	return h.local.Querier(mint, maxt)
}

func (h hubQueryable) ChunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	return h.local.ChunkQuerier(mint, maxt)
}

// AdaptForTiers is the local storage's (TierPlanner): without it the
// engine would run every local query unadapted to the tiers it reads
// (hub mode sends queries away before they are adapted).
func (h hubQueryable) AdaptForTiers(ctx context.Context, expr parser.Expr, start, end time.Time, step, lookback time.Duration) (time.Duration, bool) {
	if p, ok := h.local.(TierPlanner); ok {
		return p.AdaptForTiers(ctx, expr, start, end, step, lookback)
	}
	return lookback, false
}

// headerRoundTripper adds remote_query.headers to every request.
type headerRoundTripper struct {
	next    http.RoundTripper
	headers map[string]string
}

func (h headerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	return h.next.RoundTrip(req)
}

func redactURL(u *commoncfg.URL) string {
	c := *u.URL
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = nil
		}
	}
	return c.String()
}

// wrap names the remote in err and gives it the type Prometheus' API
// answers by: a timeout 503, a cancellation 499-like, anything else
// (down, 5xx, refused) a storage error (500).
func (a *remoteAPI) wrap(err error) error {
	if err == nil {
		return nil
	}
	named := fmt.Errorf("remote_query %s: %w", a.url, err)
	var ae *promv1.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ae) && ae.Type == promv1.ErrTimeout:
		return promql.ErrQueryTimeout(named.Error())
	case errors.Is(err, context.Canceled), errors.As(err, &ae) && ae.Type == promv1.ErrCanceled:
		return promql.ErrQueryCanceled(named.Error())
	case errors.As(err, &ae) && (ae.Type == promv1.ErrBadData || ae.Type == promv1.ErrExec):
		// The remote refused the query itself: not a storage failure.
		return named
	}
	return promql.ErrStorage{Err: named}
}

// newRemoteQuery is a query the remote evaluates; step 0 is an instant
// query at start. The text is parsed here first, under the engine's
// bounds, so that a bad query is refused (400) before any request.
func (e *Engine) newRemoteQuery(a *remoteAPI, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (promql.Query, error) {
	expr, err := e.parser.ParseExpr(qs)
	if err != nil {
		return nil, err
	}
	lookback := time.Duration(0)
	if opts != nil {
		lookback = opts.LookbackDelta()
	}
	timeout := min(a.timeout, e.opts.Timeout)
	return &remoteQuery{
		api: a, qs: qs, timeout: timeout, slots: e.slots, maxSamples: e.opts.MaxSamples,
		stmt:  &parser.EvalStmt{Expr: expr, Start: start, End: end, Interval: step, LookbackDelta: lookback},
		stats: &stats.Statistics{Timers: stats.NewQueryTimers(), Samples: stats.NewQuerySamples(false)},
	}, nil
}

// remoteQuery implements promql.Query over the remote API.
type remoteQuery struct {
	api     *remoteAPI
	qs      string
	timeout time.Duration
	// slots and maxSamples are the engine's: a forwarded query takes a
	// slot of query.max_concurrency, and an answer of more than
	// query.max_samples samples is refused, as a local one would be.
	slots      *slots
	maxSamples int
	stmt       *parser.EvalStmt
	stats      *stats.Statistics
	cancel     atomic.Pointer[context.CancelFunc]
}

func (q *remoteQuery) Exec(ctx context.Context) *promql.Result {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	q.cancel.Store(&cancel)
	if _, err := q.slots.Insert(ctx, q.qs); err != nil {
		return &promql.Result{Err: err}
	}
	defer q.slots.Delete(0)
	timer := q.stats.Timers.GetTimer(stats.EvalTotalTime).Start()
	defer timer.Stop()

	var opts []promv1.Option
	if lb := q.stmt.LookbackDelta; lb > 0 {
		opts = append(opts, promv1.WithLookbackDelta(lb))
	}
	var (
		v     model.Value
		warns promv1.Warnings
		infos promv1.Infos
		err   error
	)
	if q.stmt.Interval == 0 {
		v, warns, infos, err = q.api.api.Query(ctx, q.qs, q.stmt.Start, opts...)
	} else {
		v, warns, infos, err = q.api.api.QueryRange(ctx, q.qs, promv1.Range{Start: q.stmt.Start, End: q.stmt.End, Step: q.stmt.Interval}, opts...)
	}
	var annos annotations.Annotations
	for _, w := range slices.Concat([]string(warns), []string(infos)) {
		annos = annos.Add(fmt.Errorf("remote_query %s: %s", q.api.url, w))
	}
	if err != nil {
		return &promql.Result{Err: q.api.wrap(err), Warnings: annos}
	}
	if n := countSamples(v); n > q.maxSamples {
		return &promql.Result{Err: promql.ErrTooManySamples(fmt.Sprintf("the answer of remote_query %s (%d samples, query.max_samples %d)", q.api.url, n, q.maxSamples)), Warnings: annos}
	}
	val, dropped := fromModel(v)
	if dropped > 0 {
		annos = annos.Add(fmt.Errorf("remote_query %s: %d native histogram series dropped (the hub reads float samples only)", q.api.url, dropped))
	}
	return &promql.Result{Value: val, Warnings: annos}
}

func (q *remoteQuery) Close()                      {}
func (q *remoteQuery) Statement() parser.Statement { return q.stmt }
func (q *remoteQuery) Stats() *stats.Statistics    { return q.stats }
func (q *remoteQuery) String() string              { return q.qs }
func (q *remoteQuery) Cancel() {
	if c := q.cancel.Load(); c != nil {
		(*c)()
	}
}

func countSamples(v model.Value) int {
	switch v := v.(type) {
	case model.Vector:
		return len(v)
	case model.Matrix:
		n := 0
		for _, ss := range v {
			n += len(ss.Values) + len(ss.Histograms)
		}
		return n
	}
	return 1
}

// fromModel turns the client's answer into the engine's values; native
// histogram samples are dropped and counted.
func fromModel(v model.Value) (parser.Value, int) {
	dropped := 0
	switch v := v.(type) {
	case model.Vector:
		out := make(promql.Vector, 0, len(v))
		for _, s := range v {
			if s.Histogram != nil {
				dropped++
				continue
			}
			out = append(out, promql.Sample{Metric: fromMetric(s.Metric), T: int64(s.Timestamp), F: float64(s.Value)})
		}
		return out, dropped
	case model.Matrix:
		out := make(promql.Matrix, 0, len(v))
		for _, ss := range v {
			if len(ss.Histograms) > 0 {
				dropped++
			}
			if len(ss.Values) == 0 {
				continue
			}
			pts := make([]promql.FPoint, len(ss.Values))
			for i, p := range ss.Values {
				pts[i] = promql.FPoint{T: int64(p.Timestamp), F: float64(p.Value)}
			}
			out = append(out, promql.Series{Metric: fromMetric(ss.Metric), Floats: pts})
		}
		return out, dropped
	case *model.Scalar:
		return promql.Scalar{T: int64(v.Timestamp), V: float64(v.Value)}, 0
	case *model.String:
		return promql.String{T: int64(v.Timestamp), V: v.Value}, 0
	}
	return promql.Vector{}, 0
}

func fromMetric(m model.Metric) labels.Labels {
	b := labels.NewScratchBuilder(len(m))
	for k, v := range m {
		b.Add(string(k), string(v))
	}
	b.Sort()
	return b.Labels()
}

// remoteQuerier answers storage.Querier from the remote API: label names
// and values from /api/v1/labels and /api/v1/label/<name>/values, series
// (Select with hints.Func "series", as /api/v1/series and the dashboard
// ask) from /api/v1/series, and samples from a range-vector query.
type remoteQuerier struct {
	api        *remoteAPI
	mint, maxt int64
}

func (q remoteQuerier) times() (time.Time, time.Time) {
	return time.UnixMilli(q.mint), time.UnixMilli(q.maxt)
}

func (q remoteQuerier) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, q.api.timeout)
}

func selectorText(ms []*labels.Matcher) []string {
	if len(ms) == 0 {
		return nil
	}
	return []string{(&parser.VectorSelector{LabelMatchers: ms}).String()}
}

func (q remoteQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	start, end := q.times()
	names, warns, _, err := q.api.api.LabelNames(ctx, selectorText(ms), start, end, limitOpt(hints)...)
	if err != nil {
		return nil, q.annos(warns), q.api.wrap(err)
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(n)
	}
	sort.Strings(out)
	return out, q.annos(warns), nil
}

func (q remoteQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	start, end := q.times()
	vals, warns, _, err := q.api.api.LabelValues(ctx, name, selectorText(ms), start, end, limitOpt(hints)...)
	if err != nil {
		return nil, q.annos(warns), q.api.wrap(err)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	sort.Strings(out)
	return out, q.annos(warns), nil
}

func limitOpt(h *storage.LabelHints) []promv1.Option {
	if h != nil && h.Limit > 0 {
		return []promv1.Option{promv1.WithLimit(uint64(h.Limit))}
	}
	return nil
}

func (q remoteQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	if len(ms) == 0 {
		return storage.EmptySeriesSet() // no selector selects nothing
	}
	ctx, cancel := q.ctx(ctx)
	defer cancel()
	mint, maxt := q.mint, q.maxt
	if hints != nil && hints.Start != 0 && hints.End != 0 {
		mint, maxt = hints.Start, hints.End
	}
	var (
		series []storage.Series
		warns  promv1.Warnings
	)
	if hints != nil && hints.Func == "series" {
		sets, w, _, err := q.api.api.Series(ctx, selectorText(ms), time.UnixMilli(mint), time.UnixMilli(maxt))
		if err != nil {
			return storage.ErrSeriesSet(q.api.wrap(err))
		}
		warns = w
		for _, ls := range sets {
			series = append(series, storage.NewListSeries(fromMetric(model.Metric(ls)), nil))
		}
	} else {
		// The raw samples of (mint-1, maxt]: an instant range-vector
		// query, which every Prometheus-compatible API serves.
		sel := fmt.Sprintf("%s[%dms]", selectorText(ms)[0], maxt-mint+1)
		v, w, _, err := q.api.api.Query(ctx, sel, time.UnixMilli(maxt))
		if err != nil {
			return storage.ErrSeriesSet(q.api.wrap(err))
		}
		warns = w
		if m, ok := v.(model.Matrix); ok {
			for _, ss := range m {
				pts := make([]chunks.Sample, 0, len(ss.Values))
				for _, p := range ss.Values {
					pts = append(pts, fsample{t: int64(p.Timestamp), f: float64(p.Value)})
				}
				series = append(series, storage.NewListSeries(fromMetric(ss.Metric), pts))
			}
		}
	}
	if sortSeries {
		slices.SortFunc(series, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	}
	return &listSeriesSet{series: series, warns: q.annos(warns), i: -1}
}

func (remoteQuerier) Close() error { return nil }

func (q remoteQuerier) annos(warns promv1.Warnings) annotations.Annotations {
	var a annotations.Annotations
	for _, w := range warns {
		a = a.Add(fmt.Errorf("remote_query %s: %s", q.api.url, w))
	}
	return a
}

type listSeriesSet struct {
	series []storage.Series
	warns  annotations.Annotations
	i      int
}

func (s *listSeriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *listSeriesSet) At() storage.Series                { return s.series[s.i] }
func (s *listSeriesSet) Err() error                        { return nil }
func (s *listSeriesSet) Warnings() annotations.Annotations { return s.warns }

// fsample is one float sample, for storage.NewListSeries.
type fsample struct {
	t int64
	f float64
}

func (s fsample) T() int64                      { return s.t }
func (s fsample) ST() int64                     { return 0 }
func (s fsample) F() float64                    { return s.f }
func (s fsample) H() *histogram.Histogram       { return nil }
func (s fsample) FH() *histogram.FloatHistogram { return nil }
func (s fsample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fsample) Copy() chunks.Sample           { return s }
