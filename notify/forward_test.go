package notify

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

// TestForwardMetrics: the forwarding counts under Prometheus' notifier
// names: alerts sent per Alertmanager, those of a failed attempt also as
// errors, a batch no Alertmanager took as dropped; the discovered gauge
// only while there are targets.
func TestForwardMetrics(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusOK)
	got := make(chan int, 8)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- http.StatusOK
	}))
	defer good.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(int(status.Load()))
		got <- int(status.Load())
	}))
	defer bad.Close()
	targets := func(urls ...string) []*fwdTarget {
		var hosts []string
		for _, u := range urls {
			hosts = append(hosts, "'"+strings.TrimPrefix(u, "http://")+"'")
		}
		cfg, err := config.Load([]byte("alerting:\n  alertmanagers:\n    - static_configs: [{targets: ["+strings.Join(hosts, ", ")+"]}]\n"), "x.yml")
		require.NoError(t, err)
		ts, err := fwdTargets(cfg.Alerting.Alertmanagers)
		require.NoError(t, err)
		return ts
	}

	f := newForwarder(slog.New(slog.DiscardHandler))
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(f))
	require.Equal(t, 0, testutil.CollectAndCount(f, "prometheus_notifications_alertmanagers_discovered"), "no targets: no gauge")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.run(ctx) }()
	defer func() { cancel(); <-done }()

	f.apply(targets(good.URL, bad.URL), nil, labels.EmptyLabels())
	require.Equal(t, 1, testutil.CollectAndCount(f, "prometheus_notifications_alertmanagers_discovered"))
	goodURL, badURL := good.URL+"/api/v2/alerts", bad.URL+"/api/v2/alerts"

	status.Store(http.StatusInternalServerError)
	f.enqueue([]model.Alert{{Labels: model.LabelSet{"alertname": "A"}}, {Labels: model.LabelSet{"alertname": "B"}}})
	<-got
	<-got
	// The counts follow the answers; wait for them, not for a time.
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(f.m.errors.WithLabelValues(badURL)) == 2 && testutil.ToFloat64(f.m.sent.WithLabelValues(goodURL)) == 2
	}, time.Minute, time.Millisecond)
	require.Equal(t, 2.0, testutil.ToFloat64(f.m.sent.WithLabelValues(goodURL)))
	require.Equal(t, 2.0, testutil.ToFloat64(f.m.sent.WithLabelValues(badURL)))
	require.Equal(t, 0.0, testutil.ToFloat64(f.m.errors.WithLabelValues(goodURL)))
	require.Equal(t, 0.0, testutil.ToFloat64(f.m.dropped), "one Alertmanager took them")

	// Only the failing one left: the batch is dropped.
	f.apply(targets(bad.URL), nil, labels.EmptyLabels())
	f.enqueue([]model.Alert{{Labels: model.LabelSet{"alertname": "C"}}})
	<-got
	require.Eventually(t, func() bool { return testutil.ToFloat64(f.m.dropped) == 1 }, time.Minute, time.Millisecond)
	require.Equal(t, 3.0, testutil.ToFloat64(f.m.errors.WithLabelValues(badURL)))

	require.NoError(t, testutil.CollectAndCompare(f, strings.NewReader(`
# HELP prometheus_notifications_queue_capacity The capacity of the alert notifications queue.
# TYPE prometheus_notifications_queue_capacity gauge
prometheus_notifications_queue_capacity 10000
# HELP prometheus_notifications_alertmanagers_discovered The number of alertmanagers discovered and active.
# TYPE prometheus_notifications_alertmanagers_discovered gauge
prometheus_notifications_alertmanagers_discovered 1
`), "prometheus_notifications_queue_capacity", "prometheus_notifications_alertmanagers_discovered"))
}
