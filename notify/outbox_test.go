package notify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/clock"
)

// A receiver down for 30 minutes gets every notification afterwards, in
// the order they were made, per group.
func TestReceiverDownThirtyMinutes(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, `
alerting:
  route:
    receiver: hook
    group_by: [job]
    group_wait: 10s
    group_interval: 1m
    repeat_interval: 4h
  receivers:
    - name: hook
      webhook_configs: [{url: "{{HOOK:hook}}"}]
`, map[string]*hook{"hook": h}))
	reg := prometheus.NewRegistry()
	e.n.m = newMetrics(reg)
	h.setDown(true)
	far := t0.Add(10 * time.Hour)

	// Every 3 minutes one more alert in each of two groups: each flush
	// makes a new notification.
	for i := range 10 {
		for _, job := range []string{"vllm", "tgi"} {
			e.fire(far, "alertname", fmt.Sprintf("A%02d", i), "job", job)
		}
		e.advance(3*time.Minute, 5*time.Second)
	}
	require.Empty(t, h.all())
	require.Equal(t, 20, e.outboxLen(), "10 notifications per group wait in the outbox")
	require.Greater(t, testutil.ToFloat64(e.n.m.total.WithLabelValues("hook", "retried")), 0.0)
	require.Equal(t, 20.0, testutil.ToFloat64(e.n.m.queued.WithLabelValues("hook")))

	h.setDown(false)
	e.advance(10*time.Minute, 5*time.Second)
	require.Zero(t, e.outboxLen())
	got := h.all()
	require.Len(t, got, 20)
	perGroup := map[string][]int{}
	for _, r := range got {
		perGroup[r.payload.GroupLabels["job"]] = append(perGroup[r.payload.GroupLabels["job"]], len(r.payload.Alerts))
	}
	want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	require.Equal(t, want, perGroup["vllm"], "delivered in order")
	require.Equal(t, want, perGroup["tgi"], "delivered in order")
	require.Equal(t, 20.0, testutil.ToFloat64(e.n.m.total.WithLabelValues("hook", "sent")))
	require.Equal(t, 0.0, testutil.ToFloat64(e.n.m.queued.WithLabelValues("hook")))
}

// A notification that is never accepted is given up after give_up_after
// and recorded as failed; a rejection (4xx) is not retried.
func TestGiveUp(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, `
alerting:
  route: {receiver: hook, group_wait: 10s}
  outbox: {give_up_after: 1h, min_backoff: 10s, max_backoff: 5m}
  receivers:
    - name: hook
      webhook_configs: [{url: "{{HOOK:hook}}"}]
`, map[string]*hook{"hook": h}))
	h.setDown(true)
	e.fire(t0.Add(10*time.Hour), "alertname", "X")
	e.advance(59*time.Minute, 10*time.Second)
	require.Equal(t, 1, e.outboxLen())
	// Backoff doubles: 10s, 20s, ... 5m, so about 16 tries in an hour,
	// not 350.
	require.Less(t, h.tries, 25)
	e.advance(6*time.Minute, 10*time.Second)
	require.Zero(t, e.outboxLen())
	hist, err := e.n.History(10)
	require.NoError(t, err)
	require.Equal(t, "failed", hist[0].Result)
	require.Contains(t, hist[0].Error, "503")
	require.NotContains(t, hist[0].Error, h.srv.URL, "no URL in errors")
}

// The process stops between the receiver's yes and the outbox's delete:
// after the restart the notification is sent once more, with the same
// dedup key, and then never again.
func TestCrashBetweenSendAndAck(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	cfg := loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h})
	e := newEnv(t, clock, cfg)
	crash := errors.New("crash")
	e.n.afterSend = func(*outboxEntry) error { return crash }
	e.fire(t0.Add(10*time.Hour), "alertname", "Slow")
	e.clock.Set(t0.Add(30 * time.Second))
	require.ErrorIs(t, e.n.Tick(context.Background()), crash)
	require.Len(t, h.all(), 1)
	require.Equal(t, 1, e.outboxLen())

	require.NoError(t, e.db.Close())
	e.open()
	e.advance(time.Minute, time.Second)
	got := h.all()
	require.Len(t, got, 2, "sent again once")
	require.Equal(t, got[0].dedup, got[1].dedup)
	require.NotEmpty(t, got[0].dedup)
	require.Zero(t, e.outboxLen())
	// The notification log survived: the restarted notifier, fed the same
	// alert again by the rules, does not notify it again.
	e.fire(t0.Add(10*time.Hour), "alertname", "Slow")
	e.advance(30*time.Minute, 10*time.Second)
	require.Len(t, h.all(), 2)
}

// crashChildEnv makes the test binary the crashing process of
// TestKillNineBetweenSendAndAck.
const crashChildEnv = "NOTIFY_TEST_CRASH_CHILD"

// TestKillNineBetweenSendAndAck runs a real process that writes the
// outbox, gets the receiver's yes and dies (os.Exit, no Close of the bbolt
// file, as kill -9 would leave it); this process then reopens the file,
// resumes, and the receiver gets the notification a second time with the
// same dedup key, and not a third.
func TestKillNineBetweenSendAndAck(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(t, dir)
		return
	}
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "url"), []byte(h.srv.URL+"/hook"), 0o600))
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillNineBetweenSendAndAck$", "-test.v")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the child must die: %s", out)
	require.Equal(t, 137, ee.ExitCode(), "%s", out)
	require.Len(t, h.all(), 1)

	e := &env{t: t, clock: clock, path: filepath.Join(dir, "state.db"), cfg: loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h})}
	e.open()
	t.Cleanup(func() { _ = e.db.Close() })
	require.Equal(t, 1, e.outboxLen(), "the outbox entry survived the crash")
	e.advance(time.Minute, time.Second)
	got := h.all()
	require.Len(t, got, 2)
	require.Equal(t, got[0].dedup, got[1].dedup)
	require.Zero(t, e.outboxLen())
	e.advance(10*time.Minute, time.Second)
	require.Len(t, h.all(), 2)
}

func crashChild(t *testing.T, dir string) {
	u, err := os.ReadFile(filepath.Join(dir, "url"))
	require.NoError(t, err)
	clock := clock.NewFake(t0)
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, nil)
	require.NoError(t, err)
	opts := DefaultOptions()
	opts.DB, opts.Now = db, clock.Now
	cfgYAML := fmt.Sprintf(`
alerting:
  route: {receiver: hook, group_wait: 30s}
  receivers:
    - name: hook
      webhook_configs: [{url: %s}]
`, strconv.Quote(string(u)))
	opts.Config = loadAlerting(t, cfgYAML, nil)
	n, err := New(opts)
	require.NoError(t, err)
	n.afterSend = func(*outboxEntry) error {
		os.Exit(137) // no Close, no deferred functions: as kill -9
		return nil
	}
	n.Post(nil)
	e := &env{t: t, clock: clock, db: db, n: n}
	e.fire(t0.Add(10*time.Hour), "alertname", "Slow")
	e.advance(time.Minute, time.Second)
	t.Fatal("the child should have died at the first send")
}

// The notification log forgets groups that have not notified for
// nflogRetention; a group that keeps firing keeps its entry by repeating.
func TestNflogRetention(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h}))
	e.fire(t0.Add(time.Minute), "alertname", "Short")
	e.fire(t0.Add(200*time.Hour), "alertname", "Long")
	e.advance(time.Minute, time.Second)
	count := func() int {
		n := 0
		require.NoError(t, e.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketNflog).ForEach(func(_, _ []byte) error { n++; return nil })
		}))
		return n
	}
	require.Equal(t, 2, count())
	e.advance(nflogRetention+2*time.Hour, 5*time.Minute)
	require.Equal(t, 1, count(), "only the group that kept firing (and repeating) is left")
}
