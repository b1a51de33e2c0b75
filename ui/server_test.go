package ui

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/prompb"
	apiv1 "github.com/prometheus/prometheus/web/api/v1"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/scrape"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/storage/storagetest"
)

// testServer is a Server over a real storage in a temp dir, with a scrape
// manager that has no jobs.
type testServer struct {
	t   testing.TB
	db  *storage.DB
	srv *Server
	h   http.Handler
}

func newTestServer(t testing.TB, mod func(*Options)) *testServer {
	t.Helper()
	db := storagetest.Open(t)
	sc, err := scrape.New(scrape.Options{Appendable: db, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	opts := Options{
		Storage:    db,
		Engine:     query.New(query.Options{}, nil, nil),
		Targets:    sc.Manager(),
		ConfigYAML: func() string { return "global: {}\n" },
		Gatherer:   prometheus.NewRegistry(),
		BuildInfo:  buildInfoForTest,
	}
	if mod != nil {
		mod(&opts)
	}
	srv, err := New(opts)
	require.NoError(t, err)
	srv.SetReady(true)
	return &testServer{t: t, db: db, srv: srv, h: srv.Handler()}
}

func (ts *testServer) do(req *http.Request) (int, string) {
	ts.t.Helper()
	rec := httptest.NewRecorder()
	ts.h.ServeHTTP(rec, req)
	if rec.Header().Get("Content-Encoding") == "gzip" {
		// As an HTTP client does, for a request that asked for gzip.
		zr, err := gzip.NewReader(rec.Body)
		require.NoError(ts.t, err)
		body, err := io.ReadAll(zr)
		require.NoError(ts.t, err)
		return rec.Code, string(body)
	}
	return rec.Code, rec.Body.String()
}

func (ts *testServer) get(path string) (int, string) {
	ts.t.Helper()
	return ts.do(httptest.NewRequest(http.MethodGet, path, nil))
}

func (ts *testServer) post(path, contentType string, body []byte) (int, string) {
	ts.t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	return ts.do(req)
}

// importText stores samples through the import endpoint and flushes.
func (ts *testServer) importText(body string) {
	ts.t.Helper()
	code, out := ts.post("/api/v1/import/prometheus", "text/plain", []byte(body))
	require.Equal(ts.t, http.StatusNoContent, code, out)
	ts.db.Flush()
}

type envelope struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

func decode(t *testing.T, body string) envelope {
	t.Helper()
	var e envelope
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e
}

// TestGrafanaHealthCheck: Grafana's Prometheus data source tests the
// connection with the query 1+1 (GET, and POST when configured so).
func TestGrafanaHealthCheck(t *testing.T) {
	ts := newTestServer(t, nil)
	code, body := ts.get("/api/v1/query?query=1%2B1")
	require.Equal(t, http.StatusOK, code, body)
	e := decode(t, body)
	require.Equal(t, "success", e.Status)
	require.Contains(t, string(e.Data), `"resultType":"scalar"`)
	require.Contains(t, string(e.Data), `"2"]`)

	code, body = ts.post("/api/v1/query", "application/x-www-form-urlencoded", []byte("query=1%2B1&time=1700000000"))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `[1700000000,"2"]`)
}

func TestQueryRangeSeriesLabels(t *testing.T) {
	ts := newTestServer(t, nil)
	base := time.Now().Add(-30 * time.Minute).Truncate(time.Minute)
	var b strings.Builder
	for i := 0; i < 10; i++ {
		for _, m := range []string{"llama", "qwen"} {
			fmt.Fprintf(&b, "vllm:num_requests_waiting{model_name=%q} %d %d\n", m, i, base.Add(time.Duration(i)*time.Minute).UnixMilli())
		}
	}
	ts.importText(b.String())

	form := url.Values{
		"query": {`sum(vllm:num_requests_waiting)`},
		"start": {fmt.Sprint(base.Unix())},
		"end":   {fmt.Sprint(base.Add(9 * time.Minute).Unix())},
		"step":  {"60"},
	}
	code, body := ts.post("/api/v1/query_range", "application/x-www-form-urlencoded", []byte(form.Encode()))
	require.Equal(t, http.StatusOK, code, body)
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(decode(t, body).Data, &data))
	require.Equal(t, "matrix", data.ResultType)
	require.Len(t, data.Result, 1)
	require.Len(t, data.Result[0].Values, 10)
	require.Equal(t, "18", data.Result[0].Values[9][1]) // 9 + 9

	start := fmt.Sprint(base.Unix())
	code, body = ts.get("/api/v1/series?match[]=vllm:num_requests_waiting&start=" + start + "&limit=1")
	require.Equal(t, http.StatusOK, code, body)
	e := decode(t, body)
	var series []map[string]string
	require.NoError(t, json.Unmarshal(e.Data, &series))
	require.Len(t, series, 1, "limit=1")

	code, body = ts.get("/api/v1/labels?start=" + start)
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `["__name__","model_name"]`, string(decode(t, body).Data))

	code, body = ts.get("/api/v1/label/model_name/values?start=" + start)
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `["llama","qwen"]`, string(decode(t, body).Data))
}

// TestBadQuery: Prometheus' error JSON with errorType bad_data and 400.
func TestBadQuery(t *testing.T) {
	ts := newTestServer(t, nil)
	code, body := ts.get("/api/v1/query?query=sum(rate(")
	require.Equal(t, http.StatusBadRequest, code)
	e := decode(t, body)
	require.Equal(t, "error", e.Status)
	require.Equal(t, "bad_data", e.ErrorType)
	require.Contains(t, e.Error, "parse error")

	code, body = ts.get("/api/v1/query_range?query=up&start=10&end=1&step=1")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "bad_data", decode(t, body).ErrorType)
}

func TestStatusEndpoints(t *testing.T) {
	ts := newTestServer(t, nil)
	ts.importText("a_metric{x=\"1\"} 1\na_metric{x=\"2\"} 2\nb_metric 3\n")

	code, body := ts.get("/api/v1/status/buildinfo")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"version":"9.9.9-test"`)

	code, body = ts.get("/api/v1/status/config")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"yaml":"global: {}\n"}`, string(decode(t, body).Data))

	code, body = ts.get("/api/v1/status/tsdb")
	require.Equal(t, http.StatusOK, code, body)
	var st struct {
		HeadStats struct {
			NumSeries  uint64 `json:"numSeries"`
			ChunkCount int64  `json:"chunkCount"`
		} `json:"headStats"`
		SeriesCountByMetricName []struct {
			Name  string `json:"name"`
			Value uint64 `json:"value"`
		} `json:"seriesCountByMetricName"`
		LabelValueCountByLabelName []struct {
			Name  string `json:"name"`
			Value uint64 `json:"value"`
		} `json:"labelValueCountByLabelName"`
	}
	require.NoError(t, json.Unmarshal(decode(t, body).Data, &st))
	require.Equal(t, uint64(3), st.HeadStats.NumSeries)
	require.GreaterOrEqual(t, st.HeadStats.ChunkCount, int64(0))
	require.Equal(t, "a_metric", st.SeriesCountByMetricName[0].Name)
	require.Equal(t, uint64(2), st.SeriesCountByMetricName[0].Value)
	require.NotEmpty(t, st.LabelValueCountByLabelName)
}

func TestMetadataFromStorage(t *testing.T) {
	ts := newTestServer(t, nil)
	code, body := ts.get("/api/v1/metadata")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{}`, string(decode(t, body).Data))

	ts.importText("# HELP gpu_temp GPU temperature.\n# TYPE gpu_temp gauge\ngpu_temp 61\n")
	code, body = ts.get("/api/v1/metadata?metric=gpu_temp")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"gpu_temp":[{"type":"gauge","help":"GPU temperature.","unit":""}]}`, string(decode(t, body).Data))

	code, body = ts.get("/api/v1/metadata?limit=x")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "bad_data", decode(t, body).ErrorType)
}

func TestImportRejectsWholeBody(t *testing.T) {
	ts := newTestServer(t, nil)
	f := func(path, body, wantErr string) {
		t.Helper()
		code, out := ts.post(path, "text/plain", []byte(body))
		require.Equal(t, http.StatusBadRequest, code, out)
		require.Contains(t, out, wantErr)
	}
	f("/api/v1/import/prometheus", "good_one 1\nbad{ 2\n", "line 2")
	f("/api/v1/import/prometheus", "good_two 1\ngood_two 2 notatimestamp\n", "line 2")
	f("/api/v1/import/prometheus?extra_label=nolabel", "good_three 1\n", "extra_label")
	ts.db.Flush()
	code, body := ts.get("/api/v1/series?match[]={__name__=~\"good_.*\"}")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `[]`, string(decode(t, body).Data), "nothing of a refused body is stored")
}

func TestBodyLimit(t *testing.T) {
	ts := newTestServer(t, func(o *Options) { o.MaxRequestBodyBytes = 1024 })
	big := []byte(strings.Repeat("x 1\n", 1000))
	code, out := ts.post("/api/v1/import/prometheus", "text/plain", big)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, out)
	require.Contains(t, out, "1024")

	// Chunked (no Content-Length): cut off while reading.
	req := httptest.NewRequest(http.MethodPost, "/api/v1/import/prometheus", io.MultiReader(bytes.NewReader(big)))
	req.ContentLength = -1
	code, out = ts.do(req)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, out)

	wr := &prompb.WriteRequest{}
	for i := 0; i < 200; i++ {
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
			Labels:  []prompb.Label{{Name: "__name__", Value: fmt.Sprintf("pushed_metric_with_a_long_name_%d", i)}},
			Samples: []prompb.Sample{{Timestamp: time.Now().UnixMilli(), Value: 1}},
		})
	}
	raw, err := wr.Marshal()
	require.NoError(t, err)
	code, out = ts.post("/api/v1/write", "application/x-protobuf", snappy.Encode(nil, raw))
	require.Equal(t, http.StatusRequestEntityTooLarge, code, out)
}

func TestBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	require.NoError(t, err)
	ts := newTestServer(t, func(o *Options) { o.BasicAuthUsers = map[string]string{"admin": string(hash)} })
	f := func(user, pass string, want int) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/query?query=1", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		code, _ := ts.do(req)
		require.Equal(t, want, code, "%s:%s", user, pass)
	}
	f("", "", http.StatusUnauthorized)
	f("admin", "wrong", http.StatusUnauthorized)
	f("nobody", "s3cret", http.StatusUnauthorized)
	f("admin", "s3cret", http.StatusOK)
	f("admin", "s3cret", http.StatusOK) // cached path
	code, _ := ts.get("/-/healthy")
	require.Equal(t, http.StatusUnauthorized, code, "auth guards every path")
}

func TestReadinessAndOps(t *testing.T) {
	reloads := 0
	ts := newTestServer(t, func(o *Options) {
		o.Reload = func() error {
			reloads++
			if reloads == 2 {
				return fmt.Errorf("bad.yml:3: unknown field")
			}
			return nil
		}
	})
	ts.srv.SetReady(false)
	code, _ := ts.get("/-/ready")
	require.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = ts.get("/api/v1/query?query=1")
	require.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = ts.get("/-/healthy")
	require.Equal(t, http.StatusOK, code)
	ts.srv.SetReady(true)
	code, _ = ts.get("/-/ready")
	require.Equal(t, http.StatusOK, code)

	code, _ = ts.post("/-/reload", "", nil)
	require.Equal(t, http.StatusOK, code)
	code, body := ts.post("/-/reload", "", nil)
	require.Equal(t, http.StatusInternalServerError, code)
	require.Contains(t, body, "bad.yml:3: unknown field")
	code, _ = ts.get("/-/reload")
	require.Equal(t, http.StatusMethodNotAllowed, code)

	code, _ = ts.get("/metrics")
	require.Equal(t, http.StatusOK, code)
}

var buildInfoForTest = apiv1.PrometheusVersion{Version: "9.9.9-test", GoVersion: "go"}

// TestHeadAnswersLikeGet: uptime checkers send HEAD; every GET route
// answers it with GET's status and headers and no body, through a real
// HTTP server (which is what drops the body).
func TestHeadAnswersLikeGet(t *testing.T) {
	ts := newTestServer(t, nil)
	hs := httptest.NewServer(ts.h)
	defer hs.Close()
	for _, path := range []string{"/", "/-/healthy", "/-/ready", "/api/v1/query?query=1", "/api/v1/status/buildinfo"} {
		get, err := http.Get(hs.URL + path)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, get.Body)
		get.Body.Close()
		head, err := http.Head(hs.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(head.Body)
		head.Body.Close()
		require.NoError(t, err)
		require.Equal(t, get.StatusCode, head.StatusCode, path)
		require.Equal(t, http.StatusOK, head.StatusCode, path)
		require.Equal(t, get.Header.Get("Content-Type"), head.Header.Get("Content-Type"), path)
		require.Empty(t, body, path)
	}
	// A route served only for POST still refuses HEAD.
	head, err := http.Head(hs.URL + "/-/reload")
	require.NoError(t, err)
	head.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, head.StatusCode)
}
