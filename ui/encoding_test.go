package ui

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/stretchr/testify/require"
)

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

func snappyStream(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	sw := snappy.NewBufferedWriter(&b)
	_, err := sw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, sw.Close())
	return b.Bytes()
}

// Import bodies compressed with gzip or snappy (block or framed) are
// stored; one that expands past web.max_request_body_bytes is 413.
func TestImportCompressedBodies(t *testing.T) {
	const limit = 4096
	ts := newTestServer(t, func(o *Options) { o.MaxRequestBodyBytes = limit })
	now := time.Now().Truncate(time.Second)
	post := func(enc string, body []byte) (int, string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/api/v1/import/prometheus", bytes.NewReader(body))
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("Content-Encoding", enc)
		return ts.do(req)
	}
	line := func(name string) string { return name + `{job="imp"} 7 ` + itoa(now.UnixMilli()) + "\n" }
	for enc, body := range map[string][]byte{
		"gzip":          gzipped(t, line("gz_metric")),
		"snappy":        snappy.Encode(nil, []byte(line("snappy_block_metric"))),
		"snappy-stream": snappyStream(t, line("snappy_stream_metric")),
	} {
		code, out := post(strings.TrimSuffix(enc, "-stream"), body)
		require.Equal(t, http.StatusNoContent, code, "%s: %s", enc, out)
	}
	ts.db.Flush()
	for _, name := range []string{"gz_metric", "snappy_block_metric", "snappy_stream_metric"} {
		v, ok := ts.queryAt(name, now)
		require.True(t, ok, name)
		require.Equal(t, 7.0, v)
	}

	// 64 KiB of one line repeated compresses far below the limit.
	big := strings.Repeat(line("bomb"), 64<<10/len(line("bomb")))
	for enc, body := range map[string][]byte{
		"gzip":          gzipped(t, big),
		"snappy":        snappy.Encode(nil, []byte(big)),
		"snappy-stream": snappyStream(t, big),
	} {
		require.Less(t, len(body), limit, enc)
		code, out := post(strings.TrimSuffix(enc, "-stream"), body)
		require.Equal(t, http.StatusRequestEntityTooLarge, code, "%s: %s", enc, out)
	}

	code, out := post("br", []byte("x"))
	require.Equal(t, http.StatusUnsupportedMediaType, code, out)
	code, out = post("gzip", []byte("not gzip"))
	require.Equal(t, http.StatusBadRequest, code, out)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
