package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/clock"
)

func TestNextDigest(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	f := func(after time.Time, hh, mm int, want time.Time) {
		t.Helper()
		require.Equal(t, want.UTC(), NextDigest(after, hh, mm, berlin).UTC())
	}
	// Before and after 09:00 on an ordinary day (CET, UTC+1).
	f(time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC), 9, 0, time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))
	f(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC), 9, 0, time.Date(2026, 3, 3, 8, 0, 0, 0, time.UTC))
	// Spring forward (29 March 2026): 09:00 CEST is 07:00 UTC, 23 hours
	// after the day before.
	f(time.Date(2026, 3, 28, 8, 0, 0, 0, time.UTC), 9, 0, time.Date(2026, 3, 29, 7, 0, 0, 0, time.UTC))
	// Fall back (25 October 2026): 25 hours.
	f(time.Date(2026, 10, 24, 7, 0, 0, 0, time.UTC), 9, 0, time.Date(2026, 10, 25, 8, 0, 0, 0, time.UTC))
	// 02:30 does not exist on 29 March: Go moves it to 03:30 CEST.
	f(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), 2, 30, time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC))
}

// The digest goes out at 09:00 Berlin time, across the day the clocks go
// forward, lists per job what fired, how often, for how long and what
// still fires, and says nothing when there is nothing to say.
func TestDigestAtNineInBerlinAcrossDST(t *testing.T) {
	start := time.Date(2026, 3, 28, 6, 0, 0, 0, time.UTC) // 07:00 CET, Saturday
	clock := clock.NewFake(start)
	pager, chat := newHook(t, clock), newHook(t, clock)
	cfg := loadAlerting(t, `
alerting:
  digest:
    at: "09:00"
    timezone: Europe/Berlin
  receivers:
    - name: pager
      webhook_configs: [{url: "{{HOOK:pager}}"}]
    - name: chat
      webhook_configs: [{url: "{{HOOK:chat}}"}]
`, map[string]*hook{"pager": pager, "chat": chat})
	e := newEnv(t, clock, cfg)
	far := start.Add(100 * time.Hour)

	// Trend fires twice for 10 minutes; Drift starts and keeps firing.
	e.fire(far, "alertname", "Trend", "severity", "P2", "job", "vllm")
	e.fire(far, "alertname", "Drift", "severity", "P2", "job", "tgi", "instance", "gpu1:8000")
	e.advance(10*time.Minute, 30*time.Second)
	e.resolve("alertname", "Trend", "severity", "P2", "job", "vllm")
	e.advance(10*time.Minute, 30*time.Second)
	e.fire(far, "alertname", "Trend", "severity", "P2", "job", "vllm")
	e.advance(10*time.Minute, 30*time.Second)
	e.resolve("alertname", "Trend", "severity", "P2", "job", "vllm")
	e.advance(10*time.Minute, 30*time.Second) // 06:40 UTC
	require.Empty(t, chat.all(), "P2 never interrupts")
	require.Empty(t, pager.all())

	// 09:00 CET = 08:00 UTC.
	e.advance(80*time.Minute-time.Minute, time.Minute)
	require.Empty(t, chat.all())
	e.advance(time.Minute, time.Minute)
	got := chat.all()
	require.Len(t, got, 1)
	require.Equal(t, time.Date(2026, 3, 28, 8, 0, 0, 0, time.UTC), got[0].at)
	d := got[0].payload
	require.Equal(t, "digest", d.GroupKey)
	require.Len(t, d.Alerts, 2)
	require.Equal(t, "firing", d.Alerts[0].Status)
	require.Equal(t, "Drift", d.Alerts[0].Labels["alertname"])
	require.Equal(t, "resolved", d.Alerts[1].Status)

	// The text, as a chat robot would show it (from the outbox history).
	h, err := e.n.History(10)
	require.NoError(t, err)
	require.Equal(t, "Daily digest 2026-03-28: 2 alerts, 1 still firing", h[0].Title)

	// Next day: the clocks went forward at 02:00; 09:00 CEST = 07:00 UTC,
	// 23 hours later. Only Drift, still firing.
	e.advance(23*time.Hour-time.Minute, 5*time.Minute)
	require.Len(t, chat.all(), 1)
	e.advance(time.Minute, time.Minute)
	got = chat.all()
	require.Len(t, got, 2)
	require.Equal(t, time.Date(2026, 3, 29, 7, 0, 0, 0, time.UTC), got[1].at)
	require.Equal(t, []string{"Drift:firing"}, names(got[1].payload))

	// Drift resolves; the digest of the 30th says so, the 31st's is not sent.
	e.advance(3*time.Hour, 5*time.Minute)
	e.resolve("alertname", "Drift", "severity", "P2", "job", "tgi", "instance", "gpu1:8000")
	e.advance(45*time.Hour, 5*time.Minute) // 2026-03-31 07:00 UTC
	got = chat.all()
	require.Len(t, got, 3)
	require.Equal(t, time.Date(2026, 3, 30, 7, 0, 0, 0, time.UTC), got[2].at)
	require.Equal(t, []string{"Drift:resolved"}, names(got[2].payload))
	e.advance(2*time.Hour, 5*time.Minute)
	require.Len(t, chat.all(), 3, "no digest when nothing happened")
}

func TestDigestText(t *testing.T) {
	start := time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC)
	clock := clock.NewFake(start)
	chat := newHook(t, clock)
	cfg := loadAlerting(t, `
alerting:
  receivers:
    - name: chat
      webhook_configs: [{url: "{{HOOK:chat}}"}]
`, map[string]*hook{"chat": chat})
	e := newEnv(t, clock, cfg)
	e.fire(start.Add(10*time.Hour), "alertname", "Drift", "severity", "P2", "job", "tgi", "instance", "gpu1:8000")
	for range 3 {
		e.fire(start.Add(10*time.Hour), "alertname", "Trend", "severity", "P2", "job", "vllm")
		e.advance(10*time.Minute, time.Minute)
		e.resolve("alertname", "Trend", "severity", "P2", "job", "vllm")
		e.advance(10*time.Minute, time.Minute)
	}
	e.advance(2*time.Hour, time.Minute) // past 09:00 UTC
	require.Len(t, chat.all(), 1)
	es, err := pending(e.db)
	require.NoError(t, err)
	require.Empty(t, es)
	// Render the same digest again from the state of the time it went out.
	m := e.n.digestMessage(map[string]*digestEntry{
		"a": {Labels: map[string]string{"alertname": "Trend", "job": "vllm"}, Count: 3, Total: 30 * time.Minute},
		"b": {Labels: map[string]string{"alertname": "Drift", "job": "tgi", "instance": "gpu1:8000"}, Annotations: map[string]string{"summary": "p95 latency drifts up"}, Count: 1, Firing: true, StartsAt: start},
	}, "chat", "chat/webhook/0", start.Add(2*time.Hour), time.UTC)
	require.Equal(t, "**tgi**\n- p95 latency drifts up on gpu1:8000: fired 1×, 2h0m0s in all, still firing since 2026-03-02 07:00 UTC\n\n"+
		"**vllm**\n- Trend: fired 3×, 30m0s in all, resolved\n\n", m.Text)
}
