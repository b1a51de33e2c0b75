package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// apiAlert is one element of /api/v1/alerts.
type apiAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	// BreachingInstances is the appliance's extension.
	BreachingInstances []string `json:"breachingInstances"`
}

func (p *proc) alerts(name string) []apiAlert {
	p.t.Helper()
	code, r := p.get("/api/v1/alerts", nil)
	require.Equal(p.t, http.StatusOK, code, r.Error)
	var data struct {
		Alerts []apiAlert `json:"alerts"`
	}
	require.NoError(p.t, json.Unmarshal(r.Data, &data))
	var out []apiAlert
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name {
			out = append(out, a)
		}
	}
	return out
}

// firingSeverities lists the severities of name's firing alerts, sorted.
func firingSeverities(as []apiAlert) []string {
	var out []string
	for _, a := range as {
		if a.State == "firing" {
			out = append(out, a.Labels["severity"])
		}
	}
	slices.Sort(out)
	return out
}

// TestRulesAlertsFromDemoFleet: the real binary evaluates a rule file over
// a demo vLLM fleet. One instance slow raises the P1 alert naming it; all
// slow raise the P0 once its `for` has passed, and from the first P1 on
// there is never a moment without a firing alert.
func TestRulesAlertsFromDemoFleet(t *testing.T) {
	fleet := runFleet(t, 3)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fleet.rules.yml"), []byte(`groups:
  - name: fleet
    interval: 1s
    # The demo instances have just started: no warm-up, or the test waits 5m.
    warmup: 0s
    rules:
      - alert: FleetSlowTTFT
        expr: histogram_quantile(0.9, sum by (le, instance, job) (rate(vllm:time_to_first_token_seconds_bucket[10s]))) > 0.6
        for: 3s
        instances: {min: 1}
        escalate_when_all: P0
        labels:
          severity: P1
        annotations:
          summary: "{{ $value }} slow"
      # Barrier: fires once the group has evaluated, for 3s, with the P90
      # TTFT of all three instances present; FleetSlowTTFT, one rule up,
      # was evaluated on the same data every time.
      - alert: FleetEvaluated
        expr: count(histogram_quantile(0.9, sum by (le, instance, job) (rate(vllm:time_to_first_token_seconds_bucket[10s])))) == 3
        for: 3s
        labels:
          severity: P2
`), 0o644))
	var targets []string
	for _, tg := range fleet.Targets() {
		targets = append(targets, fmt.Sprintf("%q", tg))
	}
	cfg := writeConfig(t, dir, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: [%s]
rule_files:
  - fleet.rules.yml
`, strings.Join(targets, ", ")))
	p := start(t, cfg, filepath.Join(dir, "data"))

	ttft := `histogram_quantile(0.9, sum by (le, instance) (rate(vllm:time_to_first_token_seconds_bucket[10s])))`
	eventually(t, 60*time.Second, "P90 TTFT of the 3 instances", func() bool {
		return len(p.instant(ttft, time.Time{})) == 3
	})
	// Normal speed: evaluated, nothing breaches (not even pending).
	eventually(t, 60*time.Second, "the barrier alert firing", func() bool {
		return slices.Equal(firingSeverities(p.alerts("FleetEvaluated")), []string{"P2"})
	})
	require.Empty(t, p.alerts("FleetSlowTTFT"), "no alert at normal speed; P90 TTFT: %v", p.instant(ttft, time.Time{}))

	slow := fleet.Instance(0)
	slow.SetSlow(10)
	eventually(t, 60*time.Second, "P1 for the one slow instance", func() bool {
		return slices.Equal(firingSeverities(p.alerts("FleetSlowTTFT")), []string{"P1"})
	})
	as := p.alerts("FleetSlowTTFT")
	require.Len(t, as, 1, "one alert for the group, not one per instance")
	require.Equal(t, "vllm", as[0].Labels["job"])
	require.NotContains(t, as[0].Labels, "instance")
	require.Equal(t, slow.Addr(), as[0].Annotations["breaching_instances"])
	require.Equal(t, []string{slow.Addr()}, as[0].BreachingInstances)
	require.Equal(t, "1 slow", as[0].Annotations["summary"])

	fleet.SetAllSlow(10)
	deadline := time.Now().Add(60 * time.Second)
	for {
		sev := firingSeverities(p.alerts("FleetSlowTTFT"))
		require.NotEmpty(t, sev, "a moment with neither P1 nor P0 firing")
		if slices.Contains(sev, "P0") {
			break
		}
		require.True(t, time.Now().Before(deadline), "P0 did not fire within 60s of all instances slow; alerts: %v", p.alerts("FleetSlowTTFT"))
		time.Sleep(100 * time.Millisecond)
	}
	for _, a := range p.alerts("FleetSlowTTFT") {
		if a.Labels["severity"] == "P0" {
			got := strings.Split(a.Annotations["breaching_instances"], ", ")
			require.Len(t, got, 3, "breaching_instances %q", a.Annotations["breaching_instances"])
			require.Equal(t, got, a.BreachingInstances)
		}
	}
	// ALERTS is written like any series.
	eventually(t, 30*time.Second, "ALERTS for the P0", func() bool {
		return len(p.instant(`ALERTS{alertname="FleetSlowTTFT", severity="P0", alertstate="firing"}`, time.Time{})) == 1
	})

	// /api/v1/rules: Prometheus' format, the generated PromQL as query,
	// the extension as extra fields.
	code, r := p.get("/api/v1/rules", nil)
	require.Equal(t, http.StatusOK, code)
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			File  string `json:"file"`
			Rules []struct {
				Name        string            `json:"name"`
				Type        string            `json:"type"`
				Query       string            `json:"query"`
				Labels      map[string]string `json:"labels"`
				State       string            `json:"state"`
				SourceQuery string            `json:"sourceQuery"`
				Instances   map[string]any    `json:"instances"`
				Escalated   bool              `json:"escalated"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &rules))
	found := 0
	for _, g := range rules.Groups {
		if g.Name != "fleet" {
			continue
		}
		for _, rl := range g.Rules {
			if rl.Name == "FleetEvaluated" {
				continue // the barrier
			}
			require.Equal(t, "alerting", rl.Type)
			require.Contains(t, rl.Query, "> bool 0.6")
			require.Contains(t, rl.SourceQuery, "> 0.6")
			require.Equal(t, float64(1), rl.Instances["min"], "%+v", rl.Instances)
			require.Equal(t, rl.Labels["severity"] == "P0", rl.Escalated)
			require.Equal(t, "firing", rl.State)
			found++
		}
	}
	require.Equal(t, 2, found, "the P1 rule and the P0 rule escalate_when_all adds")

	// Restart while firing: the alerts come back with the start they had
	// (ALERTS_FOR_STATE in the raw tier), not as new pending alerts.
	var p0 apiAlert
	for _, a := range p.alerts("FleetSlowTTFT") {
		if a.Labels["severity"] == "P0" {
			p0 = a
		}
	}
	exit, _ := p.stop()
	require.Equal(t, 0, exit)
	require.NotContains(t, p.Output(), "Evaluating rule failed")

	p = start(t, cfg, filepath.Join(dir, "data"))
	eventually(t, 60*time.Second, "the P0 firing again after the restart", func() bool {
		return slices.Contains(firingSeverities(p.alerts("FleetSlowTTFT")), "P0")
	})
	for _, a := range p.alerts("FleetSlowTTFT") {
		if a.Labels["severity"] == "P0" {
			require.Equal(t, p0.ActiveAt.Unix(), a.ActiveAt.Unix(), "restored start; before the restart: %v, after: %v", p0.ActiveAt, a.ActiveAt)
		}
	}
	exit, _ = p.stop()
	require.Equal(t, 0, exit)
}

// TestCheckRuleFiles: `appliance check` accepts a rule file with the
// extensions, prints the PromQL its instances rule compiles to, and refuses
// a rule without severity at file:line.
func TestCheckRuleFiles(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "fleet.rules.yml")
	require.NoError(t, os.WriteFile(rules, []byte(`groups:
  - name: fleet
    rules:
      - alert: HalfSlow
        expr: vllm:num_requests_waiting > 10
        instances: {ratio: 0.5}
        warmup: 0s
        labels:
          severity: P2
`), 0o644))
	cfg := writeConfig(t, dir, "rule_files: [fleet.rules.yml]\n")
	out, err := exec.Command(binary, "check", "--config", cfg).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "SUCCESS")
	require.Contains(t, string(out), rules+":4: alert HalfSlow (severity P2) compiles to:\n  avg without (instance) (vllm:num_requests_waiting > bool 10) >= 0.5\n")

	require.NoError(t, os.WriteFile(rules, []byte(`groups:
  - name: fleet
    rules:
      - alert: NoSeverity
        expr: up == 0
`), 0o644))
	// A rule without severity is accepted with a warning and routes as
	// alerting.default_severity (issue 15); an unknown severity is refused.
	out, err = exec.Command(binary, "check", "--config", cfg).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), rules+`:4: warning: group "fleet", rule 1, "NoSeverity": the label severity is missing; the rule routes as alerting.default_severity P1`)

	require.NoError(t, os.WriteFile(rules, []byte(`groups:
  - name: fleet
    rules:
      - alert: Odd
        expr: up == 0
        labels:
          severity: bogus
`), 0o644))
	cmd := exec.Command(binary, "check", "--config", cfg)
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	require.Equal(t, 1, cmd.ProcessState.ExitCode())
	require.Contains(t, string(out), rules+`:6: group "fleet", rule 1, "Odd": severity "bogus" is not in alerting.severity_map`)
}
