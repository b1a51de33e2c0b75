package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/clock"
)

// The preview shows what the next digest holds and when it goes out,
// changes nothing, and reads as the digest that is then sent.
func TestDigestPreview(t *testing.T) {
	start := time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC)
	clock := clock.NewFake(start)
	chat := newHook(t, clock)
	cfg := loadAlerting(t, `
alerting:
  digest: {at: "09:00", timezone: UTC}
  receivers:
    - name: chat
      webhook_configs: [{url: "{{HOOK:chat}}"}]
`, map[string]*hook{"chat": chat})
	e := newEnv(t, clock, cfg)
	nine := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

	p, err := e.n.DigestPreview()
	require.NoError(t, err)
	require.Equal(t, nine, p.At.UTC())
	require.Equal(t, []string{"chat"}, p.Receivers)
	require.Nil(t, p.Message, "nothing recorded: no digest would be sent")

	e.fire(start.Add(10*time.Hour), "alertname", "Drift", "severity", "P2", "job", "tgi", "instance", "gpu1:8000")
	e.advance(10*time.Minute, time.Minute)
	p, err = e.n.DigestPreview()
	require.NoError(t, err)
	require.NotNil(t, p.Message)
	require.Equal(t, clock.Now(), p.AsOf)
	require.Equal(t, "Daily digest 2026-03-02: 1 alerts, 1 still firing", p.Message.Title)
	require.Contains(t, p.Message.Text, "**tgi**")
	require.Contains(t, p.Message.Text, "Drift on gpu1:8000: fired 1×, 10m0s in all, still firing since 2026-03-02 07:00 UTC")
	require.Len(t, p.Message.Alerts, 1)
	require.Empty(t, chat.all(), "a preview sends nothing")

	// At 09:00 the digest goes out with what the preview listed.
	e.advance(2*time.Hour, time.Minute)
	got := chat.all()
	require.Len(t, got, 1)
	require.Equal(t, []string{"Drift:firing"}, names(got[0].payload))
	p, err = e.n.DigestPreview()
	require.NoError(t, err)
	require.Equal(t, nine.Add(24*time.Hour), p.At.UTC(), "the next one is tomorrow's")
	require.NotNil(t, p.Message, "still firing: it stays in tomorrow's digest")
}
