package ui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExtraLabels: extra_label adds its matcher to every selector of
// query (replacing one of the same name) and of match[], gives labels a
// match[] when it has none, leaves other paths alone, and refuses a
// malformed value with 400.
func TestExtraLabels(t *testing.T) {
	var got url.Values
	h := extraLabels(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		got = r.Form
	}))
	do := func(method, path string, form url.Values) int {
		got = nil
		var req *http.Request
		if method == http.MethodPost {
			req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		} else {
			req = httptest.NewRequest(method, path+"?"+form.Encode(), nil)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	require.Equal(t, 200, do(http.MethodGet, "/api/v1/query", url.Values{
		"query":       {`histogram_quantile(0.95, sum by (le, box) (rate(x_bucket{box=~"a|b"}[1m]))) / on() up`},
		"extra_label": {"box=b"},
	}))
	require.Equal(t, `histogram_quantile(0.95, sum by (le, box) (rate(x_bucket{box="b"}[1m]))) / on () up{box="b"}`, got.Get("query"))
	require.NotContains(t, got, "extra_label")

	require.Equal(t, 200, do(http.MethodPost, "/api/v1/query_range", url.Values{"query": {"up"}, "extra_label": {"box=a", "dc=x"}}))
	require.Equal(t, `up{box="a",dc="x"}`, got.Get("query"))

	require.Equal(t, 200, do(http.MethodGet, "/api/v1/series", url.Values{"match[]": {`up{job="n"}`}, "extra_label": {"box=a"}}))
	require.Equal(t, []string{`{__name__="up",box="a",job="n"}`}, got["match[]"])

	require.Equal(t, 200, do(http.MethodGet, "/api/v1/label/job/values", url.Values{"extra_label": {"box=a"}}))
	require.Equal(t, []string{`{box="a"}`}, got["match[]"])

	// Other paths and requests without it pass untouched.
	require.Equal(t, 200, do(http.MethodGet, "/api/v1/targets", url.Values{"extra_label": {"box=a"}}))
	require.Equal(t, []string{"box=a"}, got["extra_label"])
	require.Equal(t, 200, do(http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}}))
	require.Equal(t, "up", got.Get("query"))

	require.Equal(t, http.StatusBadRequest, do(http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}, "extra_label": {"nobox"}}))
	require.Nil(t, got)
}
