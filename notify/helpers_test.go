package notify

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/clock"
	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/webhook"
)

// hook is a webhook receiver that records what it got and when (on the
// fake clock), and can be down.
type hook struct {
	t     testing.TB
	clock *clock.Fake
	srv   *httptest.Server

	mu    sync.Mutex
	down  bool
	got   []received
	tries int
}

type received struct {
	at      time.Time
	payload webhook.Payload
	dedup   string
}

func newHook(t testing.TB, clock *clock.Fake) *hook {
	h := &hook{t: t, clock: clock}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.tries++
		if h.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var p webhook.Payload
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("webhook body is not the v4 payload: %v: %s", err, b)
		}
		h.got = append(h.got, received{at: clock.Now(), payload: p, dedup: r.Header.Get(webhook.DedupHeader)})
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) setDown(d bool) {
	h.mu.Lock()
	h.down = d
	h.mu.Unlock()
}

func (h *hook) all() []received {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]received(nil), h.got...)
}

// env is a notifier on a temporary bbolt file with a fake clock.
type env struct {
	t     testing.TB
	clock *clock.Fake
	path  string
	db    *bolt.DB
	n     *Notifier
	cfg   config.AlertingConfig
}

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC) // a Monday

// loadAlerting loads an alerting section through the config loader, with
// {{HOOK:name}} replaced by the URL of hooks[name].
func loadAlerting(t testing.TB, yml string, hooks map[string]*hook) config.AlertingConfig {
	t.Helper()
	for name, h := range hooks {
		yml = strings.ReplaceAll(yml, "{{HOOK:"+name+"}}", h.srv.URL+"/"+name)
	}
	cfg, err := config.Load([]byte(yml), "test.yml")
	require.NoError(t, err)
	return cfg.Alerting
}

func newEnv(t testing.TB, clock *clock.Fake, cfg config.AlertingConfig) *env {
	t.Helper()
	e := &env{t: t, clock: clock, path: filepath.Join(t.TempDir(), "state.db"), cfg: cfg}
	e.open()
	t.Cleanup(func() { _ = e.db.Close() })
	return e
}

// open opens the bbolt file and makes a notifier on it.
func (e *env) open() {
	e.t.Helper()
	db, err := bolt.Open(e.path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(e.t, err)
	e.db = db
	opts := DefaultOptions()
	opts.DB, opts.Config, opts.Now = db, e.cfg, e.clock.Now
	opts.ExternalURL = "http://appliance.test:9090"
	opts.Logger = slog.New(slog.DiscardHandler)
	n, err := New(opts)
	require.NoError(e.t, err)
	e.n = n
}

// advance moves the clock by d in steps of step, ticking after each.
func (e *env) advance(d, step time.Duration) {
	e.t.Helper()
	end := e.clock.Now().Add(d)
	for e.clock.Now().Before(end) {
		next := e.clock.Now().Add(step)
		if next.After(end) {
			next = end
		}
		e.clock.Set(next)
		_ = e.n.Tick(context.Background())
	}
}

// fire posts a firing alert that lasts until until.
func (e *env) fire(until time.Time, lbls ...string) {
	ls := model.LabelSet{}
	for i := 0; i+1 < len(lbls); i += 2 {
		ls[model.LabelName(lbls[i])] = model.LabelValue(lbls[i+1])
	}
	e.n.Post([]model.Alert{{Labels: ls, StartsAt: e.clock.Now(), EndsAt: until}})
}

// resolve posts the alert as resolved now.
func (e *env) resolve(lbls ...string) {
	ls := model.LabelSet{}
	for i := 0; i+1 < len(lbls); i += 2 {
		ls[model.LabelName(lbls[i])] = model.LabelValue(lbls[i+1])
	}
	e.n.Post([]model.Alert{{Labels: ls, EndsAt: e.clock.Now()}})
}

func (e *env) outboxLen() int {
	es, err := pending(e.db)
	require.NoError(e.t, err)
	return len(es)
}

// names returns the alertnames of a payload, with status.
func names(p webhook.Payload) []string {
	var out []string
	for _, a := range p.Alerts {
		out = append(out, a.Labels["alertname"]+":"+a.Status)
	}
	return out
}
