package query

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/storage/remote"
	"github.com/stretchr/testify/require"
)

// TestRemoteRead: a query reads its own Queryable and the remote_read
// endpoints, through Prometheus' read handler on a real HTTP server;
// read_recent false asks the remote only before the local start; headers
// are sent; a remote that refuses or is gone is a warning naming it, the
// local answer stands; Apply swaps the set.
func TestRemoteRead(t *testing.T) {
	remoteSt := promqltest.LoadedStorage(t, "load 1m\n  remote_metric 0+1x100\n")
	t.Cleanup(func() { remoteSt.Close() })
	localSt := promqltest.LoadedStorage(t, "load 1m\n  local_metric 0+2x100\n")
	t.Cleanup(func() { localSt.Close() })

	handler := remote.NewReadHandler(slog.New(slog.DiscardHandler), nil, remoteSt,
		func() promconfig.Config { return promconfig.DefaultConfig }, 0, 1, 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Scope") != "t1" {
			http.Error(w, "no scope", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL + "/api/v1/read")
	require.NoError(t, err)

	rrConfig := func(readRecent bool, headers map[string]string) *promconfig.RemoteReadConfig {
		c := promconfig.DefaultRemoteReadConfig
		c.URL = &commoncfg.URL{URL: u}
		c.ReadRecent = readRecent
		c.Headers = headers
		return &c
	}
	localStart := int64(3000 * 1000) // the local storage answers from t=3000s
	rr := NewRemoteRead(func() (int64, error) { return localStart, nil })
	eng := New(Options{RemoteRead: rr}, nil, nil)
	ctx := context.Background()
	instant := func(q string, at float64) (map[string]float64, []string) {
		t.Helper()
		qr, err := eng.NewInstantQuery(ctx, localSt, nil, q, time.UnixMilli(int64(at*1000)))
		require.NoError(t, err)
		defer qr.Close()
		res := qr.Exec(ctx)
		require.NoError(t, res.Err)
		v, err := res.Vector()
		require.NoError(t, err)
		out := map[string]float64{}
		for _, s := range v {
			out[s.Metric.Get(model.MetricNameLabel)] = s.F
		}
		warnings, _ := res.Warnings.AsStrings(q, 0, 0)
		return out, warnings
	}
	sel := `{__name__=~"remote_metric|local_metric"}`

	// No endpoint: the local storage only.
	got, ws := instant(sel, 6000)
	require.Equal(t, map[string]float64{"local_metric": 200}, got)
	require.Empty(t, ws)

	// read_recent true, with the header the remote wants: both.
	next, err := rr.Prepare([]*promconfig.RemoteReadConfig{rrConfig(true, map[string]string{"X-Scope": "t1"})}, labels.EmptyLabels())
	require.NoError(t, err)
	got, _ = instant(sel, 6000)
	require.Equal(t, map[string]float64{"local_metric": 200}, got, "Prepare changes nothing")
	rr.Apply(next)
	require.Equal(t, 1, rr.Len())
	got, ws = instant(sel, 6000)
	require.Equal(t, map[string]float64{"local_metric": 200, "remote_metric": 100}, got)
	require.Empty(t, ws)

	// read_recent false: the remote is asked only before the local start.
	next, err = rr.Prepare([]*promconfig.RemoteReadConfig{rrConfig(false, map[string]string{"X-Scope": "t1"})}, labels.EmptyLabels())
	require.NoError(t, err)
	rr.Apply(next)
	got, _ = instant(sel, 6000)
	require.Equal(t, map[string]float64{"local_metric": 200}, got)
	got, _ = instant(sel, 1200)
	require.Equal(t, map[string]float64{"local_metric": 40, "remote_metric": 20}, got)

	// Without the header the remote refuses: a warning naming it.
	next, err = rr.Prepare([]*promconfig.RemoteReadConfig{rrConfig(true, nil)}, labels.EmptyLabels())
	require.NoError(t, err)
	rr.Apply(next)
	got, ws = instant(sel, 6000)
	require.Equal(t, map[string]float64{"local_metric": 200}, got)
	require.Len(t, ws, 1)
	require.Contains(t, ws[0], u.String())
	require.Contains(t, ws[0], "401")

	// The remote gone: the same.
	next, err = rr.Prepare([]*promconfig.RemoteReadConfig{rrConfig(true, map[string]string{"X-Scope": "t1"})}, labels.EmptyLabels())
	require.NoError(t, err)
	rr.Apply(next)
	srv.Close()
	got, ws = instant(sel, 6000)
	require.Equal(t, map[string]float64{"local_metric": 200}, got)
	require.Len(t, ws, 1)
	require.Contains(t, ws[0], u.String())

	// The same endpoint twice is refused, and nothing changes.
	_, err = rr.Prepare([]*promconfig.RemoteReadConfig{rrConfig(true, nil), rrConfig(true, nil)}, labels.EmptyLabels())
	require.ErrorContains(t, err, "configured twice")
	require.Equal(t, 1, rr.Len())
	next, err = rr.Prepare(nil, labels.EmptyLabels())
	require.NoError(t, err)
	rr.Apply(next)
	require.Equal(t, 0, rr.Len())
}

// TestRemoteReadLocalRangeReadsLocalOnly: with read_recent false, a range
// the local storage holds asks no endpoint, and the query reads the local
// querier itself, not a merge of it with nothing.
func TestRemoteReadLocalRangeReadsLocalOnly(t *testing.T) {
	u, err := url.Parse("http://127.0.0.1:1/api/v1/read") // never asked
	require.NoError(t, err)
	c := promconfig.DefaultRemoteReadConfig
	c.URL = &commoncfg.URL{URL: u}
	rr := NewRemoteRead(func() (int64, error) { return 1000, nil })
	next, err := rr.Prepare([]*promconfig.RemoteReadConfig{&c}, labels.EmptyLabels())
	require.NoError(t, err)
	rr.Apply(next)

	local := &struct{ storage.Querier }{storage.NoopQuerier()}
	q, err := rr.queryable(storage.QueryableFunc(func(int64, int64) (storage.Querier, error) { return local, nil })).Querier(2000, 3000)
	require.NoError(t, err)
	require.Same(t, local, q)
}
