package ui

import (
	"net/http"

	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
)

// compressAPI compresses the Prometheus API's JSON answers for clients
// that accept it: gzip at its fastest level (zstd's fastest for a client
// that prefers zstd), with writers reused across requests, as
// VictoriaMetrics answers. Prometheus' own handler (util/httputil,
// inside the API) gzips at the default level with a new writer for each
// answer; that was a fifth of the CPU of a 1-hour query_range and much
// of its garbage. The request reaches the API without Accept-Encoding, so
// the API answers plain and every layer in between (the range cache, the
// tiers field) sees the JSON; the answer is compressed here, once. Other
// content types (remote read's snappy protobuf) pass as they are.
func compressAPI(next http.Handler) http.Handler {
	wrap, err := gzhttp.NewWrapper(
		gzhttp.CompressionLevel(gzip.BestSpeed),
		gzhttp.MinSize(0), // as Prometheus: every answer, when asked
		gzhttp.ContentTypes([]string{"application/json"}),
	)
	if err != nil {
		panic(err) // the options are constants: a bad one is a programming error
	}
	return wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Accept-Encoding")
		next.ServeHTTP(w, r)
	}))
}
