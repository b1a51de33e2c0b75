package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// amtoolVersion is the Alertmanager release whose amtool must work against
// the appliance's v2 API.
const amtoolVersion = "v0.28.1"

// amtool returns the path of amtool amtoolVersion, built from the Go
// module proxy by externalBinary (or taking $AMTOOL).
func amtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("AMTOOL"); p != "" {
		return p
	}
	return externalBinary(t, "github.com/prometheus/alertmanager/cmd/amtool", amtoolVersion)
}

// webhookSink is a webhook receiver that keeps the payloads it got.
type webhookSink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	down bool
	got  []webhookPayload
	at   []time.Time
}

type webhookPayload struct {
	Version  string            `json:"version"`
	GroupKey string            `json:"groupKey"`
	Status   string            `json:"status"`
	Receiver string            `json:"receiver"`
	Common   map[string]string `json:"commonLabels"`
	Alerts   []struct {
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
	} `json:"alerts"`
	dedup string
}

func newWebhookSink(t *testing.T) *webhookSink {
	s := &webhookSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var p webhookPayload
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("webhook body: %v: %s", err, b)
		}
		p.dedup = r.Header.Get("X-Appliance-Dedup-Key")
		s.got = append(s.got, p)
		s.at = append(s.at, time.Now())
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *webhookSink) payloads() []webhookPayload {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func (s *webhookSink) setDown(d bool) {
	s.mu.Lock()
	s.down = d
	s.mu.Unlock()
}

// alertnames lists "name:status" of every alert the sink received.
func (s *webhookSink) alertnames() []string {
	var out []string
	for _, p := range s.payloads() {
		for _, a := range p.Alerts {
			out = append(out, a.Labels["alertname"]+":"+a.Status)
		}
	}
	return out
}

func notifyConfig(hookURL string) string {
	return fmt.Sprintf(`autodetect: {enabled: false}
alerting:
  route:
    receiver: chat
    group_by: [alertname]
    group_wait: 1s
    group_interval: 2s
    repeat_interval: 1h
  outbox:
    min_backoff: 1s
    max_backoff: 2s
  receivers:
    - name: chat
      webhook_configs:
        - url: %s/hook
`, hookURL)
}

func postAlert(t *testing.T, p *proc, name string) {
	t.Helper()
	body := fmt.Sprintf(`[{"labels":{"alertname":%q,"severity":"P1","job":"vllm"},"annotations":{"summary":"from an external Prometheus"}}]`, name)
	code, out := p.post("/api/v2/alerts", "application/json", []byte(body), nil)
	require.Equal(t, http.StatusOK, code, out)
}

// TestAmtoolSilences: amtool v0.28.1 adds, queries and expires a silence
// against the appliance; the silenced alert is not sent while the silence
// lasts and is sent once it is expired.
func TestAmtoolSilences(t *testing.T) {
	am := amtool(t)
	hook := newWebhookSink(t)
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, notifyConfig(hook.srv.URL)), filepath.Join(dir, "data"))
	amURL := "--alertmanager.url=" + p.url("/")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(am, append([]string{amURL}, args...)...).CombinedOutput()
		require.NoError(t, err, "amtool %s: %s", strings.Join(args, " "), out)
		return strings.TrimSpace(string(out))
	}

	id := run("silence", "add", "alertname=Noisy", "--comment=deploy in progress", "--author=ops", "--duration=1h")
	require.Regexp(t, `^[0-9a-f-]{36}$`, id)
	require.Equal(t, id, run("silence", "query", "-q"))
	require.Equal(t, id, run("silence", "query", "-q", "alertname=Noisy"))
	require.Empty(t, run("silence", "query", "-q", "alertname=Other"))
	table := run("silence", "query")
	require.Contains(t, table, "deploy in progress")
	require.Contains(t, table, "ops")

	postAlert(t, p, "Noisy")
	postAlert(t, p, "Real")
	eventually(t, 20*time.Second, "the unsilenced alert at the webhook", func() bool {
		return slices.Contains(hook.alertnames(), "Real:firing")
	})
	// Barrier: an alert posted now, after Noisy's group has passed its
	// group_wait (Real's, created later, has), goes through the same
	// dispatch and delivery; once it is at the webhook, Noisy would be too
	// had the silence not held.
	postAlert(t, p, "Sentinel")
	eventually(t, 20*time.Second, "the sentinel alert at the webhook", func() bool {
		return slices.Contains(hook.alertnames(), "Sentinel:firing")
	})
	require.NotContains(t, hook.alertnames(), "Noisy:firing")
	require.Contains(t, run("alert", "query", "--silenced"), "Noisy")

	run("silence", "expire", id)
	require.Empty(t, run("silence", "query", "-q"), "expired silences are not listed by default")
	require.Contains(t, run("silence", "query", "--expired", "-q"), id)
	postAlert(t, p, "Noisy")
	eventually(t, 20*time.Second, "the alert after its silence expired", func() bool {
		return slices.Contains(hook.alertnames(), "Noisy:firing")
	})

	// Status and receivers, as amtool config shows them.
	require.Contains(t, run("config", "routes"), "chat")
	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}

// TestNotificationSurvivesKill9: the webhook is down when the alert's
// notification is made; the appliance is killed, restarted, and delivers
// it once the webhook is back.
func TestNotificationSurvivesKill9(t *testing.T) {
	hook := newWebhookSink(t)
	hook.setDown(true)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, notifyConfig(hook.srv.URL))
	data := filepath.Join(dir, "data")
	p := start(t, cfg, data)
	postAlert(t, p, "Durable")
	eventually(t, 20*time.Second, "the notification queued", func() bool {
		code, body := p.getRaw("/metrics")
		return code == http.StatusOK && strings.Contains(body, `appliance_notifications_queued{receiver="chat"} 1`)
	})
	p.kill9()

	hook.setDown(false)
	p = start(t, cfg, data)
	eventually(t, 20*time.Second, "delivery after the restart", func() bool {
		return slices.Contains(hook.alertnames(), "Durable:firing")
	})
	require.Len(t, hook.payloads(), 1)
	code, body := p.getRaw("/api/v2/notifications")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"result":"sent"`)
	require.NotContains(t, body, hook.srv.URL, "no receiver URL in the API")
	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}

// getRaw GETs path and returns the status and body.
func (p *proc) getRaw(path string) (int, string) {
	p.t.Helper()
	resp, err := http.Get(p.url(path))
	require.NoError(p.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNotifyTestCommand: `appliance notify test --receiver chat` sends a
// test message to the webhook.
func TestNotifyTestCommand(t *testing.T) {
	hook := newWebhookSink(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, notifyConfig(hook.srv.URL))
	out, err := exec.Command(binary, "notify", "test", "--receiver", "chat", "--config", cfg).CombinedOutput()
	require.NoError(t, err, "%s", out)
	got := hook.payloads()
	require.Len(t, got, 1)
	require.Equal(t, "ApplianceNotifyTest", got[0].Alerts[0].Labels["alertname"])

	out, err = exec.Command(binary, "notify", "test", "--receiver", "nobody", "--config", cfg).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), `no receiver named "nobody"`)
}

// TestDemoFleetNotifications: the demo fleet made slow raises a P1 that
// reaches the chat webhook within group_wait (30s for P1) plus one
// evaluation interval; a P2 never interrupts and arrives in the digest.
func TestDemoFleetNotifications(t *testing.T) {
	fleet := runFleet(t, 2)
	chat := newWebhookSink(t)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fleet.rules.yml"), []byte(`groups:
  - name: fleet
    interval: 1s
    warmup: 0s
    rules:
      - alert: FleetSlowTTFT
        expr: histogram_quantile(0.9, sum by (le, instance, job) (rate(vllm:time_to_first_token_seconds_bucket[10s]))) > 0.6
        for: 2s
        labels:
          severity: P1
      - alert: FleetScraped
        expr: up{job="vllm"} == 1
        labels:
          severity: P2
`), 0o644))
	var targets []string
	for _, tg := range fleet.Targets() {
		targets = append(targets, fmt.Sprintf("%q", tg))
	}
	config := func(digestAt time.Time) string {
		return fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: [%s]
rule_files:
  - fleet.rules.yml
# Model servers that other programs run on this box are not part of the test.
autodetect: {enabled: false}
alerting:
  digest:
    at: "%s"
    timezone: UTC
  receivers:
    - name: chat
      webhook_configs:
        - url: %s/chat
`, strings.Join(targets, ", "), digestAt.UTC().Format("15:04"), chat.srv.URL)
	}
	// First a digest time that passed today: the next one is tomorrow.
	cfg := writeConfig(t, dir, config(time.Now().Add(-2*time.Hour)))
	p := start(t, cfg, filepath.Join(dir, "data"))

	eventually(t, 60*time.Second, "the P2 firing", func() bool {
		return slices.Contains(firingSeverities(p.alerts("FleetScraped")), "P2")
	})
	// The rules hand their alerts to notify (cmd/appliance/rules.go:
	// opts.Notifier = a.alertSink()).
	connected := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, body := p.getRaw("/api/v2/alerts"); strings.Contains(body, "FleetScraped") {
			connected = true
			break
		}
	}
	require.True(t, connected, "the rules' alerts never reached notify's /api/v2/alerts (cmd/appliance/rules.go: opts.Notifier = a.alertSink())")

	fleet.Instance(0).SetSlow(10)
	var fired time.Time
	eventually(t, 60*time.Second, "the P1 firing", func() bool {
		if slices.Contains(firingSeverities(p.alerts("FleetSlowTTFT")), "P1") {
			fired = time.Now()
			return true
		}
		return false
	})
	eventually(t, 45*time.Second, "the P1 at the chat webhook", func() bool {
		return slices.Contains(chat.alertnames(), "FleetSlowTTFT:firing")
	})
	chat.mu.Lock()
	var at time.Time
	for i, pl := range chat.got {
		if pl.GroupKey != "digest" && len(pl.Alerts) > 0 && pl.Alerts[0].Labels["alertname"] == "FleetSlowTTFT" {
			at = chat.at[i]
			break
		}
	}
	chat.mu.Unlock()
	// group_wait 30s + one evaluation interval (1s), plus the notifier's
	// one-second tick and the delivery.
	t.Logf("P1 at the webhook %s after it fired", at.Sub(fired).Round(time.Millisecond))
	require.LessOrEqual(t, at.Sub(fired), 30*time.Second+time.Second+3*time.Second)

	require.NotContains(t, chat.alertnames(), "FleetScraped:firing", "no P2 before the digest")

	// The P2 has been recorded for the digest since well before the P1
	// arrived (its group waits 30s too). Move the digest to the next
	// minute at least 15s away, by a reload.
	digestAt := time.Now().Add(75 * time.Second).Truncate(time.Minute)
	require.NoError(t, os.WriteFile(cfg, []byte(config(digestAt)), 0o644))
	code, body := p.post("/-/reload", "text/plain", nil, nil)
	require.Equal(t, http.StatusOK, code, body)
	eventually(t, time.Until(digestAt)+30*time.Second, "the digest", func() bool {
		for _, pl := range chat.payloads() {
			if pl.GroupKey == "digest" {
				return true
			}
		}
		return false
	})
	for _, pl := range chat.payloads() {
		for _, a := range pl.Alerts {
			if a.Labels["alertname"] == "FleetScraped" {
				require.Equal(t, "digest", pl.GroupKey, "a P2 only ever in the digest")
			}
		}
	}
	var digest webhookPayload
	for _, pl := range chat.payloads() {
		if pl.GroupKey == "digest" {
			digest = pl
		}
	}
	var inDigest []string
	for _, a := range digest.Alerts {
		inDigest = append(inDigest, a.Labels["alertname"])
	}
	require.Contains(t, inDigest, "FleetScraped")
	require.NotContains(t, inDigest, "FleetSlowTTFT")
	exit, _ := p.stop()
	require.Equal(t, 0, exit)
}

// TestStatusIsAlertmanagerConfig: the config /api/v2/status shows loads in
// Alertmanager (amtool check-config), for the default alerting section and
// for one with every kind of receiver, and holds none of their secrets.
func TestStatusIsAlertmanagerConfig(t *testing.T) {
	am := amtool(t)
	dir := t.TempDir()
	for i, cfg := range []string{"", "../config/testdata/alerting/good.yml"} {
		p := start(t, cfg, filepath.Join(dir, fmt.Sprintf("data%d", i)))
		code, body := p.getRaw("/api/v2/status")
		require.Equal(t, http.StatusOK, code)
		var st struct {
			Cluster struct{ Status string }
			Config  struct{ Original string }
		}
		require.NoError(t, json.Unmarshal([]byte(body), &st))
		require.Equal(t, "disabled", st.Cluster.Status)
		f := filepath.Join(dir, fmt.Sprintf("am%d.yml", i))
		require.NoError(t, os.WriteFile(f, []byte(st.Config.Original), 0o644))
		out, err := exec.Command(am, "check-config", f).CombinedOutput()
		require.NoError(t, err, "%s\n%s", out, st.Config.Original)
		for _, secret := range []string{"ding-token", "SECding-secret", "wecom-key", "feishu-secret", "mail-password", "sms-token"} {
			require.NotContains(t, body, secret)
		}
		exit, _ := p.stop()
		require.Equal(t, 0, exit)
	}
}
