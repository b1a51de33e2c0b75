package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testRunDir makes a module with a go.mod in a temp dir and a RunDir in it,
// from a directory below the module root.
func testRunDir(t *testing.T) *RunDir {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n"), 0o644))
	sub := filepath.Join(root, "bench", "rules")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	d, err := NewRunDir(sub, "rules", time.Date(2026, 11, 30, 11, 12, 13, 0, time.FixedZone("CET", 3600)))
	require.NoError(t, err)
	return d
}

func TestRunDir(t *testing.T) {
	captureLog(t)
	d := testRunDir(t)
	root := filepath.Dir(filepath.Dir(filepath.Dir(d.Dir))) // <root>/bench/out/<run>
	require.Equal(t, root, d.Root)
	require.Equal(t, filepath.Join(root, "bench", ".bin"), d.BinDir)
	require.Equal(t, filepath.Join(root, "bench", "out", "rules-20261130-101213"), d.Dir, "named in UTC")
	require.Equal(t, d.Dir+".md", d.Report)
	require.DirExists(t, d.Dir)

	var stdout bytes.Buffer
	require.NoError(t, d.WriteReport(&stdout, "# Report\n"))
	require.Equal(t, "# Report\n", stdout.String())
	b, err := os.ReadFile(d.Report)
	require.NoError(t, err)
	require.Equal(t, "# Report\n", string(b))

	_, err = NewRunDir("/", "rules", time.Now())
	require.ErrorContains(t, err, "no go.mod")
}

type testContender struct {
	System
	measureErr error
}

func fakeSystem(name string, buildErr error) System {
	return System{
		Name:  name,
		Title: "Fake " + name,
		Build: func(_ context.Context, root, binDir string, log io.Writer) (string, error) {
			fmt.Fprintf(log, "building %s in %s\n", name, root)
			if buildErr != nil {
				return "", buildErr
			}
			return filepath.Join(binDir, name), nil
		},
	}
}

func TestBuildAllAndMeasureEach(t *testing.T) {
	captureLog(t)
	d := testRunDir(t)
	systems := []testContender{
		{System: fakeSystem("a", nil)},
		{System: fakeSystem("b", errors.New("go install: exit status 1"))},
		{System: fakeSystem("c", nil), measureErr: errors.New("query: status 422")},
	}
	built, err := BuildAll(t.Context(), d, systems)
	require.NoError(t, err, "a failed build skips that system only")
	require.Len(t, built, 3)
	require.Equal(t, filepath.Join(d.BinDir, "a"), built[0].Bin)
	require.EqualError(t, built[1].Err, "go install: exit status 1")
	log, err := os.ReadFile(filepath.Join(d.Dir, "build-a.log"))
	require.NoError(t, err)
	require.Equal(t, "building a in "+d.Root+"\n", string(log))

	var measured []string
	measure := func(s testContender, bin string) (string, error) {
		measured = append(measured, bin)
		return s.Name + " measured", s.measureErr
	}
	failed := func(s testContender, err error) string { return s.Name + " failed: " + err.Error() }
	results, err := MeasureEach(t.Context(), systems, built, measure, failed)
	require.ErrorIs(t, err, ErrSomeFailed)
	require.Equal(t, []string{"a measured", "b failed: go install: exit status 1", "c measured"}, results)
	require.Equal(t, []string{built[0].Bin, built[2].Bin}, measured)

	results, err = MeasureEach(t.Context(), systems[:1], built[:1], measure, failed)
	require.NoError(t, err)
	require.Equal(t, []string{"a measured"}, results)

	// Ctrl-C during a measurement: stop there, naming the system.
	ctx, cancel := context.WithCancel(t.Context())
	results, err = MeasureEach(ctx, systems, built, func(s testContender, bin string) (string, error) {
		cancel()
		return "partial", context.Canceled
	}, failed)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "a: ")
	require.Equal(t, []string{"partial"}, results)

	// Ctrl-C during a build: no further builds.
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	interrupted := []testContender{{System: fakeSystem("x", context.Canceled)}, {System: fakeSystem("y", nil)}}
	built, err = BuildAll(ctx, d, interrupted)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, built[1].Bin)
	require.NoFileExists(t, filepath.Join(d.Dir, "build-y.log"))
}

func TestFreshDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, FreshDir(dir))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "wal"), []byte("old"), 0o644))
	require.NoError(t, FreshDir(dir))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}
