package ui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/clock"
	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify"
)

// newTestNotifier is a real notifier on a bbolt file in a temp dir, with
// one webhook receiver "hook" (a real HTTP server that accepts everything)
// and the fake clock.
func newTestNotifier(t *testing.T, clock *clock.Fake) (n *notify.Notifier, hookURL string) {
	t.Helper()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(hook.Close)
	cfg, err := config.Load([]byte(`
alerting:
  route:
    receiver: hook
    group_by: [alertname]
    group_wait: 30s
    group_interval: 5m
    repeat_interval: 1h
  receivers:
    - name: hook
      webhook_configs:
        - url: `+hook.URL+`/hook
`), "test.yml")
	require.NoError(t, err)
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	opts := notify.DefaultOptions()
	opts.DB, opts.Config, opts.Now = db, cfg.Alerting, clock.Now
	opts.ExternalURL = "http://appliance.test:9090"
	opts.Logger = slog.New(slog.DiscardHandler)
	n, err = notify.New(opts)
	require.NoError(t, err)
	return n, hook.URL
}

// TestAlertmanagerAPI drives /api/v2 through the server's router over a
// real notifier: what amtool, Grafana and Prometheus send and read.
func TestAlertmanagerAPI(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	clock := clock.NewFake(t0)
	n, hookURL := newTestNotifier(t, clock)
	ts := newTestServer(t, func(o *Options) { o.Notify = n })
	srv := httptest.NewServer(ts.h)
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
	tsf := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }

	// Alerts: posted ones are listed; bad ones are refused.
	f("POST", "/api/v2/alerts", `[{"labels":{"alertname":"Ext","severity":"P1"},"annotations":{"summary":"from vmalert"}}]`, 200, "")
	f("POST", "/api/v2/alerts", `[{"labels":{}}]`, 400, "at least one label pair required")
	f("POST", "/api/v2/alerts", `[{"labels":{"alertname":"X"},"startsAt":"`+tsf(time.Hour)+`","endsAt":"`+tsf(0)+`"}]`, 400, "start time must be before end time")
	f("POST", "/api/v2/alerts", `not json`, 400, "cannot parse")
	f("GET", "/api/v2/alerts", "", 200, `"summary":"from vmalert"`)
	f("GET", "/api/v2/alerts?filter=alertname%3D%22Nope%22", "", 200, "[]")
	f("GET", "/api/v2/alerts?filter=%3D%22x%22", "", 400, "bad matcher")
	f("GET", "/api/v2/alerts?receiver=hook", "", 200, `"receivers":[{"name":"hook"}]`)
	f("GET", "/api/v2/alerts?active=maybe", "", 400, "active: ")
	f("GET", "/api/v2/alerts/groups", "", 200, `[{"labels":{"alertname":"Ext"},"receiver":{"name":"hook"},"alerts":[{"labels":{"alertname":"Ext","priority":"P1","severity":"P1"}`)

	// The whole answer, byte for byte as Alertmanager's shape.
	code, body := do("GET", "/api/v2/alerts", "")
	require.Equal(t, 200, code)
	require.Equal(t, `[{"labels":{"alertname":"Ext","priority":"P1","severity":"P1"},"annotations":{"summary":"from vmalert"},`+
		`"startsAt":"2026-03-02T10:00:00Z","endsAt":"2026-03-02T10:05:00Z","updatedAt":"2026-03-02T10:00:00Z",`+
		`"fingerprint":"`+fingerprintOf(t, body)+`","receivers":[{"name":"hook"}],`+
		`"status":{"state":"active","silencedBy":[],"inhibitedBy":[],"mutedBy":[]}}]`+"\n", body)

	// Silences: validation, create, update, expire.
	sil := func(matchers string, start, end time.Duration, id string) string {
		s := `{"matchers":` + matchers + `,"startsAt":"` + tsf(start) + `","endsAt":"` + tsf(end) + `","createdBy":"ops","comment":"c"`
		if id != "" {
			s += `,"id":"` + id + `"`
		}
		return s + "}"
	}
	f("POST", "/api/v2/silences", sil(`[]`, 0, time.Hour, ""), 400, "at least one matcher")
	f("POST", "/api/v2/silences", sil(`[{"name":"job","value":".*","isRegex":true}]`, 0, time.Hour, ""), 400, "would silence every alert")
	f("POST", "/api/v2/silences", sil(`[{"name":"job","value":"x"}]`, time.Hour, 0, ""), 400, "is not after startsAt")
	f("POST", "/api/v2/silences", sil(`[{"name":"job","value":"x"}]`, 0, time.Hour, "no-such-id"), 404, "not found")
	// Alertmanager's schema: the createdBy key is required (empty passes);
	// a body over the limit is 413, not a parse error.
	f("POST", "/api/v2/silences", `{"matchers":[{"name":"job","value":"x"}],"startsAt":"`+tsf(0)+`","endsAt":"`+tsf(time.Hour)+`","comment":"c"}`, 422, "createdBy in body is required")
	f("POST", "/api/v2/silences", `{"comment":"`+strings.Repeat("x", maxAlertmanagerBody)+`"}`, 413, "8388608 bytes")
	code, body = do("POST", "/api/v2/silences", sil(`[{"name":"alertname","value":"Ext"}]`, time.Hour, 2*time.Hour, ""))
	require.Equal(t, 200, code, body)
	var created struct{ SilenceID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	f("GET", "/api/v2/silence/"+created.SilenceID, "", 200, `"state":"pending"`)
	// A pending silence is updated in place.
	code, body = do("POST", "/api/v2/silences", sil(`[{"name":"alertname","value":"Ext"}]`, 0, 2*time.Hour, created.SilenceID))
	require.Equal(t, 200, code, body)
	require.Contains(t, body, created.SilenceID)
	code, body = do("GET", "/api/v2/silence/"+created.SilenceID, "")
	require.Equal(t, 200, code)
	require.Equal(t, `{"id":"`+created.SilenceID+`","status":{"state":"active"},"updatedAt":"2026-03-02T10:00:00Z",`+
		`"matchers":[{"name":"alertname","value":"Ext","isRegex":false,"isEqual":true}],`+
		`"startsAt":"2026-03-02T10:00:00Z","endsAt":"2026-03-02T12:00:00Z","createdBy":"ops","comment":"c"}`+"\n", body)
	f("GET", "/api/v2/alerts?silenced=false", "", 200, "[]")
	f("GET", "/api/v2/alerts", "", 200, `"status":{"state":"suppressed","silencedBy":["`+created.SilenceID+`"]`)
	f("GET", "/api/v2/silences?filter=alertname%3D%22Ext%22", "", 200, created.SilenceID)
	f("GET", "/api/v2/silences?filter=alertname%3D%22Other%22", "", 200, "[]")
	// Changing the matchers of an active silence expires it and makes a
	// new one, as Alertmanager does.
	code, body = do("POST", "/api/v2/silences", sil(`[{"name":"alertname","value":"Other"}]`, 0, 2*time.Hour, created.SilenceID))
	require.Equal(t, 200, code, body)
	require.NotContains(t, body, created.SilenceID)
	f("GET", "/api/v2/silence/"+created.SilenceID, "", 200, `"state":"expired"`)
	// Active first, then expired.
	code, body = do("GET", "/api/v2/silences", "")
	require.Equal(t, 200, code)
	require.Less(t, strings.Index(body, `"state":"active"`), strings.Index(body, `"state":"expired"`), body)
	f("DELETE", "/api/v2/silence/"+created.SilenceID, "", 200, "")
	f("DELETE", "/api/v2/silence/nope", "", 404, "not found")
	f("GET", "/api/v2/silence/nope", "", 404, `"silence nope not found"`)

	f("GET", "/api/v2/status", "", 200, `"cluster":{"peers":[],"status":"disabled"}`)
	f("GET", "/api/v2/receivers", "", 200, `[{"name":"hook"}]`)
	f("GET", "/api/v2/notifications", "", 200, `[]`)
	// The group waits 30s, then its message goes out.
	for range 60 {
		clock.Advance(time.Second)
		require.NoError(t, n.Tick(context.Background()))
	}
	f("GET", "/api/v2/notifications?limit=5", "", 200, `"result":"sent"`)
	f("GET", "/api/v2/notifications?limit=x", "", 400, "positive number")
	code, body = do("GET", "/api/v2/status", "")
	require.Equal(t, 200, code)
	require.NotContains(t, body, hookURL, "no receiver URL in the status")
	f("PUT", "/api/v2/alerts", "", 405, "")

	// Bodies are bounded.
	code, _ = do("POST", "/api/v2/alerts", "["+strings.Repeat(" ", maxAlertmanagerBody)+"]")
	require.Equal(t, 413, code, "too large, refused by the server's bound before the handler")
}

// Without a notifier there is no v2 API.
func TestNoAlertmanagerAPIWithoutNotify(t *testing.T) {
	ts := newTestServer(t, nil)
	code, _ := ts.get("/api/v2/alerts")
	require.Equal(t, http.StatusNotFound, code)
}

func fingerprintOf(t *testing.T, body string) string {
	t.Helper()
	var as []struct{ Fingerprint string }
	require.NoError(t, json.Unmarshal([]byte(body), &as), body)
	require.NotEmpty(t, as)
	return as[0].Fingerprint
}
