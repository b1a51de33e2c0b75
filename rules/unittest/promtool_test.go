package unittest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/internal/promtooltest"
)

// prometheusTestdata is promtool's own testdata directory, in the module
// cache (Prometheus is a dependency of this module).
func prometheusTestdata(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/prometheus/prometheus")
	out, err := cmd.Output()
	require.NoError(t, err, "go list -m github.com/prometheus/prometheus")
	dir := filepath.Join(strings.TrimSpace(string(out)), "cmd", "promtool", "testdata")
	_, err = os.Stat(dir)
	require.NoError(t, err)
	return dir
}

// prometheusCases are promtool's own rule unit test files (those with
// tests:), plus the flag variants promtool's tests run them with.
func prometheusCases(t *testing.T) []verdictCase {
	dir := prometheusTestdata(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	require.NoError(t, err)
	var out []verdictCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if bytes.HasPrefix(data, []byte("tests:")) || bytes.Contains(data, []byte("\ntests:")) {
			out = append(out, verdictCase{file: f})
		}
	}
	require.GreaterOrEqual(t, len(out), 10, "promtool's unit test files in %s", dir)
	return append(out,
		verdictCase{file: filepath.Join(dir, "rules_run.yml"), run: "correct"},
		verdictCase{file: filepath.Join(dir, "rules_run.yml"), run: "wrong"},
		verdictCase{file: filepath.Join(dir, "rules_run_fuzzy.yml"), run: "correct"},
		verdictCase{file: filepath.Join(dir, "rules_run_extrafields.yml"), ignoreUnknown: true},
	)
}

func (c verdictCase) promtoolArgs() []string {
	args := []string{"test", "rules"}
	if c.run != "" {
		args = append(args, "--run", c.run)
	}
	if c.ignoreUnknown {
		args = append(args, "--ignore-unknown-fields")
	}
	return append(args, c.file)
}

func (c verdictCase) String() string {
	return strings.Join(c.promtoolArgs()[2:], " ")
}

// TestSameVerdictsAsPromtool runs promtool v0.316.0 and `appliance test
// rules` on the same files (this package's plain-rule files and promtool's
// own testdata) and requires the same verdict on each.
func TestSameVerdictsAsPromtool(t *testing.T) {
	bin := promtooltest.Binary(t)
	cases := append(ownCases(t), prometheusCases(t)...)
	passed := 0
	for _, c := range cases {
		want, pout := promtooltest.Run(t, bin, c.promtoolArgs()...)
		got, out := run(t, c)
		require.Equal(t, want, got, "%s:\npromtool:\n%s\nappliance:\n%s", c, pout, out)
		if strings.Contains(c.file, "testdata/promtool/") {
			require.Equal(t, wantPass(c.file), want == 0, "promtool's verdict on %s is the one its name says", c)
		}
		if got == 0 {
			passed++
		}
		t.Logf("%-70s promtool %d, appliance %d", c, want, got)
	}
	t.Logf("%d cases, same verdicts; %d pass in both, %d fail in both", len(cases), passed, len(cases)-passed)
	require.GreaterOrEqual(t, passed, 8)
}
