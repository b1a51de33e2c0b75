package query

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
)

// promAPI serves the query, series and label endpoints of Prometheus'
// HTTP API over st with Prometheus' engine, in Prometheus' JSON; it
// answers 401 without the X-Scope-OrgID header.
func promAPI(t *testing.T, st storage.Queryable, requests *atomic.Int64) *httptest.Server {
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	ts := func(s string) time.Time {
		f, _ := strconv.ParseFloat(s, 64)
		return time.UnixMilli(int64(f * 1000))
	}
	ok := func(w http.ResponseWriter, data any) {
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("X-Scope-OrgID") != "fleet" {
			http.Error(w, "no tenant", http.StatusUnauthorized)
			return
		}
		_ = r.ParseForm()
		ctx := r.Context()
		switch p := r.URL.Path; {
		case p == "/api/v1/query" || p == "/api/v1/query_range":
			var (
				q   promql.Query
				err error
			)
			if p == "/api/v1/query" {
				q, err = eng.NewInstantQuery(ctx, st, nil, r.Form.Get("query"), ts(r.Form.Get("time")))
			} else {
				step, _ := strconv.ParseFloat(r.Form.Get("step"), 64)
				q, err = eng.NewRangeQuery(ctx, st, nil, r.Form.Get("query"), ts(r.Form.Get("start")), ts(r.Form.Get("end")), time.Duration(step*float64(time.Second)))
			}
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": "bad_data", "error": err.Error()})
				return
			}
			res := q.Exec(ctx)
			require.NoError(t, res.Err)
			ok(w, map[string]any{"resultType": res.Value.Type(), "result": res.Value})
		case p == "/api/v1/series":
			qr, _ := st.Querier(ts(r.Form.Get("start")).UnixMilli(), ts(r.Form.Get("end")).UnixMilli())
			defer qr.Close()
			ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(r.Form["match[]"][0])
			require.NoError(t, err)
			var out []labels.Labels
			for ss := qr.Select(ctx, true, nil, ms...); ss.Next(); {
				out = append(out, ss.At().Labels())
			}
			ok(w, out)
		case p == "/api/v1/labels":
			qr, _ := st.Querier(0, 1<<62)
			defer qr.Close()
			names, _, _ := qr.LabelNames(ctx, nil)
			ok(w, names)
		case strings.HasPrefix(p, "/api/v1/label/"):
			qr, _ := st.Querier(0, 1<<62)
			defer qr.Close()
			vals, _, _ := qr.LabelValues(ctx, strings.Split(p, "/")[4], nil)
			ok(w, vals)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRemoteQuery: in hub mode the engine's queries are answered by a
// remote Prometheus API (here Prometheus' engine over another storage,
// behind an HTTP server that wants a header) with the same values as
// evaluated there, whatever Queryable the caller passes; series, labels
// and samples read through Queryable come from the remote; a bad query
// is refused before any request; a remote that is gone fails the query
// with an error naming it; Apply(nil config) goes back to local.
func TestRemoteQuery(t *testing.T) {
	fleet := promqltest.LoadedStorage(t, `load 15s
  req_bucket{box="a",le="0.5"} 0+1x40
  req_bucket{box="a",le="+Inf"} 0+1x40
  req_bucket{box="b",le="0.5"} 0+0x40
  req_bucket{box="b",le="+Inf"} 0+1x40
`)
	t.Cleanup(func() { fleet.Close() })
	local := promqltest.LoadedStorage(t, "load 15s\n  hub_own 1+0x40\n")
	t.Cleanup(func() { local.Close() })
	var requests atomic.Int64
	srv := promAPI(t, fleet, &requests)

	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	rq := NewRemoteQuery()
	next, err := rq.Prepare(&config.RemoteQueryConfig{
		URL:              &commoncfg.URL{URL: u},
		Headers:          map[string]string{"X-Scope-OrgID": "fleet"},
		HTTPClientConfig: commoncfg.DefaultHTTPClientConfig,
	})
	require.NoError(t, err)
	rq.Apply(next)
	require.Equal(t, srv.URL, rq.URL())
	require.Equal(t, []string{"box"}, rq.BoxLabels())
	eng := New(Options{RemoteQuery: rq}, nil, nil)
	direct := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	ctx := context.Background()
	at := time.Unix(300, 0)
	const p95 = `histogram_quantile(0.95, sum by (le, box) (rate(req_bucket[1m])))`

	// Instant: the remote's answer, although the caller passes local.
	q, err := eng.NewInstantQuery(ctx, local, nil, p95, at)
	require.NoError(t, err)
	res := q.Exec(ctx)
	require.NoError(t, res.Err)
	want, err := direct.NewInstantQuery(ctx, fleet, nil, p95, at)
	require.NoError(t, err)
	wres := want.Exec(ctx)
	require.NoError(t, wres.Err)
	// An instant vector has no order: compare sorted.
	byLabels := func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) }
	gotV, wantV := res.Value.(promql.Vector), wres.Value.(promql.Vector)
	slices.SortFunc(gotV, byLabels)
	slices.SortFunc(wantV, byLabels)
	require.Len(t, gotV, 2)
	require.Equal(t, wantV.String(), gotV.String())

	// Range: the same.
	q, err = eng.NewRangeQuery(ctx, local, nil, p95, at.Add(-2*time.Minute), at, 30*time.Second)
	require.NoError(t, err)
	res = q.Exec(ctx)
	require.NoError(t, res.Err)
	want, err = direct.NewRangeQuery(ctx, fleet, nil, p95, at.Add(-2*time.Minute), at, 30*time.Second)
	require.NoError(t, err)
	wres = want.Exec(ctx)
	require.Equal(t, wres.Value.String(), res.Value.String())

	// The hub's own series is not in the remote: instead of, not merged.
	q, err = eng.NewInstantQuery(ctx, local, nil, "hub_own", at)
	require.NoError(t, err)
	res = q.Exec(ctx)
	require.NoError(t, res.Err)
	require.Empty(t, res.Value.(promql.Vector))

	// An answer beyond query.max_samples is refused.
	small := New(Options{RemoteQuery: rq, MaxSamples: 5}, nil, nil)
	q, err = small.NewRangeQuery(ctx, local, nil, p95, at.Add(-2*time.Minute), at, 15*time.Second)
	require.NoError(t, err)
	res = q.Exec(ctx)
	var tooMany promql.ErrTooManySamples
	require.ErrorAs(t, res.Err, &tooMany)
	require.ErrorContains(t, res.Err, "remote_query "+srv.URL)

	// A bad query is refused here, before any request.
	before := requests.Load()
	_, err = eng.NewInstantQuery(ctx, local, nil, "sum(", at)
	require.Error(t, err)
	require.Equal(t, before, requests.Load())

	// Queryable: label values, series and samples from the remote.
	hq := rq.Queryable(local)
	qr, err := hq.Querier(0, at.UnixMilli())
	require.NoError(t, err)
	vals, _, err := qr.LabelValues(ctx, "box", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, vals)
	names, _, err := qr.LabelValues(ctx, labels.MetricName, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"req_bucket"}, names)
	ss := qr.Select(ctx, true, &storage.SelectHints{Start: 0, End: at.UnixMilli(), Func: "series"}, labels.MustNewMatcher(labels.MatchEqual, "box", "b"))
	var series []string
	for ss.Next() {
		series = append(series, ss.At().Labels().String())
	}
	require.NoError(t, ss.Err())
	require.Equal(t, []string{`{__name__="req_bucket", box="b", le="+Inf"}`, `{__name__="req_bucket", box="b", le="0.5"}`}, series)
	ss = qr.Select(ctx, true, &storage.SelectHints{Start: at.Add(-time.Minute).UnixMilli(), End: at.UnixMilli()},
		labels.MustNewMatcher(labels.MatchEqual, "box", "a"), labels.MustNewMatcher(labels.MatchEqual, "le", "0.5"))
	require.True(t, ss.Next())
	it := ss.At().Iterator(nil)
	n := 0
	for it.Next() != 0 {
		n++
	}
	require.Equal(t, 5, n, "the samples of [at-1m, at] at 15s")
	require.False(t, ss.Next())
	require.NoError(t, qr.Close())

	// The remote gone: an error naming it, as a storage error (500).
	srv.Close()
	q, err = eng.NewInstantQuery(ctx, local, nil, p95, at)
	require.NoError(t, err)
	res = q.Exec(ctx)
	require.Error(t, res.Err)
	require.Contains(t, res.Err.Error(), "remote_query "+srv.URL)
	var es promql.ErrStorage
	require.True(t, errors.As(res.Err, &es), "%T", res.Err)
	qr, err = hq.Querier(0, at.UnixMilli())
	require.NoError(t, err)
	_, _, err = qr.LabelValues(ctx, "box", nil)
	require.ErrorContains(t, err, "remote_query "+srv.URL)

	// Local mode again.
	next, err = rq.Prepare(nil)
	require.NoError(t, err)
	rq.Apply(next)
	require.Empty(t, rq.URL())
	q, err = eng.NewInstantQuery(ctx, local, nil, "hub_own", at)
	require.NoError(t, err)
	res = q.Exec(ctx)
	require.NoError(t, res.Err)
	require.Len(t, res.Value.(promql.Vector), 1)
}
