package ui

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/aiserve/appliance/ui/web"
)

// The page's first answers inside its index.html. Without them the page
// loads its script, runs it, and only then asks for the scrape interval
// and its dashboard definition, and only once those arrive for the
// panels' queries: two round trips before the first query. The server
// writes the head (so the browser fetches the bundle at once), then
// answers those requests itself, through the same routes and auth as
// the browser's own requests, and writes their bodies into
// <script type="application/json" id="boot"> (data, not script: CSP
// default-src 'self' allows it). The page's api() takes an answer from
// there once, in place of the same request; later ones (the refresh)
// go to the server.

// bootRequest is one GET the page makes on its first render.
type bootRequest struct {
	Path   string            `json:"path"`
	Params map[string]string `json:"params,omitempty"`
}

// bootAnswer is a bootRequest with its answer, as the page's api()
// reads it.
type bootAnswer struct {
	bootRequest
	Tiers string          `json:"tiers,omitempty"`
	Body  json.RawMessage `json:"body"`
}

// bootRequests are the requests the page at path sends before any query,
// as ui/web/src sends them (pages.js Dashboard, useServices; main.js
// useScrapeInterval).
func bootRequests(path string, q url.Values) []bootRequest {
	out := []bootRequest{{Path: "/api/v1/status/config"}}
	dash := map[string]string{"/": "overview", "/probes": "probes", "/hardware": "hardware"}[path]
	if dash != "" {
		params := map[string]string{}
		for _, k := range []string{"job", "model", "instance"} {
			if v := q.Get(k); v != "" {
				params[k] = v
			}
		}
		out = append(out, bootRequest{Path: "/api/v1/appliance/dashboards/" + dash, Params: params})
	}
	if path == "/model" {
		out = append(out, bootRequest{Path: "/api/v1/appliance/services"})
	}
	return out
}

// bootAnswers runs the requests through h with r's credentials; an
// answer other than 200 is left out (the page asks for it itself and
// shows the error as before).
func bootAnswers(h http.Handler, r *http.Request, reqs []bootRequest) []bootAnswer {
	var out []bootAnswer
	for _, br := range reqs {
		u := br.Path
		if len(br.Params) > 0 {
			v := url.Values{}
			for k, p := range br.Params {
				v.Set(k, p)
			}
			u += "?" + v.Encode()
		}
		sub := httptest.NewRequestWithContext(r.Context(), http.MethodGet, u, nil)
		sub.RemoteAddr = r.RemoteAddr
		for _, h := range []string{"Authorization", "Cookie"} {
			if v := r.Header.Get(h); v != "" {
				sub.Header.Set(h, v)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, sub)
		if rec.Code != http.StatusOK || !json.Valid(rec.Body.Bytes()) {
			continue
		}
		out = append(out, bootAnswer{bootRequest: br, Tiers: rec.Header().Get("X-Appliance-Tiers"), Body: rec.Body.Bytes()})
	}
	return out
}

// bootPage serves index.html with the page's first answers, or the
// plain handler next when no bundle is built.
func bootPage(e *echo.Echo, next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		index := web.Index()
		head, tail, ok := bytes.Cut(index, []byte("<body>"))
		if !ok {
			return next(c)
		}
		r := c.Request()
		w := c.Response()
		w.Header().Set("Content-Security-Policy", web.CSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(head)
		_, _ = w.Write([]byte("<body>"))
		w.Flush()
		answers := bootAnswers(e, r, bootRequests(r.URL.Path, r.URL.Query()))
		b, err := json.Marshal(answers)
		if err == nil && len(answers) > 0 {
			var esc bytes.Buffer
			json.HTMLEscape(&esc, b)
			_, _ = w.Write([]byte(`<script type="application/json" id="boot" data-answers="` + strconv.Itoa(len(answers)) + `">`))
			_, _ = w.Write(esc.Bytes())
			_, _ = w.Write([]byte("</script>"))
		}
		_, err = w.Write(tail)
		return err
	}
}
