// Command dashboard times the appliance's Overview page in headless
// Chromium, from navigation to data-ready, at 24 h, 7 d and 90 d, side by
// side with VictoriaMetrics' vmui drawing the same queries over the same
// data in the same browser.
//
// Both systems get the same data, sent to both in the same batches: the
// ingest bench's fleet of simulated vLLM servers (about 100,000 series,
// the last -window of it at -interval), and before it 90 days of the tiers
// bench's vLLM-like history for -history-instances instances per model.
// The appliance rolls the history up into its 1m and 5m tiers; the run
// waits for that before timing anything.
//
// Run it from the module root, after `make web` (the bundle is embedded):
//
//	go run ./bench/dashboard                     # full scale: ~100,000 series + 90 days
//	go run ./bench/dashboard -series=10000       # reduced scale, for development
//
// See bench/README.md, "Dashboard benchmark", for how each side is timed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

func main() { os.Exit(harness.Main("dashboard", parseFlags, runBench)) }

type options struct {
	series           int
	instances        int
	models           int
	window           time.Duration
	interval         time.Duration
	days             int
	historyInstances int
	historyInterval  time.Duration
	runs             int
	ranges           []string
	seed             uint64
	settle           time.Duration
	keepData         bool
	vmCache          bool
}

func parseFlags() (options, error) {
	var (
		o      options
		ranges string
	)
	flag.IntVar(&o.series, "series", 100_000, "fleet series to aim for when -instances is 0")
	flag.IntVar(&o.instances, "instances", 0, "fleet instances; 0 sizes the fleet to about -series")
	flag.IntVar(&o.models, "models", 2, "models each instance serves (the Overview has one row per model)")
	flag.DurationVar(&o.window, "window", 30*time.Minute, "how much of the fleet's recent past is stored")
	flag.DurationVar(&o.interval, "interval", 30*time.Second, "sample interval of the fleet's data (must divide 5m)")
	flag.IntVar(&o.days, "days", 90, "days of history before the fleet's window")
	flag.IntVar(&o.historyInstances, "history-instances", 1, "instances per model in the history (32 series each)")
	flag.DurationVar(&o.historyInterval, "history-interval", time.Minute, "sample interval of the history (must divide 5m)")
	flag.IntVar(&o.runs, "runs", 5, "timed page loads per system and range; the median is reported")
	flag.StringVar(&ranges, "ranges", "24h,7d,90d", "Overview ranges to time, comma-separated")
	flag.Uint64Var(&o.seed, "seed", 1, "generator seed; both systems get the same data")
	flag.DurationVar(&o.settle, "settle-timeout", 30*time.Minute, "longest wait for the appliance's downsampler")
	flag.BoolVar(&o.vmCache, "vm-cache", true, "run VictoriaMetrics with its rollup result cache, as the appliance runs with its range cache (false: -search.disableCache)")
	flag.BoolVar(&o.keepData, "keep-data", false, "keep the data dirs under bench/out/dashboard-<time>/")
	if err := harness.ParseFlags(flag.CommandLine, os.Args[1:]); err != nil {
		return o, err
	}
	if o.series < 1 || o.models < 1 || o.days < 1 || o.runs < 1 || o.historyInstances < 1 {
		return o, fmt.Errorf("-series, -models, -days, -runs and -history-instances must be at least 1")
	}
	for _, d := range []time.Duration{o.interval, o.historyInterval} {
		if d <= 0 || (5*time.Minute)%d != 0 || d%time.Second != 0 {
			return o, fmt.Errorf("interval %s must be whole seconds and divide 5m", d)
		}
	}
	if o.window < 5*time.Minute || o.window%(5*time.Minute) != 0 {
		return o, fmt.Errorf("-window %s must be a multiple of 5m", o.window)
	}
	o.ranges = strings.Split(ranges, ",")
	return o, nil
}

func runBench(ctx context.Context, o options) error {
	run, err := harness.NewRunDir(".", "dashboard", time.Now())
	if err != nil {
		return err
	}
	bundle, err := bundleSize(run.Root)
	if err != nil {
		return err
	}
	buildLog, err := os.Create(filepath.Join(run.Dir, "build.log"))
	if err != nil {
		return err
	}
	defer buildLog.Close()
	log.Printf("build the appliance and %s (logs in %s)", harness.VictoriaMetrics.Title, buildLog.Name())
	appBin := filepath.Join(run.BinDir, "appliance-dashboard")
	if err := harness.GoBuild(ctx, run.Root, "./cmd/appliance", appBin, buildLog); err != nil {
		return fmt.Errorf("build the appliance: %w", err)
	}
	vmBin, err := harness.VictoriaMetrics.Build(ctx, run.Root, run.BinDir, buildLog)
	if err != nil {
		return fmt.Errorf("build %s: %w", harness.VictoriaMetrics.Title, err)
	}

	end := time.Now().UTC().Truncate(5 * time.Minute)
	data, err := planData(ctx, o, end)
	if err != nil {
		return err
	}
	rep := &report{opts: o, data: data, machine: harness.ReadMachine(), bundle: bundle, dir: run.Dir}

	sys, err := startSystems(ctx, run.Dir, appBin, vmBin, o.vmCache)
	if err != nil {
		return err
	}
	defer sys.stop(o.keepData)
	t0 := time.Now()
	if rep.loadNote, err = loadData(ctx, data, []string{sys.app.URL, sys.vm.URL}); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	rep.loadTime = time.Since(t0)
	t0 = time.Now()
	if rep.settleNote, err = settle(ctx, sys, o.settle); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	rep.settleTime = time.Since(t0)
	if rep.stored, err = storedSeries(ctx, sys.app.URL, data); err != nil {
		return err
	}
	log.Printf("stored: %d series in the appliance in the fleet's window", rep.stored)

	if rep.results, err = measure(ctx, o, sys, run.Dir); err != nil {
		return err
	}
	return run.WriteReport(os.Stdout, rep.markdown())
}

// bundleSize adds up the gzipped files of the built dashboard bundle.
func bundleSize(root string) (int64, error) {
	dist := filepath.Join(root, "ui", "web", "dist")
	if _, err := os.Stat(filepath.Join(dist, "app.js")); err != nil {
		return 0, fmt.Errorf("the dashboard bundle is not built (%w): run `make web` first", err)
	}
	gz, err := filepath.Glob(filepath.Join(dist, "*.gz"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, f := range gz {
		st, err := os.Stat(f)
		if err != nil {
			return 0, err
		}
		n += st.Size()
	}
	return n, nil
}
