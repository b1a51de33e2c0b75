package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/internal/promtooltest"
	"github.com/aiserve/appliance/rules"
)

// exportConfig writes a config with a rule file that uses every
// extension, every embedded pack and an SLO (generated groups).
func exportConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/rules-ext/good.rules.yml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fleet.rules.yml"), data, 0o644))
	cfg := "rule_files: [\"*.rules.yml\"]\nrule_packs: [" + strings.Join(rules.PackNames(), ", ") + "]\n" + `slos:
  - name: chat-latency
    kind: latency
    histogram: vllm:e2e_request_latency_seconds
    selector: '{job="vllm"}'
    threshold: 1.5s
    objective: 99%
`
	path := filepath.Join(dir, "appliance.yml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o644))
	return path
}

// TestRulesExportIsPlainPrometheus: `appliance rules export` prints the
// rule files, the packs and the SLOs' groups with the extensions compiled
// away, as one file and as one file per source, and promtool v0.316.0's
// `check rules` accepts them.
func TestRulesExportIsPlainPrometheus(t *testing.T) {
	cfg := exportConfig(t)
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runMain([]string{"rules", "export", "--config.file", cfg}, &stdout, &stderr), stderr.String())
	text := stdout.String()
	require.NotRegexp(t, `(?m)^\s+(instances|escalate_when_all|warmup):`, text, "extensions are compiled away")
	for _, s := range []string{"# source: " + filepath.Join(filepath.Dir(cfg), "fleet.rules.yml"), "# source: pack:vllm", "# source: generated:", "# source: appliance:warmup", "alert: FleetSlowTTFT", "name: appliance-warmup"} {
		require.Contains(t, text, s)
	}
	one := filepath.Join(t.TempDir(), "all.yml")
	require.NoError(t, os.WriteFile(one, stdout.Bytes(), 0o644))

	outDir := t.TempDir()
	stdout.Reset()
	require.Equal(t, 0, runMain([]string{"rules", "export", "--config", cfg, "--out", outDir}, &stdout, &stderr), stderr.String())
	files := strings.Fields(stdout.String())
	require.GreaterOrEqual(t, len(files), len(rules.PackNames())+3, "the rule file, the packs, the SLO and the warm-up group")
	require.Contains(t, files, filepath.Join(outDir, "pack-vllm.yml"))
	require.Contains(t, files, filepath.Join(outDir, "fleet.rules.yml"))

	bin := promtooltest.Binary(t)
	rc, out := promtooltest.Run(t, bin, append([]string{"check", "rules", one}, files...)...)
	require.Equal(t, 0, rc, out)
	require.Contains(t, out, "SUCCESS")
	require.NotContains(t, out, "FAILED")
}

func TestTestRulesCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, runMain([]string{"test", "rules", "../../rules/unittest/testdata/promtool/pass_host_alerts.yml"}, &stdout, &stderr), stderr.String())
	require.Contains(t, stdout.String(), "  SUCCESS")
	stdout.Reset()
	stderr.Reset()
	require.Equal(t, 1, runMain([]string{"test", "rules", "../../rules/unittest/testdata/promtool/fail_wrong_value.yml"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "  FAILED:")
	require.Equal(t, 2, runMain([]string{"test", "rules"}, &stdout, &stderr), "no files")
	require.Equal(t, 2, runMain([]string{"test", "nope"}, &stdout, &stderr))
}
