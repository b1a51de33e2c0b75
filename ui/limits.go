package ui

import (
	"context"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// Request bounds that do not depend on the route table: they wrap the
// whole handler and look at the decoded path (r.URL.Path), so an encoded
// path (/api/v1/%77rite) is bounded like the plain one.

// DefaultOtherBodyBytes bounds the body of requests that are not ingest
// (queries posted as forms, alerts, silences, dashboards): 8 MiB, the
// Alertmanager API's own bound, is far
// above any of them (a query is at most query.DefaultMaxQueryLength).
const DefaultOtherBodyBytes = 8 << 20

// DefaultMaxConcurrentImports bounds the text imports running at once.
// An import streams its body in batches (ui/import.go, importBatchBytes)
// and holds about 8 MiB whatever its size; the bound is on CPU: parsing
// and indexing fill a core each, and six at once on two cores took three
// times as long as two at a time (TestAbuseParallelImports). Others wait
// for a slot as long as their client waits; the read timeout counts from
// when an import gets its slot.
const DefaultMaxConcurrentImports = 2

// Timeouts of the HTTP server when Options leaves them zero.
const (
	// DefaultReadTimeout bounds reading one request, body included: a
	// 32 MiB import needs 0.6 MB/s, a slow-body (slowloris) client is
	// closed after it.
	DefaultReadTimeout = time.Minute
	// DefaultIdleTimeout closes keep-alive connections idle longer than
	// the 90 s Go's and Grafana's clients keep them.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultWriteTimeout bounds a request from its headers to the end
	// of its answer: longer than Prometheus' default query timeout (2m).
	DefaultWriteTimeout = 3 * time.Minute
	// readHeaderTimeout bounds reading the headers (header slowloris).
	readHeaderTimeout = 10 * time.Second
)

// isIngestPath reports whether a decoded, cleaned path takes samples.
func isIngestPath(p string) bool {
	return p == "/api/v1/write" || strings.HasPrefix(p, "/api/v1/import") || strings.HasPrefix(p, "/api/v1/otlp")
}

// bounded wraps the whole handler with the bounds that must hold on every
// route: body limits by decoded path, the import slots, and a routing path
// without needless escapes.
func (s *Server) bounded(next http.Handler) http.Handler {
	imports := make(chan struct{}, s.opts.MaxConcurrentImports)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// echo routes on the raw path when there is one, so that
		// /api/v1/%77rite would miss the /api/v1/write route (and its
		// limits) and reach Prometheus' router, which routes on the
		// decoded path. Route on the decoded path unless it holds an
		// escaped slash, whose meaning decoding would change.
		if r.URL.RawPath != "" && !strings.Contains(strings.ToLower(r.URL.RawPath), "%2f") {
			r.URL.RawPath = ""
		}
		p := path.Clean(r.URL.Path)
		limit := int64(s.opts.OtherBodyBytes)
		key := "web.max_request_body_bytes"
		if isIngestPath(p) {
			limit = s.opts.MaxRequestBodyBytes
		} else {
			key = "the limit for requests other than ingest"
		}
		if r.ContentLength > limit {
			writeAPIError(w, http.StatusRequestEntityTooLarge, "bad_data",
				"request body of "+strconv.FormatInt(r.ContentLength, 10)+" bytes exceeds the limit of "+
					strconv.FormatInt(limit, 10)+" bytes ("+key+")")
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		if strings.HasPrefix(p, "/api/v1/import") && r.Method == http.MethodPost {
			if !acquire(r.Context(), imports) {
				writeAPIError(w, http.StatusServiceUnavailable, "unavailable", "too many imports at once; retry later")
				return
			}
			defer func() { <-imports }()
			// The wait for the slot does not count against the time
			// to read the body.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opts.ReadTimeout))
		}
		next.ServeHTTP(w, r)
	})
}

// acquire takes a slot of sem, waiting as long as ctx allows.
func acquire(ctx context.Context, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// engineParser is the engine's parser, with its bounds on query text, for
// the API's own parsing (format_query, parse_query, series matchers), or
// Prometheus' default parser for an engine without one.
func engineParser(e promql.QueryEngine) parser.Parser {
	if p, ok := e.(interface{ Parser() parser.Parser }); ok {
		return p.Parser()
	}
	return parser.NewParser(parser.Options{})
}
