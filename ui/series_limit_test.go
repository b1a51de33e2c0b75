package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/scrape"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/storage/storagetest"
)

// TestSeriesLimitOverTheCap: with more series matching than the storage's
// series cap, /api/v1/series, /api/v1/labels and /api/v1/label/<name>/values
// with limit answer as Prometheus does (limit results and the warning
// "results truncated due to limit"); without limit the cap answers 422.
// The limit is searched for in the index (storage.searchLimited), so the
// answer holds the limit's series, not all that match.
func TestSeriesLimitOverTheCap(t *testing.T) {
	const capSeries = 1000
	opts := storage.DefaultOptions()
	opts.MaxSeriesPerQuery = capSeries
	db := storagetest.OpenOptions(t, opts)
	sc, err := scrape.New(scrape.Options{Appendable: db, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	srv, err := New(Options{
		Storage: db, Engine: query.New(query.Options{}, nil, nil), Targets: sc.Manager(),
		ConfigYAML: func() string { return "global: {}\n" }, Gatherer: prometheus.NewRegistry(), BuildInfo: buildInfoForTest,
	})
	require.NoError(t, err)
	srv.SetReady(true)
	ts := &testServer{t: t, db: db, srv: srv, h: srv.Handler()}

	// 5,000 series in three families: one with a high-cardinality label,
	// one split by job, one whose series lack the label i.
	base := time.Now().Add(-10 * time.Minute).UnixMilli()
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "lim_wide{i=\"%d\"} 1 %d\n", i, base)
	}
	for i := range 1500 {
		fmt.Fprintf(&b, "lim_jobs{job=\"j%d\",i=\"%d\"} 1 %d\n", i%3, i, base)
	}
	for i := range 500 {
		fmt.Fprintf(&b, "lim_bare{pod=\"p%d\"} 1 %d\n", i, base)
	}
	ts.importText(b.String())

	type answer struct {
		Status   string          `json:"status"`
		Data     json.RawMessage `json:"data"`
		Warnings []string        `json:"warnings"`
		Error    string          `json:"error"`
	}
	get := func(path string, params url.Values) (int, answer) {
		t.Helper()
		code, body := ts.get(path + "?" + params.Encode())
		var a answer
		require.NoError(t, json.Unmarshal([]byte(body), &a), body)
		return code, a
	}
	all := url.Values{"match[]": {`{__name__=~"lim_.*"}`}}
	with := func(limit int) url.Values {
		v := url.Values{"limit": {fmt.Sprint(limit)}}
		for k, vs := range all {
			v[k] = vs
		}
		return v
	}

	code, a := get("/api/v1/series", all)
	require.Equal(t, http.StatusUnprocessableEntity, code, "without limit the series cap applies: %s", a.Error)

	for _, limit := range []int{1, 10, 999, 2500, 4999} {
		code, a = get("/api/v1/series", with(limit))
		require.Equal(t, http.StatusOK, code, a.Error)
		var series []map[string]string
		require.NoError(t, json.Unmarshal(a.Data, &series))
		require.Len(t, series, limit)
		require.Equal(t, []string{"results truncated due to limit"}, a.Warnings, "limit %d", limit)
		seen := map[string]bool{}
		for _, s := range series {
			require.True(t, strings.HasPrefix(s["__name__"], "lim_"), "%v", s)
			key := fmt.Sprint(s)
			require.False(t, seen[key], "no series twice: %v", s)
			seen[key] = true
		}
	}
	// A limit at or over the count: every series, no warning.
	for _, limit := range []int{5000, 20000} {
		code, a = get("/api/v1/series", with(limit))
		require.Equal(t, http.StatusOK, code, a.Error)
		var series []map[string]string
		require.NoError(t, json.Unmarshal(a.Data, &series))
		require.Len(t, series, 5000)
		require.Empty(t, a.Warnings)
	}

	// Label values and names with match[] over the cap.
	code, a = get("/api/v1/label/i/values", all)
	require.Equal(t, http.StatusUnprocessableEntity, code, a.Error)
	code, a = get("/api/v1/label/i/values", with(10))
	require.Equal(t, http.StatusOK, code, a.Error)
	var values []string
	require.NoError(t, json.Unmarshal(a.Data, &values))
	require.Len(t, values, 10)
	require.Equal(t, []string{"results truncated due to limit"}, a.Warnings)

	code, a = get("/api/v1/labels", with(2))
	require.Equal(t, http.StatusOK, code, a.Error)
	require.NoError(t, json.Unmarshal(a.Data, &values))
	require.Len(t, values, 2)
	require.Equal(t, []string{"results truncated due to limit"}, a.Warnings)
	code, a = get("/api/v1/labels", with(100))
	require.Equal(t, http.StatusOK, code, a.Error)
	require.NoError(t, json.Unmarshal(a.Data, &values))
	require.ElementsMatch(t, []string{"__name__", "i", "job", "pod"}, values)
	require.Empty(t, a.Warnings)
}
