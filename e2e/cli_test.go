package e2e

import (
	"bytes"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCLIHasNoVictoriaMetricsFlags: VictoriaMetrics' library registers
// dozens of global flags; none may show up in, or be accepted by, the
// appliance's own CLI.
func TestCLIHasNoVictoriaMetricsFlags(t *testing.T) {
	for _, sub := range []string{"run", "check", "demo"} {
		var out bytes.Buffer
		cmd := exec.Command(binary, sub, "-h")
		cmd.Stdout, cmd.Stderr = &out, &out
		_ = cmd.Run()
		require.Contains(t, out.String(), "-", sub)
		for _, vmFlag := range []string{"memory.allowedPercent", "retentionPeriod", "storageDataPath", "dedup.minScrapeInterval", "loggerLevel", "search.max"} {
			require.NotContains(t, out.String(), vmFlag, "appliance %s -h", sub)
		}
	}

	var out bytes.Buffer
	cmd := exec.Command(binary, "run", "-memory.allowedPercent=10")
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.ExitCode())
	require.Contains(t, out.String(), "flag provided but not defined: -memory.allowedPercent")

	out.Reset()
	cmd = exec.Command(binary, "version")
	cmd.Stdout = &out
	require.NoError(t, cmd.Run())
	require.Regexp(t, `^appliance \S+ \(revision `, out.String())
}
