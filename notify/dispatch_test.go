package notify

import (
	"testing"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/clock"
)

const oneHookConfig = `
alerting:
  route:
    receiver: hook
    group_by: [alertname]
    group_wait: 30s
    group_interval: 5m
    repeat_interval: 1h
  receivers:
    - name: hook
      webhook_configs:
        - url: {{HOOK:hook}}
`

func TestGroupWaitIntervalRepeat(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h}))
	far := t0.Add(10 * time.Hour)

	e.fire(far, "alertname", "Slow", "instance", "a")
	e.advance(29*time.Second, time.Second)
	require.Empty(t, h.all(), "nothing before group_wait")
	e.advance(time.Second, time.Second)
	got := h.all()
	require.Len(t, got, 1, "one notification at group_wait")
	require.Equal(t, t0.Add(30*time.Second), got[0].at)
	require.Equal(t, []string{"Slow:firing"}, names(got[0].payload))
	require.Equal(t, "4", got[0].payload.Version)
	require.Equal(t, map[string]string{"alertname": "Slow"}, got[0].payload.GroupLabels)
	// Alertmanager's payload: the root route's key is {}, and a firing
	// alert goes out without the end its sender set.
	require.Equal(t, `{}:{alertname="Slow"}`, got[0].payload.GroupKey)
	require.True(t, got[0].payload.Alerts[0].EndsAt.IsZero(), "firing endsAt: %s", got[0].payload.Alerts[0].EndsAt)

	// A second alert of the group waits for group_interval after the
	// first flush, not group_wait.
	e.advance(30*time.Second, time.Second) // t0+1m
	e.fire(far, "alertname", "Slow", "instance", "b")
	e.advance(4*time.Minute+29*time.Second, time.Second) // t0+5m29s
	require.Len(t, h.all(), 1)
	e.advance(time.Second, time.Second) // t0+5m30s
	got = h.all()
	require.Len(t, got, 2)
	require.Equal(t, t0.Add(5*time.Minute+30*time.Second), got[1].at)
	require.Len(t, got[1].payload.Alerts, 2)

	// Nothing changes: the next notification is a repeat, at the first
	// flush at or after repeat_interval since the last one.
	e.advance(time.Hour-time.Second, 10*time.Second) // t0+1h5m29s
	require.Len(t, h.all(), 2)
	e.advance(time.Second, time.Second) // t0+1h5m30s = last + 1h
	got = h.all()
	require.Len(t, got, 3)
	require.Equal(t, t0.Add(time.Hour+5*time.Minute+30*time.Second), got[2].at)

	// One resolves: a resolved notification at the next flush; then the
	// last resolves and the group is gone after it said so.
	e.resolve("alertname", "Slow", "instance", "a")
	e.advance(5*time.Minute, 10*time.Second)
	got = h.all()
	require.Len(t, got, 4)
	require.ElementsMatch(t, []string{"Slow:firing", "Slow:resolved"}, names(got[3].payload))
	e.resolve("alertname", "Slow", "instance", "b")
	e.advance(5*time.Minute, 10*time.Second)
	got = h.all()
	require.Len(t, got, 5)
	require.Equal(t, "resolved", got[4].payload.Status)
	e.advance(2*time.Hour, time.Minute)
	require.Len(t, h.all(), 5, "nothing after all resolved")
	require.Empty(t, e.n.groups)
}

func TestAlertWithoutEndResolvesAfterTimeout(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h}))
	e.fire(time.Time{}, "alertname", "Gone")
	e.advance(time.Minute, time.Second)
	require.Len(t, h.all(), 1)
	// Not sent again: resolve_timeout (5m) ends it; the next flush says so.
	e.advance(10*time.Minute, 10*time.Second)
	got := h.all()
	require.Len(t, got, 2)
	require.Equal(t, "resolved", got[1].payload.Status)
}

func TestDefaultSeverityRoutingAndInhibition(t *testing.T) {
	clock := clock.NewFake(t0)
	pager, chat := newHook(t, clock), newHook(t, clock)
	cfg := loadAlerting(t, `
alerting:
  receivers:
    - name: pager
      webhook_configs: [{url: "{{HOOK:pager}}"}]
    - name: chat
      webhook_configs: [{url: "{{HOOK:chat}}"}]
`, map[string]*hook{"pager": pager, "chat": chat})
	e := newEnv(t, clock, cfg)
	far := t0.Add(10 * time.Hour)

	e.fire(far, "alertname", "Down", "severity", "P0", "job", "vllm")
	e.fire(far, "alertname", "SLOBurn", "severity", "P1", "job", "vllm") // inhibited: same job
	e.fire(far, "alertname", "SLOBurn", "severity", "P1", "job", "tgi")  // another job: sent
	e.fire(far, "alertname", "NoJob", "severity", "P1")                  // no job: left alone
	e.fire(far, "alertname", "Trend", "severity", "P2", "job", "vllm")   // digest only

	e.advance(9*time.Second, time.Second)
	require.Empty(t, pager.all())
	e.advance(time.Second, time.Second)
	require.Len(t, pager.all(), 1, "P0 pages after its group_wait of 10s")
	require.Equal(t, []string{"Down:firing"}, names(pager.all()[0].payload))
	require.Empty(t, chat.all())

	e.advance(20*time.Second, time.Second)
	var chatAlerts []string
	for _, r := range chat.all() {
		for _, a := range r.payload.Alerts {
			chatAlerts = append(chatAlerts, a.Labels["alertname"]+"/"+a.Labels["job"])
		}
	}
	require.ElementsMatch(t, []string{"SLOBurn/tgi", "NoJob/"}, chatAlerts, "P1 at 30s, except the one a P0 of its job inhibits")

	// P0 repeats every 30m while it fires.
	e.advance(30*time.Minute, 10*time.Second)
	require.Len(t, pager.all(), 2)

	// The P0 resolves: the inhibited P1 is sent at its group's next flush.
	e.resolve("alertname", "Down", "severity", "P0", "job", "vllm")
	e.advance(5*time.Minute, 10*time.Second)
	chatAlerts = nil
	for _, r := range chat.all() {
		for _, a := range r.payload.Alerts {
			chatAlerts = append(chatAlerts, a.Labels["alertname"]+"/"+a.Labels["job"])
		}
	}
	require.Contains(t, chatAlerts, "SLOBurn/vllm")
	for _, r := range append(pager.all(), chat.all()...) {
		for _, a := range r.payload.Alerts {
			require.NotEqual(t, "Trend", a.Labels["alertname"], "P2 never goes to pager or chat")
		}
	}
}

func TestSilences(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h}))

	eq := true
	id, err := e.n.SetSilence(Silence{
		Matchers: []Matcher{{Name: "alertname", Value: "Noisy", IsEqual: &eq}},
		StartsAt: t0, EndsAt: t0.Add(time.Hour), CreatedBy: "ops", Comment: "deploy",
	})
	require.NoError(t, err)
	require.NotEmpty(t, id)

	far := t0.Add(10 * time.Hour)
	e.fire(far, "alertname", "Noisy")
	e.fire(far, "alertname", "Real")
	e.advance(10*time.Minute, 10*time.Second)
	for _, r := range h.all() {
		require.NotContains(t, names(r.payload), "Noisy:firing")
	}
	require.Len(t, h.all(), 1)

	// The alert shows as suppressed by the silence.
	noisy, err := amlabels.NewMatcher(amlabels.MatchEqual, "alertname", "Noisy")
	require.NoError(t, err)
	alerts := e.n.Alerts(AlertFilter{Matchers: amlabels.Matchers{noisy}, Active: true, Silenced: true, Inhibited: true})
	require.Len(t, alerts, 1)
	require.Equal(t, "suppressed", alerts[0].State())
	require.Equal(t, []string{id}, alerts[0].SilencedBy)
	require.Empty(t, e.n.Alerts(AlertFilter{Matchers: amlabels.Matchers{noisy}, Active: true, Inhibited: true}))

	// Expire it: the alert goes out at the next group_interval flush.
	require.NoError(t, e.n.ExpireSilence(id))
	require.NoError(t, e.n.ExpireSilence(id), "expiring an expired silence is idempotent")
	require.ErrorIs(t, e.n.ExpireSilence("nope"), ErrSilenceNotFound)
	e.advance(5*time.Minute, 10*time.Second)
	got := h.all()
	require.Len(t, got, 2)
	require.Contains(t, names(got[1].payload), "Noisy:firing")

	// Silences survive a restart (they live in bbolt).
	require.NoError(t, e.db.Close())
	e.open()
	sils := e.n.Silences(nil)
	require.Len(t, sils, 1)
	require.Equal(t, SilenceExpired, sils[0].State)
	s, ok := e.n.Silence(id)
	require.True(t, ok)
	require.Equal(t, "deploy", s.Comment)
}

func TestTimeIntervals(t *testing.T) {
	clock := clock.NewFake(time.Date(2026, 3, 7, 10, 0, 0, 0, time.UTC)) // Saturday 11:00 in Berlin
	h := newHook(t, clock)
	cfg := loadAlerting(t, `
alerting:
  route:
    receiver: hook
    group_wait: 10s
    group_interval: 1m
    repeat_interval: 24h
    routes:
      - matchers: ['team="web"']
        mute_time_intervals: [weekends]
      - matchers: ['team="ops"']
        active_time_intervals: [business-hours]
  time_intervals:
    - name: weekends
      time_intervals:
        - weekdays: [saturday, sunday]
          location: Europe/Berlin
    - name: business-hours
      time_intervals:
        - weekdays: ['monday:friday']
          times: [{start_time: '09:00', end_time: '17:00'}]
          location: Europe/Berlin
  receivers:
    - name: hook
      webhook_configs: [{url: "{{HOOK:hook}}"}]
`, map[string]*hook{"hook": h})
	e := newEnv(t, clock, cfg)
	far := clock.Now().Add(100 * time.Hour)
	e.fire(far, "alertname", "A", "team", "web")
	e.fire(far, "alertname", "B", "team", "ops")
	e.advance(2*time.Hour, time.Minute)
	require.Empty(t, h.all(), "muted on the weekend, and outside business hours")

	// Monday 00:30 Berlin (Sunday 23:30 UTC): web is no longer muted, ops
	// is not yet active.
	clock.Set(time.Date(2026, 3, 8, 23, 30, 0, 0, time.UTC))
	e.advance(2*time.Minute, 10*time.Second)
	got := h.all()
	require.Len(t, got, 1)
	require.Equal(t, []string{"A:firing"}, names(got[0].payload))

	// Monday 09:00 Berlin = 08:00 UTC: ops becomes active.
	clock.Set(time.Date(2026, 3, 9, 7, 58, 0, 0, time.UTC))
	e.advance(time.Minute, 10*time.Second)
	require.Len(t, h.all(), 1)
	e.advance(2*time.Minute, 10*time.Second)
	got = h.all()
	require.Len(t, got, 2)
	require.Equal(t, []string{"B:firing"}, names(got[1].payload))
	require.False(t, got[1].at.Before(time.Date(2026, 3, 9, 8, 0, 0, 0, time.UTC)))
}

func TestCustomTemplates(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, `
alerting:
  route: {receiver: hook, group_wait: 10s}
  templates:
    title: '{{ .Name }} is {{ .Status }} on {{ .CommonLabels.job }}'
    text: '{{ range .Alerts }}{{ .Labels.instance }} {{ end }}'
  receivers:
    - name: hook
      webhook_configs: [{url: "{{HOOK:hook}}"}]
`, map[string]*hook{"hook": h}))
	e.fire(t0.Add(time.Hour), "alertname", "Slow", "job", "vllm", "instance", "a")
	e.advance(time.Minute, time.Second)
	require.Len(t, h.all(), 1)
	hist, err := e.n.History(1)
	require.NoError(t, err)
	require.Equal(t, "Slow is firing on vllm", hist[0].Title)
}

// TestSeverityMapRouting: the default routes read the priority that
// alerting.severity_map gives the severity label, so the severities of
// public rule sets route like P0/P1/P2, and an alert without a severity
// routes as default_severity.
func TestSeverityMapRouting(t *testing.T) {
	clock := clock.NewFake(t0)
	pager, chat := newHook(t, clock), newHook(t, clock)
	cfg := loadAlerting(t, `
alerting:
  severity_map: {sev1: P0}
  severity_labels: [severity, level]
  receivers:
    - name: pager
      webhook_configs: [{url: "{{HOOK:pager}}"}]
    - name: chat
      webhook_configs: [{url: "{{HOOK:chat}}"}]
`, map[string]*hook{"pager": pager, "chat": chat})
	e := newEnv(t, clock, cfg)
	far := t0.Add(10 * time.Hour)
	e.fire(far, "alertname", "HostDown", "severity", "critical")
	e.fire(far, "alertname", "Custom", "severity", "sev1")
	e.fire(far, "alertname", "Disk", "severity", "warning")
	e.fire(far, "alertname", "Bare")
	e.fire(far, "alertname", "Note", "severity", "info")
	e.fire(far, "alertname", "Leveled", "level", "critical")
	// As an external Prometheus or vmalert posts to /api/v2/alerts.
	require.NoError(t, e.n.PostAlerts([]model.Alert{{Labels: model.LabelSet{"alertname": "VMAlertDown", "severity": "critical"}}}))
	e.advance(30*time.Second, time.Second)
	got := func(h *hook) []string {
		var out []string
		for _, r := range h.all() {
			for _, a := range r.payload.Alerts {
				out = append(out, a.Labels["alertname"]+"/"+a.Labels["severity"]+"/"+a.Labels["priority"])
			}
		}
		return out
	}
	require.ElementsMatch(t, []string{"HostDown/critical/P0", "Custom/sev1/P0", "VMAlertDown/critical/P0", "Leveled//P0"}, got(pager))
	require.ElementsMatch(t, []string{"Disk/warning/P1", "Bare//P1"}, got(chat), "info goes to the digest")
}
