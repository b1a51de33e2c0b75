package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/rules"
)

// badFiles maps every testdata/*.bad.yml (and testdata/alerting/*.bad.yml)
// to the errors `appliance check` reports: the ones a stage finds (rule
// files, rule pack names, templates), which config does not check itself.
var badFiles = map[string][]string{
	// The second pattern of rule_files matches nothing, which is fine
	// (as in Prometheus); the error is inside the rule file.
	"testdata/rule-expr.bad.yml": {
		`testdata/badrules/expr.rules.yml:8: group "vllm", rule 2, "VLLMSlowTTFT": could not parse expression: 1:93: parse error: unclosed left parenthesis`,
	},
	"testdata/rule-packs.bad.yml": {
		`testdata/rule-packs.bad.yml:3: unknown rule pack "ollama"; known packs: ` + strings.Join(rules.PackNames(), ", "),
	},
	"testdata/remote-read.bad.yml": {
		`testdata/remote-read.bad.yml:1: remote_read http://lts:9201/read: configured twice`,
	},
	"testdata/alerting/template.bad.yml": {
		`testdata/alerting/template.bad.yml:3: title template: template: title:1: unclosed action`,
	},
}

func errorStrings(t *testing.T, errs []error) []string {
	t.Helper()
	var s []string
	for _, err := range errs {
		var e *config.Error
		require.True(t, errors.As(err, &e), "not a *config.Error: %v", err)
		s = append(s, e.Error())
	}
	return s
}

func TestCheckBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.bad.yml")
	require.NoError(t, err)
	more, err := filepath.Glob("testdata/alerting/*.bad.yml")
	require.NoError(t, err)
	files = append(files, more...)
	require.Len(t, files, len(badFiles), "every testdata/**/*.bad.yml needs an entry in badFiles and vice versa")
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			want, ok := badFiles[f]
			require.True(t, ok, "no expected errors for %s", f)
			require.Equal(t, want, errorStrings(t, checkConfig(f).errs))
		})
	}
}

// TestLoadConfigReportsStageErrors: run and reload refuse what check
// refuses, with the same file:line.
func TestLoadConfigReportsStageErrors(t *testing.T) {
	for _, f := range []string{"testdata/rule-packs.bad.yml", "testdata/alerting/template.bad.yml"} {
		_, err := loadConfig(runFlags{config: f})
		require.Error(t, err, f)
		require.Equal(t, badFiles[f][0], err.Error())
	}
}

func TestCheckConfigGoodFile(t *testing.T) {
	require.Empty(t, checkConfig("../../config/testdata/good.yml").errs)
}

// TestCheckExtendedRuleFiles: `appliance check` accepts rule files with
// extensions and refuses bad ones at file:line.
func TestCheckExtendedRuleFiles(t *testing.T) {
	require.Empty(t, checkRuleFile("testdata/rules-ext/good.rules.yml"))

	const f = "testdata/rules-ext/bad.rules.yml"
	require.Equal(t, []string{
		f + `:8: group "bad", rule 2, "WrongSeverity": severity "sev1" is not in alerting.severity_map; want one of P0, P1, P2, critical, error, info, none, warning`,
		f + ":11: group \"bad\", rule 3, \"NotAComparison\": instances needs an expression that is a comparison without bool, such as `latency > 2`: it is evaluated per instance",
		f + `:18: group "bad", rule 4, "EscalateDown": escalate_when_all P2 must be more urgent than the rule's severity P1`,
	}, errorStrings(t, checkConfig("testdata/rules-ext/appliance.yml").errs))

	// A rule without a severity is accepted, with a warning.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "appliance.yml")
	rf := filepath.Join(dir, "r.yml")
	require.NoError(t, os.WriteFile(cfg, []byte("rule_files: [r.yml]\nalerting: {default_severity: P2}\n"), 0o644))
	require.NoError(t, os.WriteFile(rf, []byte("groups:\n  - name: g\n    rules:\n      - alert: NoSeverity\n        expr: up == 0\n"), 0o644))
	require.Empty(t, checkConfig(cfg).errs)
	require.Equal(t, []string{
		rf + `:4: warning: group "g", rule 1, "NoSeverity": the label severity is missing; the rule routes as alerting.default_severity P2`,
	}, checkConfig(cfg).warnings)
}

func TestCheckRuleFileErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.yml")
	require.NoError(t, os.WriteFile(p, []byte(`groups:
  - name: g
    rules:
      - record: job:up:sum
        expr: sum by (job) (up)
      - alert: A
        expr: up == 0
        labels:
          severity: P0
        annotations:
          summary: "{{ $labels.instance"
      - alert: B
        expr: up == 0
        fro: 5m
`), 0o644))
	require.Equal(t, []string{p + `:14: unknown field "fro"`}, errorStrings(t, checkRuleFile(p)))

	require.NoError(t, os.WriteFile(p, []byte(`groups:
  - name: g
    rules:
      - alert: A
        expr: up == 0
        annotations:
          summary: "{{ $labels.instance"
`), 0o644))
	got := errorStrings(t, checkRuleFile(p))
	require.Len(t, got, 1)
	require.True(t, strings.HasPrefix(got[0], p+`:7: group "g", rule 1, "A": annotation "summary": template: __alert_A:1: unclosed action`), got[0])
}

// TestCheckTemplateFiles: a broken Alertmanager template file is an error
// of `appliance check`, at the templates key.
func TestCheckTemplateFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.tmpl"), []byte(`{{ define "x" }}{{ .Status `), 0o644))
	cfg := filepath.Join(dir, "appliance.yml")
	require.NoError(t, os.WriteFile(cfg, []byte("alerting:\n  templates: ['*.tmpl']\n"), 0o644))
	errs := errorStrings(t, checkConfig(cfg).errs)
	require.Len(t, errs, 1)
	require.Contains(t, errs[0], cfg+":2: template file "+filepath.Join(dir, "bad.tmpl"))
}
