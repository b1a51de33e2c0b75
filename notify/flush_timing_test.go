package notify

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/clock"
)

// scaleConfig groups by alertname (50 groups of 100 alerts at 5,000
// alerts) and keeps the default inhibit rule (a P0 mutes the P1 and P2 of
// its job).
const scaleConfig = `
alerting:
  route:
    receiver: hook
    group_by: [alertname]
    group_wait: 1s
    group_interval: 10s
    repeat_interval: 1h
  receivers:
    - name: hook
      webhook_configs:
        - url: {{HOOK:hook}}
`

// scaleEnv is a notifier holding alerts firing alerts (one P0 in fifty)
// and silences silences: one in ten expired, one in ten matching an
// alert's instance, the rest on instances no alert has. All groups have
// flushed once.
func scaleEnv(b *testing.B, alerts, silences int) *env {
	clock := clock.NewFake(t0)
	h := newHook(b, clock)
	e := newEnv(b, clock, loadAlerting(b, scaleConfig, map[string]*hook{"hook": h}))
	far := t0.Add(100 * time.Hour)
	as := make([]model.Alert, 0, alerts)
	for i := range alerts {
		sev := "P1"
		if i%50 == 0 {
			sev = "P0"
		}
		as = append(as, model.Alert{Labels: model.LabelSet{
			"alertname": model.LabelValue(fmt.Sprintf("Rule%02d", i%50)),
			"instance":  model.LabelValue(fmt.Sprintf("host-%05d:9100", i)),
			"job":       model.LabelValue(fmt.Sprintf("job-%03d", i%200)),
			"severity":  model.LabelValue(sev),
		}, StartsAt: t0, EndsAt: far})
	}
	e.n.Post(as)
	for j := range silences {
		inst := fmt.Sprintf("other-%05d:9100", j)
		if j%10 == 1 {
			inst = fmt.Sprintf("host-%05d:9100", j%alerts)
		}
		s := Silence{Matchers: []Matcher{{Name: "instance", Value: inst}}, StartsAt: t0, EndsAt: far, CreatedBy: "bench", Comment: "scale"}
		id, err := e.n.SetSilence(s)
		require.NoError(b, err)
		if j%10 == 0 {
			require.NoError(b, e.n.ExpireSilence(id))
		}
	}
	clock.Set(t0.Add(time.Second))
	require.NoError(b, e.n.Tick(context.Background()))
	return e
}

// BenchmarkFlushAtScale is one tick in which every group of 5,000 alerts
// flushes, with 10,000 silences: "steady" with no silence changed since
// the last flush, "silence-added" with one new silence before each flush
// (so nothing cached about silences holds).
func BenchmarkFlushAtScale(b *testing.B) {
	for _, mode := range []string{"steady", "silence-added"} {
		b.Run(mode, func(b *testing.B) {
			e := scaleEnv(b, 5000, 10000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if mode == "silence-added" {
					b.StopTimer()
					_, err := e.n.SetSilence(Silence{Matchers: []Matcher{{Name: "instance", Value: fmt.Sprintf("new-%d", i)}}, EndsAt: t0.Add(time.Hour), CreatedBy: "bench", Comment: "new"})
					require.NoError(b, err)
					b.StartTimer()
				}
				e.clock.Set(e.clock.Now().Add(10 * time.Second))
				require.NoError(b, e.n.Tick(context.Background()))
			}
		})
	}
}
