package ui

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// TestImportStreamsBatches: a body of many batches with a bad line far
// into it stores the batches before the bad line's, and the 400 names
// the line and what was stored.
func TestImportStreamsBatches(t *testing.T) {
	ts := newTestServer(t, nil)
	base := time.Now().Add(-time.Hour).UnixMilli()
	var b strings.Builder
	lines := 0
	for b.Len() < 3*importBatchBytes {
		fmt.Fprintf(&b, "stream_probe{i=\"%d\"} %d %d\n", lines, lines, base)
		lines++
	}
	good := lines
	b.WriteString("stream_probe{i=\"bad\" 1\n") // line good+1
	for range 100 {
		fmt.Fprintf(&b, "stream_after %d %d\n", lines, base)
		lines++
	}
	code, out := ts.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()))
	require.Equal(t, http.StatusBadRequest, code, out)
	require.Contains(t, out, fmt.Sprintf("line %d: ", good+1))

	// The batches before the bad line's are stored, as the answer says.
	var storedLines, storedSamples, next int
	_, err := fmt.Sscanf(out[strings.Index(out, "; lines 1-"):], "; lines 1-%d (%d samples) were stored, nothing from line %d on", &storedLines, &storedSamples, &next)
	require.NoError(t, err, out)
	require.Equal(t, storedLines, storedSamples, "one sample a line")
	require.Equal(t, storedLines+1, next)
	require.Positive(t, storedLines)
	require.Less(t, storedLines, good+1)
	ts.db.Flush()
	require.Equal(t, fmt.Sprint(storedSamples), ts.instantValue(t, "count(stream_probe)", base))
	require.Equal(t, "", ts.instantValue(t, "count(stream_after)", base), "nothing from the bad line on")

	// A good body of many batches is stored whole.
	b.Reset()
	whole := 0
	for ; b.Len() <= 2*importBatchBytes; whole++ {
		fmt.Fprintf(&b, "stream_whole{i=\"%d\"} %d %d\n", whole, whole, base)
	}
	code, out = ts.post("/api/v1/import/prometheus?extra_label=site=lab1", "text/plain", []byte(b.String()))
	require.Equal(t, http.StatusNoContent, code, out)
	ts.db.Flush()
	require.Equal(t, fmt.Sprint(whole), ts.instantValue(t, `count(stream_whole{site="lab1"})`, base))
}

// TestImportOpenMetricsBatches: an OpenMetrics body longer than a batch
// (one # EOF, at the end) is stored whole.
func TestImportOpenMetricsBatches(t *testing.T) {
	ts := newTestServer(t, nil)
	base := time.Now().Add(-time.Hour).Unix()
	var b strings.Builder
	b.WriteString("# TYPE om_probe gauge\n# HELP om_probe A probe.\n")
	n := 0
	for ; b.Len() <= 2*importBatchBytes; n++ {
		fmt.Fprintf(&b, "om_probe{i=\"%d\"} %d %d\n", n, n, base)
	}
	b.WriteString("# EOF\n")
	code, out := ts.post("/api/v1/import/prometheus", "application/openmetrics-text; version=1.0.0", []byte(b.String()))
	require.Equal(t, http.StatusNoContent, code, out)
	ts.db.Flush()
	require.Equal(t, fmt.Sprint(n), ts.instantValue(t, "count(om_probe)", base*1000))
}

// TestImportChunkedOverLimit: a chunked body cut off by the body limit
// after some batches says what was stored.
func TestImportChunkedOverLimit(t *testing.T) {
	ts := newTestServer(t, func(o *Options) { o.MaxRequestBodyBytes = 3 * importBatchBytes })
	base := time.Now().Add(-time.Hour).UnixMilli()
	var b bytes.Buffer
	for i := 0; b.Len() < 4*importBatchBytes; i++ {
		fmt.Fprintf(&b, "chunked_probe{i=\"%d\"} 1 %d\n", i, base)
	}
	req, err := http.NewRequest(http.MethodPost, "/api/v1/import/prometheus", io.MultiReader(&b))
	require.NoError(t, err)
	req.ContentLength = -1
	code, out := ts.do(req)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, out)
	require.Regexp(t, `lines 1-\d+ \(\d+ samples\) were stored`, out)
}

func TestLineBatches(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	body := "a 1\nb 2\n" + long + " 3\nc 4"
	lb := newLineBatches(strings.NewReader(body), 16)
	var got []string
	var firsts []int
	for {
		batch, first, err := lb.next()
		if len(batch) > 0 {
			got = append(got, string(batch))
			firsts = append(firsts, first)
		}
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	require.Len(t, got, 2)
	require.True(t, got[0] == "a 1\nb 2\n"+long+" 3\n", "whole lines, the long one included")
	require.Equal(t, "c 4", got[1])
	require.Equal(t, []int{1, 4}, firsts)
}

// instantValue is the value of a one-element instant query at ms, or ""
// when the result is empty.
func (ts *testServer) instantValue(t *testing.T, q string, ms int64) string {
	t.Helper()
	code, body := ts.get("/api/v1/query?" + url.Values{"query": {q}, "time": {fmt.Sprintf("%.3f", float64(ms)/1000)}}.Encode())
	require.Equal(t, http.StatusOK, code, body)
	data := string(decode(t, body).Data)
	if strings.Contains(data, `"result":[]`) {
		return ""
	}
	i := strings.LastIndex(data, `,"`)
	j := strings.LastIndex(data, `"]`)
	require.True(t, i >= 0 && j > i, data)
	return data[i+2 : j]
}

// TestImportKnownSeries: a batch whose series the body named before is
// read without the text parser where every line is a plain sample, with
// the same samples, and through the parser (the same errors) otherwise.
func TestImportKnownSeries(t *testing.T) {
	const now = 1_764_590_400_000
	first := "# TYPE a gauge\na 1 1000\nb{x=\"1\",y=\"a b\\\"}\"} 2 1000\nc{} 3\n{\"d.e\",z=\"}\"} 4 1000\n"
	for _, body := range []string{
		"a 5 2000\nb{x=\"1\",y=\"a b\\\"}\"} 6 2000\nc{} 7\n{\"d.e\",z=\"}\"} 8 2000\n",
		"a NaN 3000\na +Inf 3000\na -1e3 3000\na 0x1p3 3000\na 1_0 3000\n",
		"a 1\n\na 2\n", // a blank line
		"a  1 1000\n",  // two spaces
		"a 1 1000 \n",  // a trailing space
		"a 1 1000",     // no newline at the end
		"a 1 10x0\n",   // a bad timestamp
		"a 1 99999999999999999999\n",
		"a 1\r\n",
		"a\t1\n",
		"new 1 1000\n", // a series not seen
		"# HELP a A.\na 1 1000\n",
		"b{x=\"1\",y=\"a b\\\"}\"} 1 {1000\n",
	} {
		t.Run(body, func(t *testing.T) {
			c := newImportSeriesCache(labels.FromStrings("site", "lab1"))
			_, _, err := c.parse([]byte(first), "text/plain", now)
			require.NoError(t, err)
			want, _, wantErr := parseImport([]byte(first+body), "text/plain", labels.FromStrings("site", "lab1"), now)
			got, _, err := c.parse([]byte(body), "text/plain", now)
			require.Equal(t, wantErr == nil, err == nil, "%v / %v", wantErr, err)
			if err == nil {
				requireSameSamples(t, want[4:], got)
			}
		})
	}
	c := newImportSeriesCache(labels.EmptyLabels())
	_, _, err := c.parse([]byte(first), "text/plain", now)
	require.NoError(t, err)
	_, ok := c.parseKnown([]byte("a 5 2000\nc{} 7\n{\"d.e\",z=\"}\"} 8 2000\n"), now)
	require.True(t, ok, "plain samples of known series take the fast path")
	_, ok = c.parseKnown([]byte("a 1\n\na 2\n"), now)
	require.False(t, ok)
}
