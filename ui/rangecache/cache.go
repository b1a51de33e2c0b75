package rangecache

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/aiserve/appliance/storage"
)

// Store is what the cache reads of the storage; *storage.DB implements it.
type Store interface {
	Retention(tier storage.Tier) time.Duration
	RolledUpTo(tier storage.Tier) time.Time
	AdaptForTiers(ctx context.Context, expr parser.Expr, start, end time.Time, step, lookback time.Duration) (time.Duration, bool)
	OnLateCommit(fn func(minT, maxT int64))
}

// Options configure a Cache.
type Options struct {
	Store Store
	// Parser parses query text as the engine does; nil: Prometheus'
	// default parser.
	Parser parser.Parser
	// LookbackDelta is the engine's default lookback (5m if zero).
	LookbackDelta time.Duration
	// Freshness: points newer than now - Freshness are never kept
	// (default 5m, VictoriaMetrics' -search.cacheTimestampOffset).
	Freshness time.Duration
	// MaxBytes bounds the points kept (default 64 MiB).
	MaxBytes int64
	// Bypass, when it returns true, sends every request through
	// uncached (remote read or hub mode: samples the cache cannot see
	// arrive); nil: never.
	Bypass func() bool
	// Passes counts the downsampler's finished passes
	// (downsample.Downsampler.Passes): the window of a late commit is
	// served from the cache again once the rollups over it are redone,
	// two passes after it was reported (three, for the order of the
	// late-commit hooks). nil: never again.
	Passes func() uint64
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Registerer, when set, gets the cache's metrics
	// (appliance_query_cache_*, read from Stats at scrape time).
	Registerer prometheus.Registerer
}

// Cache is a range-query result cache; see the package doc.
type Cache struct {
	o Options

	mu      sync.Mutex
	entries map[string]*entry
	bytes   int64
	clock   int64 // use counter for LRU
	// late are the windows of late commits whose rollups may not be
	// redone yet; lateSeq counts the late commits.
	late    []span
	lateSeq uint64
	stats   Stats
}

// Stats counts what the cache did.
type Stats struct {
	// Requests is the query_range requests it looked up, Hits those
	// answered with cached points, Points the points it served.
	Requests, Hits, Points int64
	// Bytes is what the kept points take (bounded by Options.MaxBytes),
	// Entries the grids they belong to.
	Bytes   int64
	Entries int
}

// Stats returns the counts so far.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.Bytes, st.Entries = c.bytes, len(c.entries)
	return st
}

// register adds the cache's metrics to r.
func (c *Cache) register(r prometheus.Registerer) {
	stat := func(f func(Stats) float64) func() float64 { return func() float64 { return f(c.Stats()) } }
	r.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "appliance_query_cache_requests_total",
			Help: "query_range requests the result cache looked up."}, stat(func(s Stats) float64 { return float64(s.Requests) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "appliance_query_cache_hits_total",
			Help: "query_range requests that found cached points."}, stat(func(s Stats) float64 { return float64(s.Hits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "appliance_query_cache_points_served_total",
			Help: "Points the result cache served instead of evaluating them."}, stat(func(s Stats) float64 { return float64(s.Points) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "appliance_query_cache_bytes",
			Help: "Bytes the result cache's kept points take."}, stat(func(s Stats) float64 { return float64(s.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "appliance_query_cache_max_bytes",
			Help: "The result cache's bound."}, func() float64 { return float64(c.o.MaxBytes) }),
	)
}

// span is a late commit's time range (inclusive, ms), dirty until the
// downsampler has finished pass number settled.
type span struct {
	lo, hi  int64
	settled uint64
}

// maxLateSpans bounds the late spans remembered; beyond it the oldest
// ones are merged into their neighbour (a wider span: fewer points
// cached, never a wrong one).
const maxLateSpans = 256

// New returns a cache and registers its late-commit hook on the store.
func New(o Options) *Cache {
	if o.Parser == nil {
		o.Parser = parser.NewParser(parser.Options{})
	}
	if o.LookbackDelta <= 0 {
		o.LookbackDelta = 5 * time.Minute
	}
	if o.Freshness <= 0 {
		o.Freshness = 5 * time.Minute
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 64 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Cache{o: o, entries: map[string]*entry{}}
	o.Store.OnLateCommit(c.noteLate)
	if o.Registerer != nil {
		c.register(o.Registerer)
	}
	return c
}

// noteLate is the storage's late-commit hook: it must be quick. The
// entries holding points over the span go at once; points over it are
// neither kept nor served until its rollups are redone.
func (c *Cache) noteLate(minT, maxT int64) {
	settled := uint64(math.MaxUint64)
	if c.o.Passes != nil {
		settled = c.o.Passes() + 3
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lateSeq++
	c.late = addSpan(c.late, span{minT, maxT, settled})
	for k, e := range c.entries {
		if e.from-e.window <= maxT && minT <= e.to {
			delete(c.entries, k)
			c.bytes -= e.size
		}
	}
}

// dirty returns the late spans not yet rolled up again, dropping the
// others. c.mu is held.
func (c *Cache) dirty() []span {
	if c.o.Passes == nil || len(c.late) == 0 {
		return c.late
	}
	done := c.o.Passes()
	c.late = slices.DeleteFunc(c.late, func(s span) bool { return s.settled <= done })
	return c.late
}

func addSpan(ss []span, s span) []span {
	ss = append(ss, s)
	slices.SortFunc(ss, func(a, b span) int { return cmpInt(a.lo, b.lo) })
	out := ss[:1]
	for _, x := range ss[1:] {
		last := &out[len(out)-1]
		if x.lo <= last.hi+1 {
			last.hi = max(last.hi, x.hi)
			last.settled = max(last.settled, x.settled)
			continue
		}
		out = append(out, x)
	}
	for len(out) > maxLateSpans {
		// merge the two closest neighbours
		best := 0
		for i := 1; i+1 < len(out); i++ {
			if out[i+1].lo-out[i].hi < out[best+1].lo-out[best].hi {
				best = i
			}
		}
		out[best].hi = out[best+1].hi
		out[best].settled = max(out[best].settled, out[best+1].settled)
		out = slices.Delete(out, best+1, best+2)
	}
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Reset drops every cached point.
func (c *Cache) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[string]*entry{}
	c.bytes = 0
}

// coverage is each tier's covered time [lo, hi) as the storage's plan
// sees it (storage.DB's coverage: retention start, watermark + 1).
type coverage struct{ lo, hi [storage.NumTiers]int64 }

func (c *Cache) coverage(now time.Time) coverage {
	var cv coverage
	for _, t := range storage.Tiers {
		cv.lo[t] = now.Add(-c.o.Store.Retention(t)).UnixMilli()
		if t == storage.TierRaw {
			cv.hi[t] = math.MaxInt64
			continue
		}
		wm := c.o.Store.RolledUpTo(t).UnixMilli()
		if wm <= 0 {
			cv.hi[t] = cv.lo[t]
		} else {
			cv.hi[t] = wm + 1
		}
	}
	return cv
}

// entry is the points kept for one grid.
type entry struct {
	key      string
	from, to int64 // the grid points known: from, from+step, ..., to
	step     int64
	window   int64 // how far back a point reads, ms
	pref     storage.Tier
	sig      string
	cov      coverage // when its points were computed
	series   []*cseries
	tiers    []string
	warnings []string
	infos    []string
	size     int64
	used     int64
}

type cseries struct {
	metric json.RawMessage
	lbls   labels.Labels
	pts    []cpoint // by time
}

type cpoint struct {
	t    int64
	hist bool
	raw  json.RawMessage
}

// request is a parsed query_range request the cache may serve.
type request struct {
	form       url.Values
	key        string
	start, end int64 // ms
	step       int64 // ms
	query      string
	maxTier    storage.Tier
	lookback   time.Duration
}

// knownParams are the parameters a cacheable request may carry.
var knownParams = map[string]bool{"query": true, "start": true, "end": true, "step": true, "timeout": true, "lookback_delta": true, "max_source_resolution": true, "extra_label": true}

func parseRequest(r *http.Request, defLookback time.Duration) (*request, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return nil, false
	}
	if err := r.ParseForm(); err != nil {
		return nil, false
	}
	if r.Form.Get("nocache") == "1" {
		return nil, false // VictoriaMetrics' parameter for "do not use the cache"
	}
	for k := range r.Form {
		if !knownParams[k] {
			return nil, false
		}
	}
	q := &request{form: r.Form, query: r.Form.Get("query"), lookback: defLookback, maxTier: storage.Tier5m}
	var ok bool
	if q.start, ok = parseMs(r.Form.Get("start")); !ok {
		return nil, false
	}
	if q.end, ok = parseMs(r.Form.Get("end")); !ok {
		return nil, false
	}
	step, err := parseDuration(r.Form.Get("step"))
	if err != nil || step <= 0 || step%time.Millisecond != 0 || q.end < q.start {
		return nil, false
	}
	q.step = step.Milliseconds()
	if v := r.Form.Get("max_source_resolution"); v != "" {
		t, err := storage.ParseTier(v)
		if err != nil {
			return nil, false
		}
		q.maxTier = t
	}
	if v := r.Form.Get("lookback_delta"); v != "" {
		d, err := parseDuration(v)
		if err != nil || d <= 0 {
			return nil, false
		}
		q.lookback = d
	}
	if (q.end-q.start)/q.step > 11000 {
		return nil, false // the API refuses it
	}
	var b strings.Builder
	for _, k := range []string{"query", "step", "lookback_delta", "max_source_resolution", "extra_label"} {
		vs := slices.Clone(r.Form[k])
		slices.Sort(vs)
		b.WriteString(k)
		for _, v := range vs {
			b.WriteByte('\x00')
			b.WriteString(v)
		}
		b.WriteByte('\x01')
	}
	b.WriteString(strconv.FormatInt(((q.start%q.step)+q.step)%q.step, 10))
	q.key = b.String()
	return q, true
}

// parseMs parses a time the way Prometheus' API does when it is a plain
// number of seconds; anything else is not cached.
func parseMs(s string) (int64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e12 {
		return 0, false
	}
	sec, frac := math.Modf(f)
	frac = math.Round(frac*1000) / 1000
	return time.Unix(int64(sec), int64(frac*float64(time.Second))).UnixMilli(), true
}

func parseDuration(s string) (time.Duration, error) {
	if d, err := strconv.ParseFloat(s, 64); err == nil {
		ts := d * float64(time.Second)
		if math.IsNaN(ts) || ts >= float64(math.MaxInt64) || ts < float64(math.MinInt64) {
			return 0, strconv.ErrRange
		}
		return time.Duration(ts), nil
	}
	d, err := model.ParseDuration(s)
	return time.Duration(d), err
}

func fmtMs(ms int64) string {
	return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
}

// plan is what the adapted query looks like over one range.
type plan struct {
	sig    string
	window int64
}

// adapt parses the query and rewrites it for the tiers over [start,
// end], as package query does before the engine runs it; ok is false
// for queries the cache does not keep.
func (c *Cache) adapt(ctx context.Context, q *request, start, end int64) (plan, bool) {
	expr, err := c.o.Parser.ParseExpr(q.query)
	if err != nil {
		return plan{}, false
	}
	cacheable := true
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.SubqueryExpr:
			cacheable = false
		case *parser.VectorSelector:
			if n.Timestamp != nil || n.StartOrEnd != 0 || n.OriginalOffset < 0 {
				cacheable = false
			}
		}
		return nil
	})
	if !cacheable {
		return plan{}, false
	}
	actx := storage.WithMaxSourceResolution(ctx, q.maxTier)
	lb, _ := c.o.Store.AdaptForTiers(actx, expr, time.UnixMilli(start), time.UnixMilli(end), time.Duration(q.step)*time.Millisecond, q.lookback)
	lb = max(lb, q.lookback)
	var maxRange, maxOffset time.Duration
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.MatrixSelector:
			maxRange = max(maxRange, n.Range)
		case *parser.VectorSelector:
			maxOffset = max(maxOffset, n.OriginalOffset)
		}
		return nil
	})
	// A point reads (t - range - offset - lookback, t]; a rollup point
	// sums raw samples up to one 5m window before its time, and a minute
	// covers the clocks of the cache and the storage.
	w := maxRange + maxOffset + lb + storage.Tier5m.Resolution() + time.Minute
	return plan{sig: expr.String() + "\x00" + lb.String(), window: w.Milliseconds()}, true
}

// Handler wraps the API handler: query_range requests go through the
// cache, everything else straight to next.
func (c *Cache) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/query_range") || (c.o.Bypass != nil && c.o.Bypass()) {
			next.ServeHTTP(w, r)
			return
		}
		q, ok := parseRequest(r, c.o.LookbackDelta)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		c.serve(w, r, next, q)
	})
}

func (c *Cache) serve(w http.ResponseWriter, r *http.Request, next http.Handler, q *request) {
	ctx := r.Context()
	now := c.o.Now()
	whole, ok := c.adapt(ctx, q, q.start, q.end)
	if !ok {
		next.ServeHTTP(w, r)
		return
	}
	before := c.coverage(now)
	seen := c.lateState()
	pref := storage.TierForStep(time.Duration(q.step)*time.Millisecond, q.maxTier)
	last := q.start + (q.end-q.start)/q.step*q.step // the grid's last point

	// The run of cached points to serve: [runFrom, runTo].
	runFrom, runTo, cached := c.lookup(q, whole, pref, before)
	type part struct{ from, to int64 }
	var parts []part
	if cached != nil {
		if runFrom > q.start {
			parts = append(parts, part{q.start, runFrom - q.step})
		}
		if runTo < last {
			parts = append(parts, part{runTo + q.step, last})
		}
		for _, p := range parts {
			pl, ok := c.adapt(ctx, q, p.from, p.to)
			if !ok || pl.sig != whole.sig {
				cached = nil // the parts would run as another query: run it whole
				break
			}
		}
	}
	if cached == nil {
		parts = []part{{q.start, last}}
	}

	answers := make([]*answer, len(parts))
	for i, p := range parts {
		rec := c.call(r, next, q, p.from, p.to, cached == nil)
		if cached == nil {
			// The whole request: its answer goes out as the API wrote
			// it; keep its points if it is a matrix.
			a, err := decodeAnswer(rec.Body.Bytes(), rec.Header().Get("X-Appliance-Tiers"))
			write(w, r, rec.Code, rec.Header(), rec.Body.Bytes())
			if rec.Code == http.StatusOK && err == nil {
				c.store(q, whole, pref, seen, before, c.coverage(c.o.Now()), now, a)
			}
			return
		}
		a, err := decodeAnswer(rec.Body.Bytes(), rec.Header().Get("X-Appliance-Tiers"))
		if rec.Code != http.StatusOK || err != nil {
			write(w, r, rec.Code, rec.Header(), rec.Body.Bytes())
			return
		}
		answers[i] = a
	}
	merged := merge(cached, runFrom, runTo, answers)
	c.store(q, whole, pref, seen, before, c.coverage(c.o.Now()), now, merged)
	body, err := merged.encode()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if len(merged.tiers) > 0 {
		h.Set("X-Appliance-Tiers", strings.Join(merged.tiers, ","))
	}
	write(w, r, http.StatusOK, h, body)
}

// write sends an answer, gzipped when the client takes it (as the API
// itself answers; the parts were asked uncompressed, to be read).
func write(w http.ResponseWriter, r *http.Request, code int, h http.Header, body []byte) {
	copyHeader(w.Header(), h)
	if len(body) > 1024 && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Del("Content-Length")
		w.Header().Add("Vary", "Accept-Encoding")
		w.WriteHeader(code)
		gz := gzip.NewWriter(w)
		_, _ = gz.Write(body)
		_ = gz.Close()
		return
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = vs
	}
}

// call runs the API over [from, to] of q's grid. The whole request
// keeps the client's encoding; parts are asked uncompressed.
func (c *Cache) call(r *http.Request, next http.Handler, q *request, from, to int64, whole bool) *httptest.ResponseRecorder {
	form := url.Values{}
	for k, vs := range q.form {
		form[k] = vs
	}
	form.Set("start", fmtMs(from))
	form.Set("end", fmtMs(to))
	req := r.Clone(r.Context())
	req.Method = http.MethodGet
	req.URL.RawQuery = form.Encode()
	req.Body = http.NoBody
	req.ContentLength = 0
	req.Form, req.PostForm = nil, nil
	req.Header = req.Header.Clone()
	req.Header.Del("Content-Type")
	req.Header.Del("Content-Length")
	req.Header.Del("Accept-Encoding") // decode the answer to keep it
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, req)
	return rec
}

// lateState is what a request saw of the late commits when it began: a
// rollup redone while it ran may be half in its answer.
type lateState struct {
	seq   uint64
	dirty []span
}

func (c *Cache) lateState() lateState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return lateState{c.lateSeq, slices.Clone(c.dirty())}
}

// lookup returns the longest run of q's grid points that the cache holds
// and may serve now, and the entry holding them (nil: none).
func (c *Cache) lookup(q *request, pl plan, pref storage.Tier, now coverage) (from, to int64, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Requests++
	e = c.entries[q.key]
	if e == nil || e.sig != pl.sig || e.step != q.step {
		return 0, 0, nil
	}
	lo := max(e.from, q.start)
	hi := min(e.to, q.start+(q.end-q.start)/q.step*q.step)
	late := c.dirty()
	bestFrom, bestTo, ok := longestRun(lo, hi, q.step, func(t int64) bool { return c.valid(t, pl.window, pref, e.cov, now, late) })
	if !ok {
		return 0, 0, nil
	}
	c.clock++
	e.used = c.clock
	c.stats.Hits++
	c.stats.Points += (bestTo-bestFrom)/q.step + 1
	return bestFrom, bestTo, e
}

// valid tells whether the point at t, computed when the tiers covered
// then, is what the query computes when they cover now. c.mu is held.
func (c *Cache) valid(t, window int64, pref storage.Tier, then, now coverage, late []span) bool {
	a, b := t-window, t
	for _, s := range late {
		if s.lo <= b && a <= s.hi {
			return false
		}
	}
	// Inside the coverage of the tier the step prefers and of every
	// coarser one the query may read (storage may read a coarser tier
	// where its rollups give the same answer), then and now: the tier
	// read is the same.
	inside := true
	for k := pref; k < storage.NumTiers; k++ {
		inside = inside && a >= max(then.lo[k], now.lo[k]) && b < min(then.hi[k], now.hi[k])
	}
	if inside {
		return true
	}
	cross := func(x, y int64) bool {
		if x == y {
			return false
		}
		lo, hi := min(x, y), max(x, y)
		return lo <= b && a <= hi
	}
	for _, k := range storage.Tiers {
		if cross(then.lo[k], now.lo[k]) || cross(then.hi[k], now.hi[k]) {
			return false
		}
	}
	return true
}

// store keeps the points of a that are older than the cut-off and valid
// over the coverage before and after they were computed.
func (c *Cache) store(q *request, pl plan, pref storage.Tier, seen lateState, before, after coverage, now time.Time, a *answer) {
	if a == nil || a.resultType != "matrix" {
		return
	}
	// Storage reports the commits at or before the 1m watermark
	// (OnLateCommit): only points before it are kept, whatever tiers the
	// query reads; before the 5m watermark too when it may read 5m.
	if c.o.Store.RolledUpTo(storage.Tier1m).UnixMilli() <= 0 {
		return
	}
	cut := min(now.Add(-c.o.Freshness).UnixMilli(), before.hi[storage.Tier1m]-1)
	if q.maxTier >= storage.Tier5m {
		cut = min(cut, before.hi[storage.Tier5m]-1)
	}
	last := q.start + (q.end-q.start)/q.step*q.step
	end := min(last, cut)
	if end < q.start {
		return
	}
	end = q.start + (end-q.start)/q.step*q.step
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lateSeq != seen.seq {
		return // a late commit during the request: its points may miss it
	}
	late := append(slices.Clone(seen.dirty), c.dirty()...)
	// the longest run of storable points
	bestFrom, bestTo, ok := longestRun(q.start, end, q.step, func(t int64) bool { return c.valid(t, pl.window, pref, before, after, late) })
	if !ok {
		return
	}
	e := &entry{key: q.key, from: bestFrom, to: bestTo, step: q.step, window: pl.window, pref: pref, sig: pl.sig, cov: before,
		tiers: a.tiers, warnings: a.warnings, infos: a.infos}
	for _, s := range a.series {
		i := sort.Search(len(s.pts), func(i int) bool { return s.pts[i].t >= bestFrom })
		j := sort.Search(len(s.pts), func(i int) bool { return s.pts[i].t > bestTo })
		if i == j {
			continue
		}
		cs := &cseries{metric: s.metric, lbls: s.lbls, pts: slices.Clone(s.pts[i:j])}
		e.size += int64(len(cs.metric)) + 64
		for _, p := range cs.pts {
			e.size += int64(len(p.raw)) + 32
		}
		e.series = append(e.series, cs)
	}
	if e.size > c.o.MaxBytes/4 {
		return
	}
	if old := c.entries[q.key]; old != nil {
		c.bytes -= old.size
	}
	c.clock++
	e.used = c.clock
	c.entries[q.key] = e
	c.bytes += e.size
	for c.bytes > c.o.MaxBytes {
		var oldest *entry
		for _, x := range c.entries {
			if oldest == nil || x.used < oldest.used {
				oldest = x
			}
		}
		delete(c.entries, oldest.key)
		c.bytes -= oldest.size
	}
}

// answer is a decoded query_range answer.
type answer struct {
	resultType string
	series     []*cseries
	tiers      []string
	warnings   []string
	infos      []string
}

type wireSeries struct {
	Metric     json.RawMessage   `json:"metric"`
	Values     []json.RawMessage `json:"values,omitempty"`
	Histograms []json.RawMessage `json:"histograms,omitempty"`
}

type wireAnswer struct {
	Status string   `json:"status"`
	Tiers  []string `json:"tiers,omitempty"`
	Data   struct {
		ResultType string       `json:"resultType"`
		Result     []wireSeries `json:"result"`
	} `json:"data"`
	Warnings []string `json:"warnings,omitempty"`
	Infos    []string `json:"infos,omitempty"`
}

func decodeAnswer(body []byte, tiersHeader string) (*answer, error) {
	var wa wireAnswer
	if err := json.Unmarshal(body, &wa); err != nil {
		return nil, err
	}
	a := &answer{resultType: wa.Data.ResultType, tiers: wa.Tiers, warnings: wa.Warnings, infos: wa.Infos}
	if a.tiers == nil && tiersHeader != "" {
		a.tiers = strings.Split(tiersHeader, ",")
	}
	for _, ws := range wa.Data.Result {
		var m map[string]string
		if err := json.Unmarshal(ws.Metric, &m); err != nil {
			return nil, err
		}
		s := &cseries{metric: ws.Metric, lbls: labels.FromMap(m)}
		for _, kind := range []struct {
			raw  []json.RawMessage
			hist bool
		}{{ws.Values, false}, {ws.Histograms, true}} {
			for _, p := range kind.raw {
				var pair []json.RawMessage
				if err := json.Unmarshal(p, &pair); err != nil || len(pair) != 2 {
					return nil, errBadPoint
				}
				f, err := strconv.ParseFloat(string(pair[0]), 64)
				if err != nil {
					return nil, errBadPoint
				}
				s.pts = append(s.pts, cpoint{t: int64(math.Round(f * 1000)), hist: kind.hist, raw: p})
			}
		}
		slices.SortStableFunc(s.pts, func(a, b cpoint) int { return cmpInt(a.t, b.t) })
		a.series = append(a.series, s)
	}
	return a, nil
}

type constErr string

func (e constErr) Error() string { return string(e) }

const errBadPoint = constErr("rangecache: a point of the answer is not [time, value]")

// merge joins the cached run [from, to] of e with the parts' answers,
// per series, sorted by labels as Prometheus sorts a matrix.
func merge(e *entry, from, to int64, parts []*answer) *answer {
	out := &answer{resultType: "matrix"}
	byKey := map[string]*cseries{}
	add := func(s *cseries, pts []cpoint) {
		if len(pts) == 0 {
			return
		}
		k := string(s.metric)
		x := byKey[k]
		if x == nil {
			x = &cseries{metric: s.metric, lbls: s.lbls}
			byKey[k] = x
			out.series = append(out.series, x)
		}
		x.pts = append(x.pts, pts...)
	}
	tiers := map[string]bool{}
	notes := func(dst *[]string, src []string) {
		for _, s := range src {
			if !slices.Contains(*dst, s) {
				*dst = append(*dst, s)
			}
		}
	}
	for _, s := range e.series {
		i := sort.Search(len(s.pts), func(i int) bool { return s.pts[i].t >= from })
		j := sort.Search(len(s.pts), func(i int) bool { return s.pts[i].t > to })
		add(s, s.pts[i:j])
	}
	for _, t := range e.tiers {
		tiers[t] = true
	}
	notes(&out.warnings, e.warnings)
	notes(&out.infos, e.infos)
	for _, a := range parts {
		for _, s := range a.series {
			add(s, s.pts)
		}
		for _, t := range a.tiers {
			tiers[t] = true
		}
		notes(&out.warnings, a.warnings)
		notes(&out.infos, a.infos)
	}
	for _, s := range out.series {
		slices.SortStableFunc(s.pts, func(a, b cpoint) int { return cmpInt(a.t, b.t) })
	}
	slices.SortFunc(out.series, func(a, b *cseries) int { return labels.Compare(a.lbls, b.lbls) })
	for _, t := range storage.Tiers {
		if tiers[t.String()] {
			out.tiers = append(out.tiers, t.String())
		}
	}
	return out
}

// encode writes the answer as the API does (with the tiers field that
// package ui's tiers middleware adds).
func (a *answer) encode() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"status":"success",`)
	if len(a.tiers) > 0 {
		t, _ := json.Marshal(a.tiers)
		b.WriteString(`"tiers":`)
		b.Write(t)
		b.WriteByte(',')
	}
	b.WriteString(`"data":{"resultType":"matrix","result":[`)
	for i, s := range a.series {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"metric":`)
		b.Write(s.metric)
		for _, hist := range []bool{false, true} {
			n := 0
			for _, p := range s.pts {
				if p.hist != hist {
					continue
				}
				if n == 0 {
					if hist {
						b.WriteString(`,"histograms":[`)
					} else {
						b.WriteString(`,"values":[`)
					}
				} else {
					b.WriteByte(',')
				}
				b.Write(p.raw)
				n++
			}
			if n > 0 {
				b.WriteByte(']')
			}
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
	for _, f := range []struct {
		name string
		v    []string
	}{{"warnings", a.warnings}, {"infos", a.infos}} {
		if len(f.v) > 0 {
			j, err := json.Marshal(f.v)
			if err != nil {
				return nil, err
			}
			b.WriteString(`,"` + f.name + `":`)
			b.Write(j)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// longestRun is the longest run of grid points lo, lo+step, ... up to hi
// for which ok holds (the first such run when several are as long); ok
// is false when there is none.
func longestRun(lo, hi, step int64, valid func(int64) bool) (from, to int64, ok bool) {
	from, to, runFrom := int64(0), int64(-1), int64(-1)
	for t := lo; t <= hi; t += step {
		if !valid(t) {
			runFrom = -1
			continue
		}
		if runFrom < 0 {
			runFrom = t
		}
		if to < from || t-runFrom > to-from {
			from, to = runFrom, t
		}
	}
	return from, to, to >= from
}
