package ui

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/clock"
	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify"
)

// TestDigestPreviewAPI serves the next P2 digest from a real notifier
// with the default routes (P2 to the digest): empty at first, then the
// P2 alert posted, with when it goes out and to whom; nothing is sent.
func TestDigestPreviewAPI(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	sent := make(chan struct{}, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		sent <- struct{}{}
	}))
	t.Cleanup(hook.Close)
	cfg, err := config.Load([]byte(`
alerting:
  digest: {at: "09:30", timezone: UTC}
  receivers:
    - name: chat
      webhook_configs: [{url: `+hook.URL+`/chat}]
`), "test.yml")
	require.NoError(t, err)
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	opts := notify.DefaultOptions()
	opts.DB, opts.Config, opts.Now = db, cfg.Alerting, clk.Now
	opts.Logger = slog.New(slog.DiscardHandler)
	n, err := notify.New(opts)
	require.NoError(t, err)
	ts := newTestServer(t, func(o *Options) { o.Notify = n })

	type preview struct {
		At        *time.Time `json:"at"`
		AsOf      time.Time  `json:"asOf"`
		Receivers []string   `json:"receivers"`
		Title     string     `json:"title"`
		Text      string     `json:"text"`
		Alerts    []struct {
			Status string            `json:"status"`
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	get := func() preview {
		t.Helper()
		var p preview
		env := ts.getJSON("/api/v1/appliance/digest/preview", http.StatusOK, &p)
		require.Equal(t, "success", env.Status)
		return p
	}
	nine30 := time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)
	p := get()
	require.NotNil(t, p.At)
	require.Equal(t, nine30, p.At.UTC())
	require.Equal(t, []string{"chat"}, p.Receivers)
	require.Empty(t, p.Title)
	require.NotNil(t, p.Alerts)
	require.Empty(t, p.Alerts)

	n.Post([]model.Alert{{Labels: model.LabelSet{"alertname": "Drift", "severity": "P2", "job": "vllm"}, StartsAt: t0, EndsAt: t0.Add(5 * time.Hour)}})
	for range 10 {
		clk.Advance(time.Minute)
		require.NoError(t, n.Tick(t.Context()))
	}
	p = get()
	require.Equal(t, "Daily digest 2026-03-02: 1 alerts, 1 still firing", p.Title)
	require.Contains(t, p.Text, "Drift: fired 1×, 10m0s in all, still firing since")
	require.Len(t, p.Alerts, 1)
	require.Equal(t, "firing", p.Alerts[0].Status)
	require.Equal(t, "Drift", p.Alerts[0].Labels["alertname"])
	require.Equal(t, t0.Add(10*time.Minute), p.AsOf.UTC())
	require.Empty(t, sent, "a P2 alert and its preview send nothing")

	// The raw JSON keeps the contract's field names.
	code, body := ts.get("/api/v1/appliance/digest/preview")
	require.Equal(t, http.StatusOK, code)
	var raw struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &raw))
	for _, k := range []string{"at", "asOf", "receivers", "title", "text", "alerts"} {
		require.Contains(t, raw.Data, k)
	}
}

// Without alerting there is no digest to preview.
func TestDigestPreviewAPIWithoutAlerting(t *testing.T) {
	ts := newTestServer(t, nil)
	code, body := ts.get("/api/v1/appliance/digest/preview")
	require.Equal(t, http.StatusNotFound, code, body)
	require.Contains(t, body, "alerting is not enabled")
}
