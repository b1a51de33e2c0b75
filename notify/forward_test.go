package notify

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
)

// TestForwardToAlertmanagers: the rules' alerts go to the Alertmanagers
// of alerting.alertmanagers as Prometheus sends them: POST under the
// path_prefix with the basic auth, after the alert relabeling.
func TestForwardToAlertmanagers(t *testing.T) {
	type req struct {
		path, user, pass string
		alerts           []map[string]any
	}
	got := make(chan req, 4)
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u, p, _ := r.BasicAuth()
		var as []map[string]any
		if err := json.Unmarshal(b, &as); err != nil {
			t.Errorf("body: %v: %s", err, b)
		}
		got <- req{r.URL.Path, u, p, as}
	}))
	defer am.Close()
	cfg, err := config.Load([]byte(`
global:
  external_labels: {monitor: lab, severity: none}
alerting:
  alert_relabel_configs:
    - action: labeldrop
      regex: replica
  alertmanagers:
    - path_prefix: /eu
      basic_auth: {username: prom, password: pw}
      alert_relabel_configs:
        - source_labels: [alertname]
          regex: Dropped
          action: drop
      static_configs:
        - targets: ['`+strings.TrimPrefix(am.URL, "http://")+`']
`), "x.yml")
	require.NoError(t, err)
	ts, err := fwdTargets(cfg.Alerting.Alertmanagers)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Equal(t, am.URL+"/eu/api/v2/alerts", ts[0].url)

	f := newForwarder(slog.New(slog.DiscardHandler))
	f.apply(ts, cfg.Alerting.AlertRelabelConfigs, cfg.Alerting.ExternalLabels())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.run(ctx) }()
	defer func() { cancel(); <-done }()

	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	f.enqueue([]model.Alert{
		{Labels: model.LabelSet{"alertname": "HostDown", "severity": "critical", "replica": "a"}, Annotations: model.LabelSet{"summary": "down"}, StartsAt: start, EndsAt: start.Add(time.Minute)},
		{Labels: model.LabelSet{"alertname": "Dropped"}, StartsAt: start},
	})
	r := <-got
	require.Equal(t, "/eu/api/v2/alerts", r.path)
	require.Equal(t, "prom", r.user)
	require.Equal(t, "pw", r.pass)
	require.Equal(t, []map[string]any{{
		"labels":      map[string]any{"alertname": "HostDown", "severity": "critical", "monitor": "lab"},
		"annotations": map[string]any{"summary": "down"},
		"startsAt":    "2026-03-02T10:00:00Z", "endsAt": "2026-03-02T10:01:00Z",
	}}, r.alerts)

	// No Alertmanagers: nothing is queued.
	f.apply(nil, nil, labels.EmptyLabels())
	f.enqueue([]model.Alert{{Labels: model.LabelSet{"alertname": "X"}}})
	f.mu.Lock()
	require.Empty(t, f.queue)
	f.mu.Unlock()

	// Other discoveries than static_configs are refused, not ignored.
	cfg, err = config.Load([]byte("alerting:\n  alertmanagers:\n    - file_sd_configs: [{files: [am.json]}]\n"), "x.yml")
	require.NoError(t, err)
	_, err = fwdTargets(cfg.Alerting.Alertmanagers)
	require.ErrorContains(t, err, "only static_configs are supported, not file_sd_configs")
}
