package promtooltest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

// Binary returns the path of promtool, building it when bench/.bin has no
// build of the right version.
func Binary(t testing.TB) string {
	t.Helper()
	root, err := harness.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var log bytes.Buffer
	bin, err := harness.GoInstall(ctx, filepath.Join(root, "bench", ".bin"), "github.com/prometheus/prometheus/cmd/promtool", harness.PrometheusVersion, &log)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool %s could not be built from the module proxy (CI=true): %v\n%s", harness.PrometheusVersion, err, log.String())
		}
		t.Skipf("promtool could not be built: %v", err)
	}
	return bin
}

// Run runs promtool with args and returns its exit status and its
// combined output.
func Run(t testing.TB, bin string, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("promtool %v: %v", args, err)
	}
	return 0, string(out)
}
