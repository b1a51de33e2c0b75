package ui

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/aiserve/appliance/ui/web"
)

// TestBootAnswers: the answers written into a page are the API's own
// answers to the requests the page would send, with the request's
// credentials; one the request may not see is left out.
func TestBootAnswers(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	require.NoError(t, err)
	ts := newTestServer(t, func(o *Options) { o.BasicAuthUsers = map[string]string{"admin": string(hash)} })

	page := httptest.NewRequest(http.MethodGet, "/?from=now-24h&job=vllm", nil)
	page.SetBasicAuth("admin", "pw")
	reqs := bootRequests("/", page.URL.Query())
	require.Equal(t, []bootRequest{
		{Path: "/api/v1/status/config"},
		{Path: "/api/v1/appliance/dashboards/overview", Params: map[string]string{"job": "vllm"}},
	}, reqs)
	answers := bootAnswers(ts.h, page, reqs)
	require.Len(t, answers, 2)
	for _, a := range answers {
		u := a.Path
		if len(a.Params) > 0 {
			v := url.Values{}
			for k, p := range a.Params {
				v.Set(k, p)
			}
			u += "?" + v.Encode()
		}
		req := httptest.NewRequest(http.MethodGet, u, nil)
		req.SetBasicAuth("admin", "pw")
		code, body := ts.do(req)
		require.Equal(t, http.StatusOK, code, u)
		var want, got any
		require.NoError(t, json.Unmarshal([]byte(body), &want))
		require.NoError(t, json.Unmarshal(a.Body, &got))
		require.Equal(t, want, got, u)
	}

	require.Equal(t, []bootRequest{{Path: "/api/v1/status/config"}, {Path: "/api/v1/appliance/services"}}, bootRequests("/model", nil))
	if web.Built() {
		code, body := ts.do(page)
		require.Equal(t, http.StatusOK, code)
		require.Contains(t, body, `<script type="application/json" id="boot" data-answers="2">`)
	}
	anon := httptest.NewRequest(http.MethodGet, "/", nil)
	require.Empty(t, bootAnswers(ts.h, anon, bootRequests("/", nil)))
}
