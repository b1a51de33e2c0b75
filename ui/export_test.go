package ui

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// TestFederateLatestSample: /federate serves the latest sample within the
// lookback, one TYPE line per name, the external labels where the series
// lacks them, and Prometheus' 400 without match[].
func TestFederateLatestSample(t *testing.T) {
	ts := newTestServer(t, func(o *Options) {
		o.LookbackDelta = 5 * time.Minute
		o.PromConfig = func() promconfig.Config {
			c := promconfig.DefaultConfig
			c.GlobalConfig.ExternalLabels = labels.FromStrings("box", "gpu-01", "job", "ignored")
			return c
		}
	})
	now := time.Now().UnixMilli()
	ts.importText(fmt.Sprintf("fed_a{job=\"x\"} 1 %d\nfed_a{job=\"x\"} 2 %d\nfed_b 7 %d\nfed_old 3 %d\n",
		now-20_000, now-10_000, now-10_000, now-int64(10*time.Minute/time.Millisecond)))

	code, body := ts.get("/federate")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "no match[] parameter provided")

	code, body = ts.get("/federate?" + url.Values{"match[]": {`{__name__=~"fed_.*"}`}}.Encode())
	require.Equal(t, http.StatusOK, code, body)
	want := fmt.Sprintf("# TYPE fed_a untyped\nfed_a{job=\"x\",box=\"gpu-01\",instance=\"\"} 2 %d\n"+
		"# TYPE fed_b untyped\nfed_b{box=\"gpu-01\",instance=\"\",job=\"ignored\"} 7 %d\n", now-10_000, now-10_000)
	require.Equal(t, want, body)
}

// TestExportImportLines: the export's lines import back as they are, split
// by max_rows_per_line, with VictoriaMetrics' spellings of NaN and Inf; a
// bad line is a 400 naming it.
func TestExportImportLines(t *testing.T) {
	ts := newTestServer(t, nil)
	b := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
	body := fmt.Sprintf(`{"metric":{"__name__":"ex_a","job":"j"},"values":[1.5,null,"Infinity","-Infinity",4],"timestamps":[%d,%d,%d,%d,%d]}
{"metric":{"__name__":"ex_b"},"values":[7],"timestamps":[%d]}
`, b, b+1000, b+2000, b+3000, b+4000, b)
	code, out := ts.post("/api/v1/import", "application/json", []byte(body))
	require.Equal(t, http.StatusNoContent, code, out)
	ts.db.Flush()

	q := url.Values{"match[]": {`{__name__=~"ex_.*"}`}, "start": {fmt.Sprint(b / 1000)}, "end": {fmt.Sprint(b/1000 + 10)}}
	code, out = ts.get("/api/v1/export?" + q.Encode())
	require.Equal(t, http.StatusOK, code, out)
	// NaN is taken but not kept: the storage, as VictoriaMetrics, drops
	// NaN samples other than stale markers (which export leaves out).
	require.Equal(t, fmt.Sprintf(`{"metric":{"__name__":"ex_a","job":"j"},"values":[1.5,"Infinity","-Infinity",4],"timestamps":[%d,%d,%d,%d]}
{"metric":{"__name__":"ex_b"},"values":[7],"timestamps":[%d]}
`, b, b+2000, b+3000, b+4000, b), out)

	q.Set("max_rows_per_line", "2")
	code, out = ts.get("/api/v1/export?" + q.Encode())
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, 3, strings.Count(out, "\n"), out)

	q.Set("end", fmt.Sprintf("%.3f", float64(b+1000)/1000))
	code, out = ts.get("/api/v1/export?" + q.Encode())
	require.Equal(t, http.StatusOK, code, out)
	require.Contains(t, out, fmt.Sprintf(`"values":[1.5],"timestamps":[%d]}`, b))

	// A gzip body, as vmctl may send.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = fmt.Fprintf(zw, `{"metric":{"__name__":"ex_gz"},"values":[3],"timestamps":[%d]}`+"\n", b)
	require.NoError(t, zw.Close())
	req := httptest.NewRequest(http.MethodPost, "/api/v1/import", &gz)
	req.Header.Set("Content-Encoding", "gzip")
	code, out = ts.do(req)
	require.Equal(t, http.StatusNoContent, code, out)
	ts.db.Flush()
	code, out = ts.get("/api/v1/export?" + url.Values{"match[]": {"ex_gz"}, "start": {fmt.Sprint(b / 1000)}}.Encode())
	require.Equal(t, http.StatusOK, code, out)
	require.Equal(t, fmt.Sprintf(`{"metric":{"__name__":"ex_gz"},"values":[3],"timestamps":[%d]}`+"\n", b), out)

	code, out = ts.get("/api/v1/export")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, out, "no match[] parameter provided")

	code, out = ts.post("/api/v1/import", "application/json",
		[]byte(fmt.Sprintf(`{"metric":{"__name__":"ex_c"},"values":[1],"timestamps":[%d]}`+"\n"+`{"metric":{"__name__":"ex_c"},"values":[1,2],"timestamps":[%d]}`, b, b)))
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, out, "line 2: `timestamps` array size must match")
	require.Contains(t, out, "nothing of this body was stored") // one batch: rolled back
}

// TestImportJSONLinesCountsLabelLimit: a JSON line over the label limits
// is refused with 400 like the other imports, and its samples (with the
// batch's pending ones) are counted as rejected for label_limit.
func TestImportJSONLinesCountsLabelLimit(t *testing.T) {
	ts := newTestServer(t, func(o *Options) {
		o.LabelLimits = func() LabelLimits { return LabelLimits{Count: 3} }
	})
	before := testutil.ToFloat64(ts.srv.ingest.rejected.WithLabelValues(rejectLabelLimit))
	t0 := time.Now().Add(-time.Hour).UnixMilli()
	body := fmt.Sprintf(`{"metric":{"__name__":"ok","job":"j"},"values":[1,2],"timestamps":[%[1]d,%[2]d]}
{"metric":{"__name__":"wide","job":"j","a":"1","b":"2"},"values":[1,2,3],"timestamps":[%[1]d,%[2]d,%[3]d]}
`, t0, t0+15000, t0+30000)
	code, out := ts.post("/api/v1/import", "application/json", []byte(body))
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Contains(t, out, "label_limit")
	require.Contains(t, out, "line 2")
	require.Equal(t, before+5, testutil.ToFloat64(ts.srv.ingest.rejected.WithLabelValues(rejectLabelLimit)))
}
