package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"
)

// RunDir is where one run of a benchmark writes, below the module root:
// binaries to bench/.bin, kept between runs; logs, configs and data dirs to
// bench/out/<name>-<time>/; the report to bench/out/<name>-<time>.md.
type RunDir struct {
	Root   string // the module root, which the appliance is built from
	BinDir string // bench/.bin
	Dir    string // bench/out/<name>-<time>, created by NewRunDir
	Report string // bench/out/<name>-<time>.md

	Started time.Time // when the run started, the <time> in the names
}

// NewRunDir finds the module root at or above dir (a command passes ".",
// its working directory) and creates the run directory for benchmark name
// started at now, named by now in UTC to the second.
func NewRunDir(dir, name string, now time.Time) (*RunDir, error) {
	root, err := ModuleRoot(dir)
	if err != nil {
		return nil, err
	}
	stamp := name + "-" + now.UTC().Format("20060102-150405")
	out := filepath.Join(root, "bench", "out")
	d := &RunDir{
		Root:   root,
		BinDir: filepath.Join(root, "bench", ".bin"),
		Dir:    filepath.Join(out, stamp),
		Report: filepath.Join(out, stamp+".md"),

		Started: now,
	}
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output dir: %w", err)
	}
	return d, nil
}

// WriteReport prints the report text to stdout and writes it to d.Report.
func (d *RunDir) WriteReport(stdout io.Writer, text string) error {
	if _, err := io.WriteString(stdout, text); err != nil {
		return fmt.Errorf("print report: %w", err)
	}
	if err := os.WriteFile(d.Report, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	log.Printf("report written to %s; configs and logs in %s", d.Report, d.Dir)
	return nil
}

// FreshDir empties dir, or creates it: a system under test starts on a data
// dir with nothing from an earlier run.
func FreshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear data dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	return nil
}

// Built is the outcome of building one system.
type Built struct {
	Bin  string        // path of the binary; empty if Err is set
	Err  error         // the build failed: the system is skipped
	Took time.Duration // wall time of the build, for the report's phases
}

// BuildAll builds every system, in order, before any is measured, so that
// a build failure does not come after half an hour of measuring. Each
// build's output goes to build-<name>.log in d.Dir. A system that fails to
// build is logged and gets Built.Err, so that the others are still
// measured; the error returned is the build's when ctx ended during it.
func BuildAll[S Contender](ctx context.Context, d *RunDir, systems []S) ([]Built, error) {
	built := make([]Built, len(systems))
	for i, s := range systems {
		sys := s.Base()
		logPath := filepath.Join(d.Dir, "build-"+sys.Name+".log")
		log.Printf("building %s (log: %s)", sys.Title, logPath)
		t0 := time.Now()
		bin, err := buildLogged(ctx, sys, d, logPath)
		built[i] = Built{Bin: bin, Err: err, Took: time.Since(t0)}
		if err != nil {
			if ctx.Err() != nil {
				return built, err
			}
			log.Printf("%s will be skipped: %v", sys.Name, err)
		}
	}
	return built, nil
}

func buildLogged(ctx context.Context, sys System, d *RunDir, logPath string) (string, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return "", fmt.Errorf("create build log: %w", err)
	}
	defer f.Close()
	return sys.Build(ctx, d.Root, d.BinDir, f)
}

// ErrSomeFailed is returned by [MeasureEach], and then by the benchmark
// once its report is written, when a system did not build or could not be
// measured fully: the report lacks some figures and says why.
var ErrSomeFailed = errors.New("some systems failed; see the report")

// MeasureEach measures each system that built, one after another so that
// they never compete for the CPUs, and returns their results in the order
// of systems. measure returns what it measured of one system and, if that
// is incomplete, why (which is logged); failed makes the result of a
// system that did not build from its build error.
//
// If ctx ends, MeasureEach returns at once with an error naming the system
// it was measuring. Otherwise it returns every result, and [ErrSomeFailed]
// if any system did not build or measure returned an error.
func MeasureEach[S Contender, R any](ctx context.Context, systems []S, built []Built,
	measure func(sys S, bin string) (R, error), failed func(sys S, err error) R) ([]R, error) {
	var (
		results  []R
		failures int
	)
	for i, s := range systems {
		if built[i].Err != nil {
			results = append(results, failed(s, built[i].Err))
			failures++
			continue
		}
		name := s.Base().Name
		res, err := measure(s, built[i].Bin)
		results = append(results, res)
		if ctx.Err() != nil {
			return results, fmt.Errorf("%s: %w", name, context.Cause(ctx))
		}
		if err != nil {
			log.Printf("%s: %v", name, err)
			failures++
		}
	}
	if failures > 0 {
		return results, ErrSomeFailed
	}
	return results, nil
}
