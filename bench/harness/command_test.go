package harness

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// captureLog sends the standard logger to a buffer for the test.
func captureLog(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	flags, prefix, out := log.Flags(), log.Prefix(), log.Writer()
	log.SetOutput(&buf)
	t.Cleanup(func() {
		log.SetFlags(flags)
		log.SetPrefix(prefix)
		log.SetOutput(out)
	})
	return &buf
}

func TestMainExitStatus(t *testing.T) {
	f := func(parseErr, benchErr error, want int, wantLog string) {
		t.Helper()
		buf := captureLog(t)
		parse := func() (int, error) { return 42, parseErr }
		bench := func(_ context.Context, o int) error {
			require.Equal(t, 42, o)
			return benchErr
		}
		require.Equal(t, want, Main("demo", parse, bench))
		require.Contains(t, buf.String(), wantLog)
		log.SetOutput(io.Discard)
	}
	f(nil, nil, ExitOK, "")
	f(errors.New("-only: unknown system \"x\""), nil, ExitUsage, "demo: ")
	f(errors.New("-only: unknown system \"x\""), nil, ExitUsage, "-only: unknown system \"x\"\n")
	f(nil, errors.New("build the appliance: exit status 1"), ExitFailed, "build the appliance: exit status 1\n")
	f(nil, ErrSomeFailed, ExitFailed, "some systems failed; see the report\n")
}

func TestMainInterrupted(t *testing.T) {
	buf := captureLog(t)
	parse := func() (struct{}, error) { return struct{}{}, nil }
	bench := func(ctx context.Context, _ struct{}) error {
		// What Ctrl-C in the terminal sends.
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			return errors.New("SIGINT did not cancel the context")
		}
		return errors.New("appliance: warm-up: context canceled")
	}
	require.Equal(t, ExitInterrupted, Main("demo", parse, bench))
	require.Contains(t, buf.String(), "interrupted: appliance: warm-up: context canceled")
}

func TestSystemFlags(t *testing.T) {
	type opts struct {
		warmup, duration time.Duration
		only             []System
	}
	parse := func(args ...string) (opts, error) {
		var o opts
		fs := flag.NewFlagSet("demo", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.DurationVar(&o.warmup, "warmup", 7*time.Minute, "")
		fs.DurationVar(&o.duration, "duration", 5*time.Minute, "")
		sf := DefineSystemFlags(fs, []System{Prometheus, VictoriaMetrics, Appliance}, "warmup=2m", "duration=1m")
		require.Equal(t, "quick check: -warmup=2m -duration=1m unless those are given", fs.Lookup("short").Usage)
		require.Equal(t, "prometheus,victoriametrics,appliance", fs.Lookup("only").DefValue)
		var err error
		o.only, err = sf.Parse(args)
		return o, err
	}
	names := func(ss []System) (out []string) {
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}

	o, err := parse()
	require.NoError(t, err)
	require.Equal(t, 7*time.Minute, o.warmup)
	require.Equal(t, []string{"prometheus", "victoriametrics", "appliance"}, names(o.only))

	// -short changes the defaults, never what the command line gave.
	o, err = parse("-short", "-duration=3m", "-only", "appliance, prometheus")
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, o.warmup)
	require.Equal(t, 3*time.Minute, o.duration)
	require.Equal(t, []string{"appliance", "prometheus"}, names(o.only))

	_, err = parse("-only=prometheus,thanos")
	require.EqualError(t, err, `-only: unknown system "thanos": want prometheus, victoriametrics or appliance`)
	_, err = parse("-short", "extra")
	require.EqualError(t, err, `unexpected arguments ["extra"]; see -help`)
	_, err = parse("-nosuchflag")
	require.Error(t, err)
}

func TestSelectSystemsNamesTheKnownOnes(t *testing.T) {
	_, err := SelectSystems("victoriametrics", []System{Prometheus, Appliance})
	require.EqualError(t, err, `-only: unknown system "victoriametrics": want prometheus or appliance`)
}
