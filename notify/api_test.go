package notify

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/clock"
)

func TestAPI(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h}))
	srv := httptest.NewServer(e.n.Handler())
	defer srv.Close()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	f := func(method, path, body string, wantCode int, wantBody string) {
		t.Helper()
		code, got := do(method, path, body)
		require.Equal(t, wantCode, code, got)
		if wantBody != "" {
			require.Contains(t, got, wantBody)
		}
	}
	ts := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }

	// Alerts: posted ones are listed; bad ones are refused.
	f("POST", "/api/v2/alerts", `[{"labels":{"alertname":"Ext","severity":"P1"},"annotations":{"summary":"from vmalert"}}]`, 200, "")
	f("POST", "/api/v2/alerts", `[{"labels":{}}]`, 400, "at least one label pair required")
	f("POST", "/api/v2/alerts", `[{"labels":{"alertname":"X"},"startsAt":"`+ts(time.Hour)+`","endsAt":"`+ts(0)+`"}]`, 400, "start time must be before end time")
	f("POST", "/api/v2/alerts", `not json`, 400, "cannot parse")
	f("GET", "/api/v2/alerts", "", 200, `"summary":"from vmalert"`)
	f("GET", "/api/v2/alerts?filter=alertname%3D%22Nope%22", "", 200, "[]")
	f("GET", "/api/v2/alerts?filter=%3D%22x%22", "", 400, "bad matcher")
	f("GET", "/api/v2/alerts?receiver=hook", "", 200, `"receivers":[{"name":"hook"}]`)
	f("GET", "/api/v2/alerts/groups", "", 200, `[{"labels":{"alertname":"Ext"},"receiver":{"name":"hook"},"alerts":[{"labels":{"alertname":"Ext","severity":"P1"}`)

	// Silences: validation, create, update, expire.
	sil := func(matchers string, start, end time.Duration, id string) string {
		s := `{"matchers":` + matchers + `,"startsAt":"` + ts(start) + `","endsAt":"` + ts(end) + `","createdBy":"ops","comment":"c"`
		if id != "" {
			s += `,"id":"` + id + `"`
		}
		return s + "}"
	}
	f("POST", "/api/v2/silences", sil(`[]`, 0, time.Hour, ""), 400, "at least one matcher")
	f("POST", "/api/v2/silences", sil(`[{"name":"job","value":".*","isRegex":true}]`, 0, time.Hour, ""), 400, "would silence every alert")
	f("POST", "/api/v2/silences", sil(`[{"name":"job","value":"x"}]`, time.Hour, 0, ""), 400, "is not after startsAt")
	f("POST", "/api/v2/silences", sil(`[{"name":"job","value":"x"}]`, 0, time.Hour, "no-such-id"), 404, "not found")
	code, body := do("POST", "/api/v2/silences", sil(`[{"name":"alertname","value":"Ext"}]`, time.Hour, 2*time.Hour, ""))
	require.Equal(t, 200, code, body)
	var created struct{ SilenceID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	f("GET", "/api/v2/silence/"+created.SilenceID, "", 200, `"state":"pending"`)
	// A pending silence is updated in place.
	code, body = do("POST", "/api/v2/silences", sil(`[{"name":"alertname","value":"Ext"}]`, 0, 2*time.Hour, created.SilenceID))
	require.Equal(t, 200, code, body)
	require.Contains(t, body, created.SilenceID)
	f("GET", "/api/v2/silence/"+created.SilenceID, "", 200, `"state":"active"`)
	f("GET", "/api/v2/alerts?silenced=false", "", 200, "[]")
	f("GET", "/api/v2/silences?filter=alertname%3D%22Ext%22", "", 200, created.SilenceID)
	f("GET", "/api/v2/silences?filter=alertname%3D%22Other%22", "", 200, "[]")
	// Changing the matchers of an active silence expires it and makes a
	// new one, as Alertmanager does.
	code, body = do("POST", "/api/v2/silences", sil(`[{"name":"alertname","value":"Other"}]`, 0, 2*time.Hour, created.SilenceID))
	require.Equal(t, 200, code, body)
	require.NotContains(t, body, created.SilenceID)
	f("GET", "/api/v2/silence/"+created.SilenceID, "", 200, `"state":"expired"`)
	f("DELETE", "/api/v2/silence/"+created.SilenceID, "", 400, "already expired")
	f("DELETE", "/api/v2/silence/nope", "", 404, "not found")
	f("GET", "/api/v2/silence/nope", "", 404, "not found")

	f("GET", "/api/v2/status", "", 200, `"status":"disabled"`)
	f("GET", "/api/v2/receivers", "", 200, `[{"name":"hook"}]`)
	e.advance(time.Minute, time.Second)
	f("GET", "/api/v2/notifications?limit=5", "", 200, `"result":"sent"`)
	f("GET", "/api/v2/notifications?limit=x", "", 400, "positive number")
	code, body = do("GET", "/api/v2/status", "")
	require.Equal(t, 200, code)
	require.NotContains(t, body, h.srv.URL, "no receiver URL in the status")
	f("PUT", "/api/v2/alerts", "", 405, "")

	// Bodies are bounded.
	code, _ = do("POST", "/api/v2/alerts", "["+strings.Repeat(" ", maxAPIBody)+"]")
	require.Equal(t, 400, code)
}

// A reload rebuilds the groups; the notification log keeps them from
// notifying again what was already sent.
func TestApplyConfigDoesNotRenotify(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h}))
	e.fire(t0.Add(10*time.Hour), "alertname", "Slow")
	e.advance(time.Minute, time.Second)
	require.Len(t, h.all(), 1)
	require.NoError(t, e.n.ApplyConfig(loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h})))
	e.advance(30*time.Minute, 10*time.Second)
	require.Len(t, h.all(), 1)
	// A config that cannot be applied leaves the old one.
	bad := e.cfg
	bad.Digest.Timezone = "Nowhere/Never"
	require.Error(t, e.n.ApplyConfig(bad))
	e.fire(t0.Add(10*time.Hour), "alertname", "Other")
	e.advance(time.Minute, time.Second)
	require.Len(t, h.all(), 2)
}
