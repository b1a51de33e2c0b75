package harness

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLaunchServesAndStops(t *testing.T) {
	captureLog(t)
	sys, bin := helperSystem(t, "serve")
	dir := t.TempDir()
	logPath := filepath.Join(dir, "helper.log")
	client := testClient()
	before := time.Now()
	srv, err := Launch(t.Context(), client, sys, bin, "", dir, logPath, 10*time.Millisecond)
	require.NoError(t, err)
	defer srv.Kill()

	require.Equal(t, "http://"+srv.Addr, srv.URL)
	require.False(t, srv.Ready.Before(before))
	require.NoError(t, srv.Alive())
	n, err := SumMetric(t.Context(), client, srv.URL+"/metrics", "helper_samples_total")
	require.NoError(t, err)
	require.Equal(t, 5.0, n)

	require.NoError(t, srv.Stop(StopGrace), "the helper exits 0 on SIGTERM")
	out, err := os.ReadFile(logPath)
	require.NoError(t, err)
	require.Contains(t, string(out), "stopping on SIGTERM")
	require.ErrorContains(t, srv.Alive(), "helper exited early with status 0")
}

func TestLaunchFailsWhenTheSystemExits(t *testing.T) {
	sys, bin := helperSystem(t, "exit")
	dir := t.TempDir()
	logPath := filepath.Join(dir, "helper.log")
	_, err := Launch(t.Context(), testClient(), sys, bin, "", dir, logPath, time.Minute)
	require.ErrorContains(t, err, "helper did not become ready (log: "+logPath+")")
	require.ErrorContains(t, err, "process exited")
}

func TestProcessSleep(t *testing.T) {
	p, err := Start("sleep", "/bin/sleep", []string{"60"}, filepath.Join(t.TempDir(), "sleep.log"))
	require.NoError(t, err)
	defer p.Kill()

	require.NoError(t, p.Sleep(t.Context(), time.Millisecond))

	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("operator pressed Ctrl-C")
	cancel(stop)
	require.ErrorIs(t, p.Sleep(ctx, time.Minute), stop)

	// A system that dies during a window ends the window with its exit.
	p.Kill()
	err = p.Sleep(t.Context(), time.Minute)
	require.ErrorContains(t, err, "sleep exited early (see its log)")
	require.ErrorContains(t, err, "killed")
	require.Equal(t, err.Error(), p.Alive().Error())
}

func TestSleep(t *testing.T) {
	require.NoError(t, Sleep(t.Context(), time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, Sleep(ctx, time.Minute), context.Canceled)
}
