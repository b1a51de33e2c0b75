package rangecache_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/downsample"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/scrape"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/ui"
	"github.com/aiserve/appliance/ui/rangecache"
)

// fixture is a real storage with three hours of a gauge and a histogram
// at 15 s, rolled up into 1m and 5m, served by two API servers over the
// same storage and engine: one with the range cache, one without.
type fixture struct {
	t              *testing.T
	db             *storage.DB
	ds             *downsample.Downsampler
	now            time.Time
	cache          *rangecache.Cache
	reg            *prometheus.Registry
	cached, direct http.Handler
}

func newFixture(t *testing.T) *fixture {
	now := time.Now().Truncate(time.Hour).Add(-time.Hour)
	clock := func() time.Time { return now }
	opts := storage.DefaultOptions()
	opts.Path = t.TempDir()
	opts.Now = clock
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	app := db.AppenderV2(context.Background())
	add := func(ls labels.Labels, ts time.Time, v float64) {
		_, err := app.Append(0, ls, 0, ts.UnixMilli(), v, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	for i, ts := 0, now.Add(-3*time.Hour); !ts.After(now); i, ts = i+1, ts.Add(15*time.Second) {
		for _, inst := range []string{"a", "b"} {
			add(labels.FromStrings("__name__", "queue", "job", "vllm", "instance", inst), ts, float64((i*7)%23))
			for j, le := range []string{"0.1", "1", "+Inf"} {
				add(labels.FromStrings("__name__", "lat_bucket", "job", "vllm", "instance", inst, "le", le), ts, float64(i*(j+1)))
			}
		}
	}
	require.NoError(t, app.Commit())
	db.Flush()
	ds, err := downsample.New(db, downsample.Options{Now: clock, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	t.Cleanup(ds.Close)
	require.NoError(t, ds.Step(context.Background()))

	eng := query.New(query.Options{}, nil, nil)
	reg := prometheus.NewRegistry()
	cache := rangecache.New(rangecache.Options{Store: db, Parser: eng.Parser(), Now: clock, Passes: ds.Passes, Registerer: reg})
	server := func(c *rangecache.Cache) http.Handler {
		sc, err := scrape.New(scrape.Options{Appendable: db, Registerer: prometheus.NewRegistry()})
		require.NoError(t, err)
		srv, err := ui.New(ui.Options{
			ListenAddress: "127.0.0.1:0",
			Storage:       db, Engine: eng, Targets: sc.Manager(),
			Gatherer: prometheus.NewRegistry(), Tiers: db, RangeCache: c,
		})
		require.NoError(t, err)
		srv.SetReady(true)
		return srv.Handler()
	}
	return &fixture{t: t, db: db, ds: ds, now: now, cache: cache, reg: reg, cached: server(cache), direct: server(nil)}
}

// get runs a query_range over the last span before now on step's grid
// and returns the answer's data and tiers.
func (f *fixture) get(h http.Handler, expr string, span, step time.Duration, hdr ...string) (any, string) {
	f.t.Helper()
	end := f.now.Truncate(step)
	path := fmt.Sprintf("/api/v1/query_range?query=%s&start=%d&end=%d&step=%d",
		url.QueryEscape(expr), end.Add(-span).Unix(), f.now.Unix(), int(step.Seconds()))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	h.ServeHTTP(rec, req)
	require.Equal(f.t, http.StatusOK, rec.Code, rec.Body.String())
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(rec.Body)
		require.NoError(f.t, err)
		b, err := io.ReadAll(zr)
		require.NoError(f.t, err)
		rec.Body = bytes.NewBuffer(b)
	}
	var body struct {
		Status string `json:"status"`
		Data   any    `json:"data"`
	}
	require.NoError(f.t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	require.Equal(f.t, "success", body.Status)
	return body.Data, rec.Header().Get(ui.TiersHeader)
}

// same asserts that the cached server answers expr exactly as the
// uncached one.
func (f *fixture) same(expr string, span, step time.Duration) {
	f.t.Helper()
	got, gotTiers := f.get(f.cached, expr, span, step)
	want, wantTiers := f.get(f.direct, expr, span, step)
	require.Equal(f.t, want, got, "%s at step %s", expr, step)
	require.Equal(f.t, wantTiers, gotTiers, "%s at step %s", expr, step)
	require.NotEmpty(f.t, want.(map[string]any)["result"], "%s at step %s", expr, step)
}

// lateSample commits a sample well inside every cached range and older
// than the tiers' watermarks: the gauge jumps, a bucket counter resets.
func (f *fixture) lateSample() {
	t := f.t
	late := f.now.Add(-75*time.Minute - 7*time.Second)
	app := f.db.AppenderV2(context.Background())
	for _, ls := range []labels.Labels{
		labels.FromStrings("__name__", "queue", "job", "vllm", "instance", "a"),
		labels.FromStrings("__name__", "lat_bucket", "job", "vllm", "instance", "a", "le", "1"),
	} {
		_, err := app.Append(0, ls, 0, late.UnixMilli(), 1000, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	f.db.Flush()
}

var cases = []struct {
	expr       string
	span, step time.Duration
}{
	{"queue", 2 * time.Hour, time.Minute},                                         // raw
	{"max_over_time(queue[10m])", 2 * time.Hour, time.Minute},                     // raw
	{"sum by (le) (rate(lat_bucket[10m]))", 2 * time.Hour, 10 * time.Minute},      // 1m
	{"max by (instance) (queue)", 2*time.Hour + 30*time.Minute, 10 * time.Minute}, // 1m
	{"sum by (le) (rate(lat_bucket[30m]))", 3 * time.Hour, 30 * time.Minute},      // 5m
}

func TestCachedAnswersAreTheUncachedOnes(t *testing.T) {
	f := newFixture(t)
	for _, c := range cases {
		f.same(c.expr, c.span, c.step) // cold: fills the cache
	}
	cold := f.cache.Stats()
	require.Zero(t, cold.Hits)
	for _, c := range cases {
		f.same(c.expr, c.span, c.step) // from the cache
	}
	warm := f.cache.Stats()
	require.Equal(t, int64(len(cases)), warm.Hits-cold.Hits, "every second request is answered from the cache")
	require.Positive(t, warm.Points)
	// The same counts as metrics.
	require.Equal(t, float64(warm.Hits), metric(t, f.reg, "appliance_query_cache_hits_total"))
	require.Equal(t, float64(warm.Requests), metric(t, f.reg, "appliance_query_cache_requests_total"))
	require.Equal(t, float64(warm.Points), metric(t, f.reg, "appliance_query_cache_points_served_total"))
	require.Positive(t, warm.Bytes)
	require.Equal(t, float64(warm.Bytes), metric(t, f.reg, "appliance_query_cache_bytes"))
	// Compressed for a client that takes gzip, and the same.
	c := cases[2]
	got, _ := f.get(f.cached, c.expr, c.span, c.step, "Accept-Encoding", "gzip")
	want, _ := f.get(f.direct, c.expr, c.span, c.step)
	require.Equal(t, want, got)
	require.Greater(t, f.cache.Stats().Hits, warm.Hits)
	// A reset forgets everything.
	f.cache.Reset()
	f.same(c.expr, c.span, c.step)
	require.Equal(t, warm.Hits+1, f.cache.Stats().Hits)
}

func TestLateSampleBetweenRequests(t *testing.T) {
	f := newFixture(t)
	for _, c := range cases {
		f.same(c.expr, c.span, c.step)
	}
	for _, c := range cases {
		f.same(c.expr, c.span, c.step)
	}
	warm := f.cache.Stats().Points // what a warm round serves
	f.lateSample()
	hits := f.cache.Stats().Points
	for _, c := range cases {
		f.same(c.expr, c.span, c.step) // before the rollups are redone
	}
	require.NoError(t, f.ds.Step(context.Background()))
	for _, c := range cases {
		f.same(c.expr, c.span, c.step) // after
	}
	require.Greater(t, f.cache.Stats().Points, hits, "points away from the late sample still come from the cache")
	// Once the rollups over it are redone (two passes more, three for
	// the hooks' order), its window is cached and served again.
	for range 3 {
		require.NoError(t, f.ds.Step(context.Background()))
	}
	for _, c := range cases {
		f.same(c.expr, c.span, c.step) // kept whole
	}
	before := f.cache.Stats()
	for _, c := range cases {
		f.same(c.expr, c.span, c.step) // served whole
	}
	after := f.cache.Stats()
	require.Equal(t, int64(len(cases)), after.Hits-before.Hits)
	require.Equal(t, warm, after.Points-before.Points, "as many points as before the late sample, its window's too, from the cache")
}

func TestUncacheableRequestsPassThrough(t *testing.T) {
	f := newFixture(t)
	for _, expr := range []string{"queue @ end()", "max_over_time(queue[10m:1m])", "queue offset -5m"} {
		f.same(expr, time.Hour, time.Minute)
		f.same(expr, time.Hour, time.Minute)
	}
	require.Zero(t, f.cache.Stats().Requests)
}

// nocache=1, VictoriaMetrics' parameter: evaluated whole every time, as if
// the cache were not there.
func TestNoCacheParameter(t *testing.T) {
	f := newFixture(t)
	end := f.now.Truncate(time.Minute)
	path := fmt.Sprintf("/api/v1/query_range?query=queue&start=%d&end=%d&step=60&nocache=1", end.Add(-time.Hour).Unix(), end.Unix())
	var bodies []string
	for range 2 {
		rec := httptest.NewRecorder()
		f.cached.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		bodies = append(bodies, rec.Body.String())
	}
	require.Equal(t, bodies[0], bodies[1])
	require.Contains(t, bodies[0], `"resultType":"matrix"`)
	require.Zero(t, f.cache.Stats().Requests, "nocache=1 goes past the cache")
	// Without it, the same request is counted (and kept).
	f.same("queue", time.Hour, time.Minute)
	require.NotZero(t, f.cache.Stats().Requests)
}

// A late sample that arrives while nobody asks, its rollups redone
// before the next request: the entries from before it are gone.
func TestLateSampleWhileIdle(t *testing.T) {
	f := newFixture(t)
	for _, c := range cases {
		f.same(c.expr, c.span, c.step)
	}
	f.lateSample()
	for range 3 {
		require.NoError(t, f.ds.Step(context.Background()))
	}
	for _, c := range cases {
		f.same(c.expr, c.span, c.step)
	}
}

// metric is the value reg gathers for name (a counter or a gauge).
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
