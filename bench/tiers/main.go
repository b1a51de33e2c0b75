// Command tiers backfills 90 days of vLLM-like series into Prometheus,
// VictoriaMetrics and the appliance (raw 7d, 1m 30d, 5m 90d), then times a
// p95 histogram_quantile and a max_over_time over 1 and 24 hours and 7, 30
// and 90 days on each
// and prints, side by side, the median latencies, the ratio appliance ÷
// faster anchor, the tiers that served each appliance query and the disk
// each system uses for the same data.
//
// Run it from the module root:
//
//	go run ./bench/tiers                          # full scale: 576 series, 90 days at 15 s, ~299M samples
//	go run ./bench/tiers -series=96               # ~50M samples, about 25 minutes on 2 cores
//	go run ./bench/tiers -series=32 -days=90 -only=appliance
//	go run ./bench/tiers -reuse=bench/out/tiers-20261201-205757   # time the queries again on kept data
//
// Each system runs alone, one after the other, on a fresh data dir: the
// appliance, then VictoriaMetrics, then Prometheus. See bench/README.md,
// "Tiers benchmark", for how each is backfilled and what the figures mean.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/bench/history"
)

// guard is left out at the old end of the data, so that its oldest sample
// is still inside the appliance's 90-day retention when it is imported and
// queried some minutes after the run started.
const guard = time.Hour

func main() { os.Exit(harness.Main("tiers", parseFlags, runBench)) }

type options struct {
	series       int
	models       int
	days         int
	interval     time.Duration
	queries      int
	warm         int
	seed         uint64
	only         []string
	batchSamples int
	keepData     bool
	settle       time.Duration
	reuse        string
}

func parseFlags() (options, error) {
	var (
		o    options
		only string
	)
	flag.IntVar(&o.series, "series", 576, "series to aim for (32 per model and instance); 576 at 90 days and 15 s is the issue's ~300M samples")
	flag.IntVar(&o.models, "models", 3, "models; instances per model = series / (32 × models), at least 1")
	flag.IntVar(&o.days, "days", 90, "days of data to backfill, ending now")
	flag.DurationVar(&o.interval, "interval", 15*time.Second, "sample interval (must divide 5m)")
	flag.IntVar(&o.queries, "queries", 5, "timed repeats of each query; the median is reported")
	flag.IntVar(&o.warm, "warm", 1, "untimed runs of each query before its timed repeats, in every system (the first run after a start also pays for the start's own work and cold caches)")
	flag.Uint64Var(&o.seed, "seed", 1, "generator seed; every system gets the same data")
	flag.StringVar(&only, "only", "appliance,victoriametrics,prometheus", "comma-separated systems to run, in this order")
	flag.IntVar(&o.batchSamples, "batch-samples", 100_000, "samples per import request (rounded to whole 5-minute windows)")
	flag.BoolVar(&o.keepData, "keep-data", false, "keep the data dirs under bench/out/tiers-<time>/")
	flag.DurationVar(&o.settle, "settle-timeout", 30*time.Minute, "longest wait for the appliance's downsampler or VictoriaMetrics' merge")
	flag.StringVar(&o.reuse, "reuse", "", "time the queries on the data dirs of an earlier -keep-data run (bench/out/tiers-<time>) without backfilling them; a system whose data dir is not there is backfilled into it, with the data its data.json describes")
	if err := harness.ParseFlags(flag.CommandLine, os.Args[1:]); err != nil {
		return o, err
	}
	if o.series < history.SeriesPerGroup || o.models < 1 || o.days < 1 || o.queries < 1 || o.warm < 0 || o.batchSamples < 1 {
		return o, fmt.Errorf("need -series >= %d, -models, -days, -queries, -batch-samples >= 1", history.SeriesPerGroup)
	}
	if o.interval <= 0 || (5*time.Minute)%o.interval != 0 || o.interval%time.Millisecond != 0 {
		return o, fmt.Errorf("-interval %s must be whole milliseconds and divide 5m", o.interval)
	}
	o.only = strings.Split(only, ",")
	for _, name := range o.only {
		if _, ok := systemByName(name); !ok {
			return o, fmt.Errorf("-only: unknown system %q (want prometheus, victoriametrics, appliance)", name)
		}
	}
	return o, nil
}

func runBench(ctx context.Context, o options) error {
	run, err := harness.NewRunDir(".", "tiers", time.Now())
	if err != nil {
		return err
	}
	root, binDir, outDir := run.Root, run.BinDir, run.Dir

	instances := max(1, (o.series+history.SeriesPerGroup*o.models/2)/(history.SeriesPerGroup*o.models))
	end := time.Now().UTC().Truncate(5 * time.Minute)
	cfg := history.Config{
		Models:    o.models,
		Instances: instances,
		Start:     end.Add(-time.Duration(o.days)*24*time.Hour + guard),
		End:       end,
		Interval:  o.interval,
		Seed:      o.seed,
	}
	dataFile := filepath.Join(outDir, "data.json")
	if o.reuse != "" {
		dataFile = filepath.Join(o.reuse, "data.json")
		b, err := os.ReadFile(dataFile)
		if err != nil {
			return fmt.Errorf("-reuse: %w", err)
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("-reuse: %s: %w", dataFile, err)
		}
		o.days = int((cfg.End.Sub(cfg.Start) + guard) / (24 * time.Hour))
		instances = cfg.Instances
	} else {
		b, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dataFile, b, 0o644); err != nil {
			return err
		}
	}
	g := history.New(cfg)
	rep := &report{
		opts:    o,
		cfg:     cfg,
		series:  g.NumSeries(),
		samples: int64(g.NumSeries()) * g.NumSteps(),
		machine: harness.ReadMachine(),
		outDir:  outDir,
		results: map[string]*sysResult{},
	}
	log.Printf("data: %d models × %d instances = %d series, %s .. %s every %s: %d samples; logs in %s",
		cfg.Models, instances, rep.series, cfg.Start.Format(time.RFC3339), cfg.End.Format(time.RFC3339), o.interval, rep.samples, outDir)

	buildLog, err := os.Create(filepath.Join(outDir, "build.log"))
	if err != nil {
		return err
	}
	defer buildLog.Close()

	for _, name := range o.only {
		sys, _ := systemByName(name)
		log.Printf("%s: build", sys.title)
		bins, err := sys.build(ctx, root, binDir, buildLog)
		if err != nil {
			return fmt.Errorf("%s: %w (see %s)", sys.title, err, buildLog.Name())
		}
		res, err := runSystem(ctx, sys, bins, cfg, o, outDir)
		if err != nil {
			return fmt.Errorf("%s: %w", sys.title, err)
		}
		rep.results[name] = res
		rep.order = append(rep.order, name)
	}

	md := rep.markdown()
	fmt.Println(md)
	if err := os.WriteFile(run.Report, []byte(md), 0o644); err != nil {
		return err
	}
	log.Printf("report written to %s", run.Report)
	return nil
}
