package rules

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/util/teststorage"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/storage/storagetest"
)

func TestMain(m *testing.M) {
	// VictoriaMetrics' packages (the fixtures run on the real storage)
	// start process-wide goroutines in their init functions.
	goleak.VerifyTestMain(m, storagetest.LeakOptions()...)
}

func newTestManager(t *testing.T) *Manager {
	t.Helper()
	st := teststorage.New(t)
	t.Cleanup(func() { _ = st.Close() })
	return New(Options{Queryable: st, Appendable: st, Engine: query.New(query.Options{}, nil, nil)})
}

// run runs m until the test ends.
func run(t *testing.T, m *Manager) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

func groupNames(m *Manager) map[string]bool {
	out := map[string]bool{}
	for _, g := range m.RuleGroups() {
		out[g.File()+" "+g.Name()] = true
	}
	return out
}

// TestUpdateKeepsRulesOnError: a reload with a bad rule file says where
// the error is and leaves the rules in force running.
func TestUpdateKeepsRulesOnError(t *testing.T) {
	m := newTestManager(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "a.rules.yml")
	require.NoError(t, os.WriteFile(file, []byte(`groups:
  - name: a
    rules:
      - alert: Down
        expr: up == 0
        labels: {severity: P1}
`), 0o644))
	cfg := Config{Interval: 15 * time.Second, Files: []string{filepath.Join(dir, "*.rules.yml")}, Packs: []string{"gpu", "probes"}}
	require.NoError(t, m.Update(cfg))
	require.Empty(t, groupNames(m), "nothing runs before Run")
	run(t, m)
	require.Eventually(t, func() bool { return len(groupNames(m)) == 6 }, 10*time.Second, 10*time.Millisecond)
	want := map[string]bool{file + " a": true, "pack:gpu gpu": true, "pack:probes probes": true, "pack:appliance appliance-storage": true, "pack:appliance appliance-downsample": true, warmupID + " appliance-warmup": true}
	require.Equal(t, want, groupNames(m))

	require.NoError(t, os.WriteFile(file, []byte(`groups:
  - name: a
    rules:
      - alert: Down
        expr: up == 0
        labels: {severity: sev1}
`), 0o644))
	err := m.Update(cfg)
	require.ErrorContains(t, err, file+`:6: group "a", rule 1, "Down": severity "sev1" is not in alerting.severity_map`)
	require.Equal(t, want, groupNames(m))
	require.Len(t, m.AlertingRules(), 13, "Down, the three gpu rules, the four probes rules and the five of the always-on appliance pack")
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	m := newTestManager(t)
	require.NoError(t, m.Update(Config{Packs: []string{"targets"}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestGeneratedRules: rule files other parts generate (the SLOs') are
// loaded beside the files, shown with the file generated:<name>, and
// checked like them.
func TestGeneratedRules(t *testing.T) {
	m := newTestManager(t)
	gen := []byte(`groups:
  - name: slo:chat
    rules:
      - record: slo:objective:ratio
        expr: vector(0.99)
      - alert: SLOBudgetBurnFast
        expr: vector(1) > 2
        labels: {severity: P0}
`)
	require.NoError(t, m.Update(Config{Interval: time.Minute, Generated: map[string][]byte{"slo": gen}}))
	run(t, m)
	require.Eventually(t, func() bool { return groupNames(m)["generated:slo slo:chat"] }, 10*time.Second, 10*time.Millisecond)

	err := m.Update(Config{Interval: time.Minute, Generated: map[string][]byte{"slo": []byte("groups:\n  - name: slo:chat\n    rules:\n      - alert: X\n        expr: up ==\n")}})
	require.ErrorContains(t, err, "generated:slo:")
	require.True(t, groupNames(m)["generated:slo slo:chat"], "the rules in force keep running")
}
