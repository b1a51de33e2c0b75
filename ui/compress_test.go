package ui

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAPICompressedOnce: an API answer asked for with gzip comes back
// gzipped once (its body decompresses to the JSON itself, not to another
// gzip stream), with Vary; asked without, plain; a handler that sets no
// JSON content type passes as it is.
func TestAPICompressedOnce(t *testing.T) {
	ts := newTestServer(t, nil)
	for _, enc := range []string{"gzip", "gzip, deflate, br", ""} {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/query?query=1%2B1", nil)
		if enc != "" {
			req.Header.Set("Accept-Encoding", enc)
		}
		rec := httptest.NewRecorder()
		ts.h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, enc)
		require.Contains(t, rec.Header().Values("Vary"), "Accept-Encoding", enc)
		var r io.Reader = rec.Body
		if enc != "" {
			require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"), enc)
			zr, err := gzip.NewReader(rec.Body)
			require.NoError(t, err)
			r = zr
		} else {
			require.Empty(t, rec.Header().Get("Content-Encoding"))
		}
		var body struct {
			Status string `json:"status"`
			Data   struct {
				Result []any `json:"result"`
			} `json:"data"`
		}
		require.NoError(t, json.NewDecoder(r).Decode(&body), enc)
		require.Equal(t, "success", body.Status)
		require.Equal(t, "2", body.Data.Result[1], enc) // [time, "2"]
	}

	plain := compressAPI(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Empty(t, r.Header.Get("Accept-Encoding"), "the API is asked for plain answers")
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write([]byte("snappy frames"))
	}))
	req := httptest.NewRequest(http.MethodPost, "/api/v1/read", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	plain.ServeHTTP(rec, req)
	require.Empty(t, rec.Header().Get("Content-Encoding"))
	require.Equal(t, "snappy frames", rec.Body.String())
}
