package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/aiserve/appliance/ui/web"
)

// TestDashboardPages: every page path answers HTML under the CSP, built
// bundle or not (then a page saying how to build it); assets outside the
// bundle are 404s.
func TestDashboardPages(t *testing.T) {
	ts := newTestServer(t, nil)
	for _, p := range append(web.Pages, "/?from=now-24h&to=now&job=vllm", "/model?job=vllm&model=m") {
		rec := httptest.NewRecorder()
		ts.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		require.Equal(t, http.StatusOK, rec.Code, p)
		require.Equal(t, "default-src 'self'", rec.Header().Get("Content-Security-Policy"), p)
		require.Contains(t, rec.Header().Get("Content-Type"), "text/html", p)
		if web.Built() {
			require.Contains(t, rec.Body.String(), `src="/assets/app.js"`, p)
		} else {
			require.Contains(t, rec.Body.String(), "make build", p)
		}
	}
	code, _ := ts.get("/assets/../../embed.go")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = ts.get("/assets/index.html")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = ts.get("/nope")
	require.Equal(t, http.StatusNotFound, code)
	if web.Built() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/assets/app.js", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		ts.h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
		require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
		require.Equal(t, "default-src 'self'", rec.Header().Get("Content-Security-Policy"))
	}
}

// TestGraphRedirect: the rules manager's alert links (/graph?g0.expr=)
// land on /explore with the same expression.
func TestGraphRedirect(t *testing.T) {
	ts := newTestServer(t, nil)
	for in, want := range map[string]string{
		"/graph?g0.expr=up%7Bjob%3D%22vllm%22%7D+%3E+0&g0.tab=1": "/explore?expr=up%7Bjob%3D%22vllm%22%7D+%3E+0&tab=table",
		"/graph?g0.expr=up&g0.tab=0&g0.range_input=6h":           "/explore?expr=up&from=now-6h&to=now",
		"/graph": "/explore",
	} {
		rec := httptest.NewRecorder()
		ts.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, in, nil))
		require.Equal(t, http.StatusFound, rec.Code, in)
		require.Equal(t, want, rec.Header().Get("Location"), in)
	}
}

// TestDashboardBehindAuth: the pages and assets need the same basic auth
// as the API.
func TestDashboardBehindAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	require.NoError(t, err)
	ts := newTestServer(t, func(o *Options) { o.BasicAuthUsers = map[string]string{"admin": string(hash)} })
	for _, p := range []string{"/", "/explore", "/assets/app.js", "/graph?g0.expr=up"} {
		code, _ := ts.get(p)
		require.Equal(t, http.StatusUnauthorized, code, p)
	}
	req := httptest.NewRequest(http.MethodGet, "/alerts", nil)
	req.SetBasicAuth("admin", "pw")
	code, body := ts.do(req)
	require.Equal(t, http.StatusOK, code)
	require.True(t, strings.Contains(body, "app.js") || strings.Contains(body, "make build"))
}
