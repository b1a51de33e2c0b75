package notify

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/clock"
)

// TestSilenceCacheFollowsChanges: what is cached for an alert follows
// every change of the silences and the passing of time: a new silence, a
// pending one that starts, an expired one, a pending one whose matchers
// change, one without an equality matcher (not indexed by label).
func TestSilenceCacheFollowsChanges(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h}))
	lset := model.LabelSet{"alertname": "Slow", "instance": "a:9100"}
	fp := lset.Fingerprint()
	e.fire(t0.Add(10*time.Hour), "alertname", "Slow", "instance", "a:9100")
	mutes := func() []string { return e.n.sil.mutes(fp, lset, clock.Now()) }
	require.Empty(t, mutes())

	on, err := e.n.SetSilence(Silence{Matchers: []Matcher{{Name: "instance", Value: "a:9100"}}, EndsAt: t0.Add(time.Hour), CreatedBy: "t", Comment: "c"})
	require.NoError(t, err)
	require.Equal(t, []string{on}, mutes(), "a new silence is seen at once")

	pend, err := e.n.SetSilence(Silence{Matchers: []Matcher{{Name: "alertname", Value: "Slow"}}, StartsAt: t0.Add(time.Minute), EndsAt: t0.Add(2 * time.Hour), CreatedBy: "t", Comment: "c"})
	require.NoError(t, err)
	require.Equal(t, []string{on}, mutes(), "pending: not yet")
	clock.Set(t0.Add(time.Minute))
	require.ElementsMatch(t, []string{on, pend}, mutes(), "the pending silence started, with no change of version")

	require.NoError(t, e.n.ExpireSilence(on))
	require.Equal(t, []string{pend}, mutes(), "expired")
	clock.Set(t0.Add(time.Hour + time.Minute))
	require.Equal(t, []string{pend}, mutes())

	// A pending silence whose matchers change no longer matches.
	later, err := e.n.SetSilence(Silence{Matchers: []Matcher{{Name: "instance", Value: "a:9100"}}, StartsAt: t0.Add(3 * time.Hour), EndsAt: t0.Add(4 * time.Hour), CreatedBy: "t", Comment: "c"})
	require.NoError(t, err)
	_, err = e.n.SetSilence(Silence{ID: later, Matchers: []Matcher{{Name: "instance", Value: "b:9100"}}, StartsAt: t0.Add(3 * time.Hour), EndsAt: t0.Add(4 * time.Hour), CreatedBy: "t", Comment: "c"})
	require.NoError(t, err)
	clock.Set(t0.Add(3*time.Hour + time.Minute))
	require.Empty(t, mutes(), "the first silences ended; the changed one is on b")

	// Regex and not-equal matchers only: found by the scan.
	yes, no := true, false
	re, err := e.n.SetSilence(Silence{Matchers: []Matcher{{Name: "instance", Value: "a:.*", IsRegex: true}, {Name: "alertname", Value: "Other", IsEqual: &no}}, EndsAt: t0.Add(5 * time.Hour), CreatedBy: "t", Comment: "c"})
	require.NoError(t, err)
	require.Equal(t, []string{re}, mutes())
	_, err = e.n.SetSilence(Silence{Matchers: []Matcher{{Name: "instance", Value: "b:.*", IsRegex: true, IsEqual: &yes}}, EndsAt: t0.Add(5 * time.Hour), CreatedBy: "t", Comment: "c"})
	require.NoError(t, err)
	require.Equal(t, []string{re}, mutes())

	// Expired silences leave the index at the next tick, and stay listed.
	clock.Set(t0.Add(6 * time.Hour))
	e.advance(time.Second, time.Second)
	require.Zero(t, e.n.sil.idx.len())
	require.Len(t, e.n.sil.list(), 5)
	clock.Set(t0.Add(6*time.Hour + silenceRetention + time.Minute))
	e.advance(time.Second, time.Second)
	require.Empty(t, e.n.sil.list(), "deleted after the retention")
}

// TestSilencesReloadedIndexed: silences loaded from the database at start
// mute as the ones made since.
func TestSilencesReloadedIndexed(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, oneHookConfig, map[string]*hook{"hook": h}))
	id, err := e.n.SetSilence(Silence{Matchers: []Matcher{{Name: "instance", Value: "a:9100"}}, EndsAt: t0.Add(time.Hour), CreatedBy: "t", Comment: "c"})
	require.NoError(t, err)
	old, err := e.n.SetSilence(Silence{Matchers: []Matcher{{Name: "instance", Value: "a:9100"}}, EndsAt: t0.Add(time.Hour), CreatedBy: "t", Comment: "c"})
	require.NoError(t, err)
	require.NoError(t, e.n.ExpireSilence(old))
	require.NoError(t, e.db.Close())
	e.open()
	lset := model.LabelSet{"alertname": "Slow", "instance": "a:9100"}
	require.Equal(t, []string{id}, e.n.sil.mutes(lset.Fingerprint(), lset, clock.Now()))
	require.Equal(t, 1, e.n.sil.idx.len(), "the expired one is not indexed")
	require.Len(t, e.n.sil.list(), 2)
}

const inhibitConfig = `
alerting:
  route:
    receiver: hook
    group_by: [alertname]
    group_wait: 30s
  receivers:
    - name: hook
      webhook_configs:
        - url: {{HOOK:hook}}
  inhibit_rules:
    - source_matchers: [severity="P0"]
      target_matchers: [severity="P1"]
      equal: [job, cluster]
    - source_matchers: [tier="both"]
      target_matchers: [tier="both"]
      equal: [job]
`

// TestInhibitionIndex: the index of source alerts by equal labels decides
// as comparing every pair did: same values only (a label missing on both
// is equal), not by resolved sources, not by itself, not between two
// alerts that match both sides; and it follows a reload and the
// forgetting of old alerts.
func TestInhibitionIndex(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, inhibitConfig, map[string]*hook{"hook": h}))
	far := t0.Add(10 * time.Hour)
	ls := func(kv ...string) model.LabelSet {
		out := model.LabelSet{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
		}
		return out
	}
	inhibitedBy := func(l model.LabelSet) []string {
		e.n.mu.RLock()
		defer e.n.mu.RUnlock()
		return e.n.inhibit.inhibitedBy(l, l.Fingerprint(), e.n.alerts, clock.Now())
	}
	src := ls("alertname", "Down", "priority", "P0", "severity", "P0", "job", "vllm")
	e.fire(far, "alertname", "Down", "severity", "P0", "job", "vllm")
	e.fire(t0.Add(time.Minute), "alertname", "Gone", "severity", "P0", "job", "tgi")
	require.Equal(t, []string{src.Fingerprint().String()}, inhibitedBy(ls("alertname", "Slow", "severity", "P1", "job", "vllm")), "same job, no cluster on either")
	require.Empty(t, inhibitedBy(ls("alertname", "Slow", "severity", "P1", "job", "vllm", "cluster", "x")), "cluster differs")
	require.Empty(t, inhibitedBy(ls("alertname", "Slow", "severity", "P2", "job", "vllm")), "not a target")
	require.NotEmpty(t, inhibitedBy(ls("alertname", "Slow", "severity", "P1", "job", "tgi")), "its source still fires")
	clock.Set(t0.Add(time.Minute))
	require.Empty(t, inhibitedBy(ls("alertname", "Slow", "severity", "P1", "job", "tgi")), "its source resolved")

	// Two-sided: alerts matching both sides do not inhibit each other; a
	// source only, does.
	e.fire(far, "alertname", "A", "tier", "both", "job", "j")
	e.fire(far, "alertname", "B", "tier", "both", "job", "j")
	require.Empty(t, inhibitedBy(ls("alertname", "A", "tier", "both", "job", "j")))

	// The resolved source is forgotten with its alert; a reload indexes
	// the alerts at hand under the new rules.
	clock.Set(t0.Add(time.Minute + 2*resolveTimeout))
	e.advance(time.Second, time.Second)
	e.n.mu.RLock()
	require.NotContains(t, e.n.alerts, ls("alertname", "Gone", "priority", "P0", "severity", "P0", "job", "tgi").Fingerprint())
	require.NotContains(t, e.n.inhibit.rules[0].sources, "tgi\xff\xff")
	e.n.mu.RUnlock()
	require.NoError(t, e.n.ApplyConfig(e.cfg))
	require.Equal(t, []string{src.Fingerprint().String()}, inhibitedBy(ls("alertname", "Slow", "severity", "P1", "job", "vllm")))
}

// TestConcurrentPostSilenceReadTick: posts, silence changes, reads as the
// API makes them (under the read lock) and ticks run at once; run with
// -race. The alerts a silence covers end up muted.
func TestConcurrentPostSilenceReadTick(t *testing.T) {
	clock := clock.NewFake(t0)
	h := newHook(t, clock)
	e := newEnv(t, clock, loadAlerting(t, inhibitConfig, map[string]*hook{"hook": h}))
	far := t0.Add(10 * time.Hour)
	const n = 200
	done := make(chan struct{})
	var wg sync.WaitGroup
	run := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				f(i)
			}
		}()
	}
	run(func(i int) {
		e.fire(far, "alertname", "Load", "instance", fmt.Sprintf("h%d", i), "severity", "P1", "job", "j")
	})
	run(func(i int) {
		// Not require: this is not the test's goroutine.
		id, err := e.n.SetSilence(Silence{Matchers: []Matcher{{Name: "instance", Value: fmt.Sprintf("h%d", i)}}, EndsAt: far, CreatedBy: "t", Comment: "c"})
		assert.NoError(t, err)
		if err == nil && i%2 == 1 {
			assert.NoError(t, e.n.ExpireSilence(id))
		}
	})
	run(func(int) {
		e.n.mu.RLock()
		for fp, a := range e.n.alerts {
			e.n.sil.mutes(fp, a.Labels, clock.Now())
			e.n.inhibit.inhibitedBy(a.Labels, fp, e.n.alerts, clock.Now())
		}
		e.n.mu.RUnlock()
	})
	go func() {
		defer close(done)
		for range n {
			_ = e.n.Tick(context.Background())
		}
	}()
	wg.Wait()
	<-done
	e.n.mu.RLock()
	defer e.n.mu.RUnlock()
	muted := 0
	for fp, a := range e.n.alerts {
		if len(e.n.sil.mutes(fp, a.Labels, clock.Now())) > 0 {
			muted++
		}
	}
	require.Len(t, e.n.alerts, n)
	require.Equal(t, n/2, muted, "the even silences stay, the odd ones were expired")
}
