package rulefile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
)

func TestParseExtensionErrors(t *testing.T) {
	f := func(rule string, want ...string) {
		t.Helper()
		text := "groups:\n  - name: g\n    rules:\n" + rule
		_, errs := Parse([]byte(text))
		var got []string
		for _, e := range errs {
			got = append(got, e.Error())
		}
		require.Equal(t, want, got, "rule file:\n%s", text)
	}
	// Lines count from the top of the file: the rule starts at line 4.
	f(`      - alert: A
        expr: up == 0
        labels:
          severity: sev1
`, `6: group "g", rule 1, "A": severity "sev1" is not in alerting.severity_map; want one of P0, P1, P2, critical, error, info, none, warning`)
	f(`      - alert: A
        expr: up == 0
        labels: {severity: P1, priority: urgent}
`, `6: group "g", rule 1, "A": priority "urgent": want P0, P1 or P2`)
	f(`      - alert: A
        expr: up == 0
        instances: {min: 0, ratio: 2}
        labels: {severity: P1}
`, `6: instances: min must be a whole number of at least 1, not "0"`,
		`6: instances: ratio must be a number above 0 and at most 1, not "2"`,
		`6: instances needs exactly one of min, ratio and all`)
	f(`      - alert: A
        expr: up == 0
        instances: {all: true, by: [pod], max: 3}
        labels: {severity: P1}
`, `6: unknown field "max" in instances; want min, ratio, all or by`)
	// Found by CI's fuzzing: a name PromQL's grouping would need quoted.
	f(`      - alert: A
        expr: up == 0
        instances: {ratio: 0.5, by: [instae c, npod, __name__]}
        labels: {severity: P1}
`, `6: instances: by: invalid label name "instae c"; want letters, digits and underscores, not starting with a digit`,
		`6: instances: by: invalid label name "__name__"; want letters, digits and underscores, not starting with a digit`)
	f(`      - alert: A
        expr: absent(up)
        instances: {all: true}
        labels: {severity: P1}
`, "5: group \"g\", rule 1, \"A\": instances needs an expression that is a comparison without bool, such as `latency > 2`: it is evaluated per instance")
	f(`      - alert: A
        expr: up > 1
        instances: {all: true}
        escalate_when_all: P0
        labels: {severity: P1}
`, `7: group "g", rule 1, "A": escalate_when_all needs instances with min or ratio`)
	f(`      - alert: A
        expr: up > 1
        instances: {min: 1}
        escalate_when_all: P2
        labels: {severity: P1}
`, `7: group "g", rule 1, "A": escalate_when_all P2 must be more urgent than the rule's severity P1`)
	f(`      - record: r
        expr: up
        warmup: 1m
`, `6: group "g", rule 1, "r": warmup applies to alerting rules only`)
	f(`      - alert: A
        expr: up == 0
        warmup: soon
        labels: {severity: P1}
`, `6: warmup: not a valid duration string: "soon"`)
	// Structure first: an unknown key hides the later stages' errors.
	f(`      - alert: A
        expr: up == 0
        fro: 5m
`, `6: unknown field "fro"`)
}

func TestParsePrometheusErrorsUnchanged(t *testing.T) {
	_, errs := Parse([]byte("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up ==\n        labels: {severity: P1}\n"))
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), "could not parse expression")
}

func TestCompile(t *testing.T) {
	f, errs := Parse([]byte(`groups:
  - name: g
    warmup: 0s
    rules:
      - alert: Slow
        expr: histogram_quantile(0.95, sum by (le, instance, model) (rate(x_bucket[5m]))) > 2
        for: 5m
        instances: {min: 2}
        escalate_when_all: P0
        labels: {severity: P1}
      - alert: Down
        expr: up == 0
        warmup: 2m
        labels: {severity: P0}
      - alert: Half
        expr: lat > on (pod) group_left () limit
        instances: {ratio: 0.5, by: [pod]}
        labels: {severity: P2}
`))
	require.Empty(t, errs)
	rgs, info := f.Compile()
	require.Len(t, rgs.Groups[0].Rules, 4)
	var got []string
	for _, c := range info {
		got = append(got, c.Alert+" "+c.Severity+" "+c.Expr)
	}
	q := "histogram_quantile(0.95, sum by (le, instance, model) (rate(x_bucket[5m]))) > bool 2"
	require.Equal(t, []string{
		"Slow P0 avg without (instance) (" + q + ") == 1",
		"Slow P1 (sum without (instance) (" + q + ") >= 2) or (avg without (instance) (" + q + ") == 1)",
		"Down P0 (up == 0) unless on (instance) (" + WarmingExpr(2*60e9) + ")",
		"Half P2 avg without (pod) (lat > bool on (pod) group_left () limit) >= 0.5",
	}, got)
	require.Equal(t, rgs.Groups[0].Rules[0].Labels["severity"], "P0")
	require.Equal(t, rgs.Groups[0].Rules[1].Labels["severity"], "P1")
	require.Equal(t, "P0", rgs.Groups[0].Rules[0].Labels["priority"], "the escalated rule routes as its severity")
	require.Equal(t, "P1", rgs.Groups[0].Rules[1].Labels["priority"])
	require.True(t, strings.Contains(rgs.Groups[0].Rules[0].Annotations[BreachingAnnotation], "query"))
}

func TestSeverityMapAndWarmup(t *testing.T) {
	src := []byte(`groups:
  - name: public
    rules:
      - alert: HostDown
        expr: up == 0
        labels: {severity: critical}
      - alert: DiskFilling
        expr: disk_free < 0.1
        labels: {severity: warning}
      - alert: Note
        expr: x > 0
        labels: {severity: Info}
      - alert: NoSeverity
        expr: y > 0
      - alert: Mine
        expr: z > 0
        warmup: 1m
        labels: {severity: critical, priority: P2}
  - name: held
    warmup: 3m
    rules:
      - alert: Held
        expr: w > 0
        labels: {severity: P0}
`)
	// A rule file outside the packs: no warm-up unless asked for.
	opts := Options{Severities: config.AlertingConfig{DefaultSeverity: "P2"}.Severities()}
	f, errs := ParseWith(src, opts)
	require.Empty(t, errs)
	require.Len(t, f.Warnings, 1)
	require.Equal(t, `13: group "public", rule 4, "NoSeverity": the label severity is missing; the rule routes as alerting.default_severity P2`, f.Warnings[0].Error())
	rgs, info := f.Compile()
	var got []string
	for _, c := range info {
		got = append(got, fmt.Sprintf("%s %q %s %s", c.Alert, c.Severity, c.Priority, c.Warmup))
	}
	require.Equal(t, []string{
		`HostDown "critical" P0 0s`,
		`DiskFilling "warning" P1 0s`,
		`Note "Info" P2 0s`,
		`NoSeverity "" P2 0s`,
		`Mine "critical" P2 1m0s`,
		`Held "P0" P0 3m0s`,
	}, got)
	r := rgs.Groups[0].Rules
	require.Equal(t, map[string]string{"severity": "critical", "priority": "P0"}, r[0].Labels, "the severity stays as written")
	require.Equal(t, "up == 0", r[0].Expr, "no warm-up: the expression is Prometheus' own")
	require.Equal(t, map[string]string{"priority": "P2"}, r[3].Labels)
	require.Equal(t, "P2", r[4].Labels["priority"], "a priority the rule sets wins")

	// The same file as a pack: the default warm-up holds every rule.
	_, info = mustParse(t, src).Compile()
	require.Equal(t, DefaultWarmup, info[0].Warmup)

	// A global default from rules.warmup.
	opts.Warmup = 2 * time.Minute
	f, errs = ParseWith(src, opts)
	require.Empty(t, errs)
	_, info = f.Compile()
	require.Equal(t, 2*time.Minute, info[0].Warmup)
	require.Equal(t, time.Minute, info[4].Warmup)
	require.Equal(t, 3*time.Minute, info[5].Warmup)

	// A custom map: its entries add to the defaults.
	custom := config.AlertingConfig{SeverityMap: map[string]string{"sev1": "P0", "warning": "P2"}}.Severities()
	f, errs = ParseWith([]byte("groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up == 0\n        labels: {severity: sev1}\n      - alert: B\n        expr: up == 0\n        labels: {severity: warning}\n      - alert: C\n        expr: up == 0\n        labels: {severity: critical}\n"), Options{Severities: custom})
	require.Empty(t, errs)
	_, info = f.Compile()
	require.Equal(t, []string{"P0", "P2", "P0"}, []string{info[0].Priority, info[1].Priority, info[2].Priority})
}

func mustParse(t *testing.T, src []byte) *File {
	t.Helper()
	f, errs := Parse(src)
	require.Empty(t, errs)
	return f
}

// TestSeverityLabels: with alerting.severity_labels the map reads other
// labels too, the first one present: level for rule sets that write it,
// priority for those that write priority: high.
func TestSeverityLabels(t *testing.T) {
	src := []byte(`groups:
  - name: g
    labels: {level: warning}
    rules:
      - alert: Level
        expr: a > 0
        labels: {level: critical}
      - alert: GroupLevel
        expr: b > 0
      - alert: Both
        expr: c > 0
        labels: {severity: info, level: critical}
  - name: h
    rules:
      - alert: Priority
        expr: d > 0
        labels: {priority: high}
`)
	sevs := config.AlertingConfig{SeverityMap: map[string]string{"high": "P0"}, SeverityLabels: []string{"severity", "level", "priority"}}.Severities()
	f, errs := ParseWith(src, Options{Severities: sevs})
	require.Empty(t, errs)
	require.Empty(t, f.Warnings)
	rgs, info := f.Compile()
	var got []string
	rules := append(rgs.Groups[0].Rules, rgs.Groups[1].Rules...)
	for i, c := range info {
		got = append(got, c.Alert+" "+c.Severity+" "+c.Priority+" "+rules[i].Labels["priority"])
	}
	require.Equal(t, []string{"Level critical P0 P0", "GroupLevel warning P1 P1", "Both info P2 P2", "Priority high P0 P0"}, got)

	// Without it, level is just a label, and priority must be a priority.
	_, errs = ParseWith(src, PackOptions())
	require.Len(t, errs, 1)
	require.ErrorContains(t, errs[0], `"Priority": priority "high": want P0, P1 or P2`)
}
