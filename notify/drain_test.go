package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"

	"github.com/aiserve/appliance/clock"
)

// blockingReceiver answers 200 once release is closed; inFlight is closed
// when the first request arrives.
func blockingReceiver(t *testing.T) (url string, inFlight, release chan struct{}) {
	inFlight, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(inFlight) })
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return srv.URL, inFlight, release
}

const drainConfig = `
alerting:
  route: {receiver: slow, group_by: [alertname], group_wait: 0s}
  receivers:
    - name: slow
      webhook_configs: [{url: "URL"}]
`

// TestRunDrainsAtShutdown: when Run's context ends with a delivery in
// flight, the delivery may finish within the drain; one that does not is
// cut off and its message stays in the outbox.
func TestRunDrainsAtShutdown(t *testing.T) {
	for _, accepted := range []bool{true, false} {
		name := map[bool]string{true: "accepted during the drain", false: "cut off at the drain"}[accepted]
		t.Run(name, func(t *testing.T) {
			url, inFlight, release := blockingReceiver(t)
			clock := clock.NewFake(t0)
			cfg, err := config.Load([]byte(strings.Replace(drainConfig, "URL", url, 1)), "test.yml")
			require.NoError(t, err)
			e := newEnv(t, clock, cfg.Alerting)
			e.n.opts.DrainTimeout = 50 * time.Millisecond
			if accepted {
				e.n.opts.DrainTimeout = time.Hour // the release ends it
			}
			e.fire(t0.Add(time.Hour), "alertname", "Slow")

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- e.n.Run(ctx) }()
			<-inFlight
			cancel()
			if accepted {
				close(release)
			}
			require.NoError(t, <-done)
			if accepted {
				require.Zero(t, e.outboxLen(), "delivered during the drain")
			} else {
				require.Equal(t, 1, e.outboxLen(), "kept for the next start")
			}
		})
	}
}

// TestRunSendsGroupWaitZeroAtOnce: a new group with group_wait 0s is sent
// by Run without waiting for the next tick (here an hour away).
func TestRunSendsGroupWaitZeroAtOnce(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	cfg := loadAlerting(t, `
alerting:
  route: {receiver: h, group_by: [alertname], group_wait: 0s}
  receivers:
    - name: h
      webhook_configs: [{url: "{{HOOK:h}}"}]
`, map[string]*hook{"h": h})
	e := newEnv(t, clock, cfg)
	e.n.opts.TickInterval = time.Hour
	sent := func(name string) func() bool {
		return func() bool {
			for _, r := range h.all() {
				for _, n := range names(r.payload) {
					if n == name+":firing" {
						return true
					}
				}
			}
			return false
		}
	}
	e.fire(t0.Add(time.Hour), "alertname", "First")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.n.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	// The first tick, at once, sends what was there before Run.
	require.Eventually(t, sent("First"), 30*time.Second, 10*time.Millisecond)
	// A new group after it: sent on a wake, not an hour later.
	e.fire(t0.Add(time.Hour), "alertname", "Second")
	require.Eventually(t, sent("Second"), 30*time.Second, 10*time.Millisecond)
}
