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
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The appliance's lifecycle as cmd/appliance/wiring.go orders it: reload
// in two phases (all parts or none), and shutdown in order (input, rules,
// notify, downsample, web, storage).

// ruleGroups lists the names of the rule groups /api/v1/rules serves.
func ruleGroups(t *testing.T, p *proc) []string {
	t.Helper()
	code, r := p.get("/api/v1/rules", nil)
	require.Equal(t, http.StatusOK, code)
	var data struct {
		Groups []struct {
			Name string `json:"name"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &data))
	var out []string
	for _, g := range data.Groups {
		// Built in: the warm-up group and the always-on appliance pack's
		// groups (appliance-storage, ...).
		if !strings.HasPrefix(g.Name, "appliance-") {
			out = append(out, g.Name)
		}
	}
	return out
}

// amConfig is the alerting config Alertmanager's /api/v2/status shows.
func amConfig(t *testing.T, p *proc) string {
	t.Helper()
	resp, err := http.Get(p.url("/api/v2/status"))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var st struct {
		Config struct {
			Original string `json:"original"`
		} `json:"config"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st.Config.Original
}

// statusConfig is the YAML /api/v1/status/config shows.
func statusConfig(t *testing.T, p *proc) string {
	t.Helper()
	code, r := p.get("/api/v1/status/config", nil)
	require.Equal(t, http.StatusOK, code)
	var data struct {
		YAML string `json:"yaml"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &data))
	return data.YAML
}

// selfMetric returns a sample line of the appliance's /metrics.
func selfMetric(t *testing.T, p *proc, name string) string {
	t.Helper()
	resp, err := http.Get(p.url("/metrics"))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return line
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return ""
}

// TestReloadAllOrNothing: a reload that renames a scrape job, changes the
// route and adds a rule file with an invalid severity is refused with 500,
// and the targets, the rules, the route and status/config all stay the
// old ones; a good reload then applies every one of them.
func TestReloadAllOrNothing(t *testing.T) {
	srv := serveFixture(t, fixture{"ok", "text/plain; version=0.0.4", []byte("ok 1\n")})
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	write("old.rules.yml", `groups:
  - name: old
    rules:
      - alert: OldRule
        expr: vector(0) > 1
        labels: {severity: P2}
`)
	write("new.rules.yml", `groups:
  - name: new
    rules:
      - alert: NewRule
        expr: vector(0) > 1
        labels: {severity: P2}
`)
	write("bad.rules.yml", `groups:
  - name: bad
    rules:
      - alert: BadSeverity
        expr: vector(0) > 1
        labels:
          severity: P7
`)
	cfg := func(job, receiver string, ruleFiles ...string) string {
		return fmt.Sprintf(`global: {scrape_interval: 1s}
scrape_configs:
  - job_name: %s
    static_configs: [{targets: [%q]}]
rule_files: [%s]
alerting:
  route: {receiver: %s}
  receivers:
    - name: %s
      webhook_configs: [{url: "http://127.0.0.1:1/hook"}]
`, job, host, strings.Join(ruleFiles, ", "), receiver, receiver) + quiet
	}
	cfgPath := filepath.Join(dir, "appliance.yml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg("job_a", "chat_old", "old.rules.yml")), 0o644))
	p := start(t, cfgPath, filepath.Join(dir, "data"))
	eventually(t, 20*time.Second, "job_a active", func() bool { return strings.Join(jobs(t, p), ",") == "job_a" })
	require.Equal(t, []string{"old"}, ruleGroups(t, p))
	require.Contains(t, amConfig(t, p), "receiver: chat_old")
	require.Contains(t, statusConfig(t, p), "job_name: job_a")

	// Refused: job renamed, route changed, and a rule file that does not
	// pass. Every part prepared, the rules refused, so none applied.
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg("job_b", "chat_new", "old.rules.yml", "bad.rules.yml")), 0o644))
	code, body := p.post("/-/reload", "text/plain", nil, nil)
	require.Equal(t, http.StatusInternalServerError, code)
	require.Contains(t, body, "rules: ")
	require.Contains(t, body, "bad.rules.yml:6: ") // the labels of the rule
	require.Contains(t, body, `severity "P7"`)
	// Applying a scrape config without job_a would have stopped job_a's
	// pool at once, so it still being the only job shows nothing applied.
	require.Equal(t, []string{"job_a"}, jobs(t, p))
	require.Equal(t, []string{"old"}, ruleGroups(t, p))
	am := amConfig(t, p)
	require.Contains(t, am, "receiver: chat_old")
	require.NotContains(t, am, "chat_new")
	sc := statusConfig(t, p)
	require.Contains(t, sc, "job_name: job_a")
	require.NotContains(t, sc, "job_b")
	require.Equal(t, "appliance_config_last_reload_successful 0", selfMetric(t, p, "appliance_config_last_reload_successful"))

	// A good reload applies all of them.
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg("job_b", "chat_new", "new.rules.yml")), 0o644))
	code, body = p.post("/-/reload", "text/plain", nil, nil)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "appliance_config_last_reload_successful 1", selfMetric(t, p, "appliance_config_last_reload_successful"))
	require.Equal(t, []string{"new"}, ruleGroups(t, p))
	require.Contains(t, amConfig(t, p), "receiver: chat_new")
	require.Contains(t, statusConfig(t, p), "job_name: job_b")
	eventually(t, 20*time.Second, "job_b replaces job_a", func() bool { return strings.Join(jobs(t, p), ",") == "job_b" })
}

// blockingHook is a webhook receiver whose first request blocks until
// the client gives up (or release is closed); it signals inFlight when that
// request arrives. Later requests are answered at once and kept.
type blockingHook struct {
	srv      *httptest.Server
	inFlight chan struct{}
	release  chan struct{}
	first    atomic.Bool
	mu       sync.Mutex
	got      []webhookPayload
	received chan struct{} // gets a value for every answered request
}

func newBlockingHook(t *testing.T) *blockingHook {
	h := &blockingHook{inFlight: make(chan struct{}), release: make(chan struct{}), received: make(chan struct{}, 16)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if h.first.CompareAndSwap(false, true) {
			close(h.inFlight)
			select {
			case <-h.release:
			case <-r.Context().Done():
				return
			}
			http.Error(w, "released", http.StatusServiceUnavailable)
			return
		}
		var p webhookPayload
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("webhook body: %v: %s", err, b)
		}
		h.mu.Lock()
		h.got = append(h.got, p)
		h.mu.Unlock()
		h.received <- struct{}{}
	}))
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
		h.srv.Close()
	})
	return h
}

// countingTarget serves lifecycle_scrapes_total, the number of scrapes
// it has served, this one included.
type countingTarget struct {
	srv *httptest.Server
	n   atomic.Int64
}

func newCountingTarget(t *testing.T) *countingTarget {
	c := &countingTarget{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "lifecycle_scrapes_total %d\n", c.n.Add(1))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// stopLines returns the parts in the order the appliance logged that they
// stopped, then "storage" when the storage closed.
func stopLines(out string) []string {
	var parts []string
	for line := range strings.SplitSeq(out, "\n") {
		switch {
		case strings.Contains(line, `msg="part stopped"`):
			_, v, _ := strings.Cut(line, " part=")
			parts = append(parts, strings.Trim(v, `"`))
		case strings.Contains(line, `msg="storage closed"`):
			parts = append(parts, "storage")
		}
	}
	return parts
}

// TestShutdownOrdered: with scraping, a rule firing (for: 0s) and its
// notification in flight to a receiver that does not answer, SIGTERM
// turns /-/ready to 503 while the notification is still in flight, stops
// input first and the storage last, and exits 0 within 5 s. The
// notification the receiver never accepted is in the outbox after a
// restart, and delivered then.
func TestShutdownOrdered(t *testing.T) {
	target := newCountingTarget(t)
	hook := newBlockingHook(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "always.rules.yml"), []byte(`groups:
  - name: lifecycle
    rules:
      - alert: Always
        expr: vector(1)
        for: 0s
        labels: {severity: P1}
`), 0o644))
	alerting := fmt.Sprintf(`alerting:
  route:
    receiver: hook
    group_by: [alertname]
    group_wait: 0s
    group_interval: 1h
    repeat_interval: 1h
  outbox:
    min_backoff: 1s
    max_backoff: 1s
  receivers:
    - name: hook
      webhook_configs: [{url: %q}]
`, hook.srv.URL+"/hook")
	body := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: counting
    static_configs: [{targets: [%q]}]
rule_files: [always.rules.yml]
`, strings.TrimPrefix(target.srv.URL, "http://")) + alerting
	cfgPath := writeConfig(t, dir, body)
	data := filepath.Join(dir, "data")
	p := start(t, cfgPath, data)

	// Barrier: the rule fired and its notification is at the receiver,
	// which holds it.
	select {
	case <-hook.inFlight:
	case <-time.After(30 * time.Second):
		t.Fatalf("no notification reached the receiver within 30s:\n%s", p.Output())
	}
	eventually(t, 20*time.Second, "scraping runs", func() bool { return target.n.Load() > 0 })

	begin := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	// /-/ready answers 503 while the shutdown waits on the notification
	// in flight (the receiver holds it until the notifier gives up).
	deadline := time.Now().Add(5 * time.Second)
	sawNotReady := false
	for !sawNotReady && time.Now().Before(deadline) {
		resp, err := http.Get(p.url("/-/ready"))
		require.NoError(t, err, "the web server stops after notify, which is still draining")
		resp.Body.Close()
		sawNotReady = resp.StatusCode == http.StatusServiceUnavailable
	}
	require.True(t, sawNotReady, "/-/ready did not turn 503 after SIGTERM")
	// Input has stopped by the time notify drains: ingest is refused,
	// and the target sees no more scrapes.
	// (/-/ready turns 503 first, then the inputs stop: the refusal may
	// follow it by a moment; seen in CI: one 204 right after the 503.)
	eventually(t, 5*time.Second, "ingest refused", func() bool {
		code, _ := p.post("/api/v1/import/prometheus", "text/plain", []byte("late_sample 1\n"), nil)
		return code == http.StatusServiceUnavailable
	})
	eventually(t, 5*time.Second, "the scraper stopped", func() bool {
		return strings.Contains(p.Output(), `msg="part stopped" part=scrape`)
	})
	scrapes := target.n.Load()

	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("appliance did not exit within 10s of SIGTERM:\n%s", p.Output())
	}
	took := time.Since(begin)
	stoppedAt := time.Now()
	require.Equal(t, 0, p.cmd.ProcessState.ExitCode(), p.Output())
	require.Less(t, took, 5*time.Second, "shutdown took %s", took)
	require.Equal(t, scrapes, target.n.Load(), "a scrape after the scraper stopped")
	require.Equal(t, []string{
		"web ingest", "scrape", "probes", // input
		"rules", "slo reports", "cardinality", "notify", "downsample", "web",
		"remote write", // after every writer, so the queues hold all they took
		"storage",
	}, stopLines(p.Output()))

	// Restart without the rule, so that only the outbox can send.
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`global: {scrape_interval: 1s}
scrape_configs:
  - job_name: counting
    static_configs: [{targets: [%q]}]
`, strings.TrimPrefix(target.srv.URL, "http://"))+alerting+quiet), 0o644))
	p2 := start(t, cfgPath, data)
	select {
	case <-hook.received:
	case <-time.After(30 * time.Second):
		t.Fatalf("the outboxed notification was not delivered after the restart:\n%s", p2.Output())
	}
	hook.mu.Lock()
	got := hook.got
	hook.mu.Unlock()
	require.Len(t, got, 1)
	require.Len(t, got[0].Alerts, 1)
	require.Equal(t, "Always", got[0].Alerts[0].Labels["alertname"])
	require.Equal(t, "firing", got[0].Alerts[0].Status)

	// The history says it went out on a later attempt, not as a new
	// message. The receiver got it before the notifier recorded it.
	type delivery struct {
		Result   string `json:"result"`
		Attempts int    `json:"attempts"`
	}
	var hist []delivery
	eventually(t, 10*time.Second, "the delivery in the history", func() bool {
		resp, err := http.Get(p2.url("/api/v2/notifications"))
		require.NoError(t, err)
		defer resp.Body.Close()
		hist = nil
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&hist))
		return len(hist) > 0
	})
	require.Len(t, hist, 1)
	require.Equal(t, "sent", hist[0].Result)
	require.GreaterOrEqual(t, hist[0].Attempts, 2)

	// Every scrape the target served before the stop is stored (the last
	// one may have been cut off in flight), none after: the storage closed
	// after the scraper had stopped.
	v := p2.instant(`max_over_time(lifecycle_scrapes_total{job="counting"}[10m])`, stoppedAt)
	require.Len(t, v, 1)
	stored := int64(value(t, v[0]))
	require.LessOrEqual(t, stored, scrapes)
	require.GreaterOrEqual(t, stored, scrapes-1)
}

// TestCheckStageErrors: `appliance check` reports what the stages find
// (rule files, rule pack names, message templates, remote read endpoints)
// at file:line, now that the command asks them rather than config; the
// exact messages are checked in cmd/appliance's tests.
func TestCheckStageErrors(t *testing.T) {
	files, err := filepath.Glob("../cmd/appliance/testdata/*.bad.yml")
	require.NoError(t, err)
	more, err := filepath.Glob("../cmd/appliance/testdata/alerting/*.bad.yml")
	require.NoError(t, err)
	files = append(files, more...)
	require.Len(t, files, 4)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, err := exec.Command(binary, "check", "--config", f).CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "output: %s", out)
			require.Equal(t, 1, ee.ExitCode(), string(out))
			require.Regexp(t, regexp.MustCompile(`(?m)^\S+\.yml:\d+: \S`), string(out))
		})
	}
}
