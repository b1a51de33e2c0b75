package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aiserve/appliance/storage"
)

// TiersHeader names the tiers that served a request, finest first
// ("raw,1m"); it is set on every response of the query endpoints that read
// samples.
const TiersHeader = "X-Appliance-Tiers"

// tierPaths are the Prometheus API endpoints that read through the
// tier-stitching querier.
var tierPaths = []string{"/api/v1/query", "/api/v1/query_range", "/api/v1/series", "/api/v1/labels", "/api/v1/label/"}

func readsTiers(path string) bool {
	for _, p := range tierPaths {
		if path == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(path, p)) {
			return true
		}
	}
	return false
}

// tiersMiddleware wraps the Prometheus API handler when Options.Tiers is
// set. It carries only the HTTP side of tiers; which tiers a query reads is
// planned by package storage (see its doc, "Who plans tiers"). On the
// query endpoints it
//
//   - reads max_source_resolution=raw|1m|5m (URL or form parameter, as in
//     Thanos' querier: the coarsest tier the request may read; raw means
//     raw data only) into the request context, where the storage's
//     querier finds it (Prometheus' API passes the request context down
//     to Select); a bad value is a 400 with Prometheus' error JSON;
//   - records which tiers the request read and reports them in the
//     X-Appliance-Tiers header and, in JSON answers, in a top-level
//     field next to "status":
//     {"status":"success","tiers":["raw","1m"],"data":...}. (Answers
//     are compressed after this, by compressAPI, so the field is in
//     gzipped answers too.)
func tiersMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !readsTiers(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		// FormValue parses the form once; the API's own FormValue calls
		// read the parsed copy.
		if v := r.FormValue("max_source_resolution"); v != "" {
			tier, err := storage.ParseTier(v)
			if err != nil {
				writeAPIError(w, http.StatusBadRequest, "bad_data", "invalid max_source_resolution "+quote(v)+": want raw, 1m or 5m")
				return
			}
			ctx = storage.WithMaxSourceResolution(ctx, tier)
		}
		ctx, rec := storage.WithTierRecorder(ctx)
		next.ServeHTTP(&tiersWriter{ResponseWriter: w, rec: rec}, r.WithContext(ctx))
	})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func writeAPIError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(apiResponse{Status: "error", ErrorType: typ, Error: msg})
}

// tiersWriter adds the tiers to the response when the API writes it: by
// then the query has run (the API encodes the whole answer first).
type tiersWriter struct {
	http.ResponseWriter
	rec         *storage.TierRecorder
	wroteHeader bool
	wroteBody   bool
}

func (w *tiersWriter) names() []string {
	used := w.rec.Used()
	out := make([]string, len(used))
	for i, t := range used {
		out[i] = t.String()
	}
	return out
}

func (w *tiersWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if names := w.names(); len(names) > 0 {
			w.Header().Set(TiersHeader, strings.Join(names, ","))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

var successPrefix = []byte(`{"status":"success",`)

func (w *tiersWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.wroteBody || !bytes.HasPrefix(b, successPrefix) {
		w.wroteBody = true
		return w.ResponseWriter.Write(b)
	}
	w.wroteBody = true
	field, _ := json.Marshal(w.names())
	var buf bytes.Buffer
	buf.Grow(len(b) + len(field) + 12)
	buf.Write(successPrefix)
	buf.WriteString(`"tiers":`)
	buf.Write(field)
	buf.WriteByte(',')
	buf.Write(b[len(successPrefix):])
	if _, err := w.ResponseWriter.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush lets streaming work through the wrapper.
func (w *tiersWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *tiersWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TierStatsSource is what /api/v1/status/tiers reads; *storage.DB
// implements it.
type TierStatsSource interface {
	TierStats(ctx context.Context) ([]storage.TierStats, error)
}

// tierStatsHandler serves GET /api/v1/status/tiers: per tier its
// resolution, retention, the time it covers, series, samples, bytes on
// disk, and for rollup tiers the watermark and lag, in Prometheus' API
// envelope: {"status":"success","data":[{"tier":"raw",...},...]}.
func tierStatsHandler(src TierStatsSource) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeAPIError(w, http.StatusMethodNotAllowed, "bad_data", "method "+r.Method+" not allowed; use GET")
			return
		}
		st, err := src.TierStats(r.Context())
		if err != nil {
			writeAPIError(w, http.StatusInternalServerError, "internal", "collect tier stats: "+err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(apiResponse{Status: "success", Data: st})
	})
}
