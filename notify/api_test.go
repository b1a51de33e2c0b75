package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/clock"
)

// A reload rebuilds the groups; the notification log keeps them from
// notifying again what was already sent.
func TestApplyConfigDoesNotRenotify(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h}))
	e.fire(t0.Add(10*time.Hour), "alertname", "Slow")
	e.advance(time.Minute, time.Second)
	require.Len(t, h.all(), 1)
	require.NoError(t, e.n.ApplyConfig(loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h})))
	e.advance(30*time.Minute, 10*time.Second)
	require.Len(t, h.all(), 1)
	// A config that cannot be applied leaves the old one.
	bad := e.cfg
	bad.Digest.Timezone = "Nowhere/Never"
	require.Error(t, e.n.ApplyConfig(bad))
	e.fire(t0.Add(10*time.Hour), "alertname", "Other")
	e.advance(time.Minute, time.Second)
	require.Len(t, h.all(), 2)
}
