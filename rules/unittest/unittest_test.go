package unittest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aiserve/appliance/rules"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run runs one test file in process and returns the exit status and what
// was written to stdout and stderr.
func run(t *testing.T, c verdictCase) (int, string) {
	t.Helper()
	var out bytes.Buffer
	opts := Options{Stdout: &out, Stderr: &out, Pack: rules.Pack, IgnoreUnknownFields: c.ignoreUnknown}
	if c.run != "" {
		opts.Run = regexp.MustCompile(c.run)
	}
	return Run(opts, c.file), out.String()
}

// verdictCase is a test file and the flags it is run with.
type verdictCase struct {
	file          string
	run           string
	ignoreUnknown bool
}

// ownCases are this package's test files for plain rules: pass_*.yml
// pass, fail_*.yml fail.
func ownCases(t *testing.T) []verdictCase {
	files, err := filepath.Glob("testdata/promtool/*.yml")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 8)
	var out []verdictCase
	for _, f := range files {
		out = append(out, verdictCase{file: f})
	}
	return out
}

func wantPass(file string) bool { return strings.HasPrefix(filepath.Base(file), "pass_") }

func TestOwnTestFilesVerdicts(t *testing.T) {
	for _, c := range ownCases(t) {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			rc, out := run(t, c)
			require.Contains(t, out, "Processing test file: "+c.file)
			if wantPass(c.file) {
				require.Equal(t, 0, rc, out)
				require.Contains(t, out, "  SUCCESS\n")
			} else {
				require.Equal(t, 1, rc, out)
				require.Contains(t, out, "  FAILED:\n")
			}
		})
	}
}

func TestFailureDetails(t *testing.T) {
	rc, out := run(t, verdictCase{file: "testdata/promtool/fail_wrong_severity.yml"})
	require.Equal(t, 1, rc)
	require.Contains(t, out, "alertname: TargetDown, time: 5m")
	require.Contains(t, out, `severity="warning"`, "the expected alert")
	require.Contains(t, out, `severity="critical"`, "the alert that fired")

	rc, out = run(t, verdictCase{file: "testdata/promtool/fail_wrong_value.yml"})
	require.Equal(t, 1, rc)
	require.Contains(t, out, `exp: {__name__="job:up:sum", job="vllm"} 2E+00`)
	require.Contains(t, out, `got: {__name__="job:up:sum", job="vllm"} 1E+00`)
}

// The appliance's extensions: warm-up, instances and an embedded pack,
// compiled as the appliance compiles them.
func TestExtensions(t *testing.T) {
	rc, out := run(t, verdictCase{file: "testdata/extensions/warmup_instances.yml"})
	require.Equal(t, 0, rc, out)

	// Without warm-up the restarted instance would fire at 6m: the test
	// above fails if the warm-up is not applied.
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/extensions/warmup_instances.yml")
	require.NoError(t, err)
	rulesData, err := os.ReadFile("testdata/extensions/vllm.rules.yml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vllm.rules.yml"), bytes.Replace(rulesData, []byte("warmup: 2m"), []byte("warmup: 0s"), 1), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.yml"), data, 0o644))
	rc, out = run(t, verdictCase{file: filepath.Join(dir, "t.yml")})
	require.Equal(t, 1, rc, out)
	require.Contains(t, out, `alertname: VLLMSlow, time: 6m`)
}

func TestRunSelectsGroups(t *testing.T) {
	// Only the test group named "two of four down" of a passing file.
	rc, out := run(t, verdictCase{file: "testdata/promtool/pass_job_records.yml", run: "^two"})
	require.Equal(t, 0, rc, out)
	// A failing group is skipped when --run does not select it.
	rc, out = run(t, verdictCase{file: "testdata/promtool/fail_annotation.yml", run: "^nothing$"})
	require.Equal(t, 0, rc, out)
}

func TestUnknownRulePack(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "t.yml")
	require.NoError(t, os.WriteFile(f, []byte("rule_packs: [nope]\ntests: []\n"), 0o644))
	rc, out := run(t, verdictCase{file: f})
	require.Equal(t, 1, rc)
	require.Contains(t, out, `"nope" is not an embedded pack`)
}
