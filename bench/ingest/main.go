// Command ingest runs Prometheus, VictoriaMetrics and the appliance one
// after another against the same simulated fleet of vLLM-like model servers
// and prints, side by side, what each costs to ingest it: CPU seconds per
// million samples in the steady state, peak RSS, disk bytes per sample, and
// the latency of a p95 histogram_quantile over the whole run.
//
// Run it from the module root:
//
//	go run ./bench/ingest -short                  # about 2.5 min per system
//	go run ./bench/ingest                         # 2 min warm-up + 10 min per system
//	go run ./bench/ingest -only=prometheus,appliance -duration=5m
//
// The anchors are built once into bench/.bin with `go install` from the Go
// module proxy (Prometheus takes about 5 minutes on 2 cores); the appliance
// is rebuilt from ./cmd/appliance on every run. The report is printed and
// written to bench/out/ingest-<time>.md. See bench/README.md for what each
// figure means.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

func main() { os.Exit(run()) }

// options are the run parameters, printed with the report.
type options struct {
	duration     time.Duration // steady-state window per system
	warmup       time.Duration // before the window, excluded from CPU figures
	instances    int           // fleet targets; 0: sized for targetSeries
	models       int           // models per instance
	targetSeries int           // series the fleet should expose when instances is 0
	queries      int           // timed repeats of the query
	seed         int64
	only         []string
	keepData     bool
	interval     time.Duration
}

func run() int {
	log.SetFlags(log.Ltime)
	log.SetPrefix("ingest: ")
	var (
		o     options
		short bool
		only  string
	)
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "steady-state measuring window per system")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Minute, "warm-up per system before the window (series creation), excluded from CPU per sample")
	flag.BoolVar(&short, "short", false, "quick check: -duration=2m -warmup=30s unless those are given")
	flag.IntVar(&o.instances, "instances", 0, "fleet instances (scrape targets); 0 sizes the fleet to about -series series")
	flag.IntVar(&o.models, "models", 1, "models served per instance")
	flag.IntVar(&o.targetSeries, "series", 100_000, "active series to aim for when -instances=0")
	flag.IntVar(&o.queries, "queries", 10, "timed repeats of the range query; the median is reported")
	flag.Int64Var(&o.seed, "seed", 1, "fleet random seed; every system sees the same fleet")
	flag.StringVar(&only, "only", "prometheus,victoriametrics,appliance", "comma-separated systems to run, in this order")
	flag.BoolVar(&o.keepData, "keep-data", false, "keep each system's data directory under bench/out after measuring it")
	flag.Parse()
	if flag.NArg() > 0 {
		log.Printf("unexpected arguments %q; see -help", flag.Args())
		return 2
	}
	if short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["duration"] {
			o.duration = 2 * time.Minute
		}
		if !set["warmup"] {
			o.warmup = 30 * time.Second
		}
	}
	o.interval = scrapeInterval
	for _, name := range strings.Split(only, ",") {
		name = strings.TrimSpace(name)
		if _, ok := systemByName(name); !ok {
			log.Printf("-only: unknown system %q: want prometheus, victoriametrics or appliance", name)
			return 2
		}
		o.only = append(o.only, name)
	}
	if o.duration <= 0 || o.warmup < 0 || o.models < 1 || o.instances < 0 || o.queries < 1 {
		log.Printf("-duration, -models and -queries must be positive, -warmup and -instances not negative")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, o); err != nil {
		if ctx.Err() != nil {
			log.Printf("interrupted: %v", err)
			return 130
		}
		log.Printf("%v", err)
		return 1
	}
	return 0
}

func bench(ctx context.Context, o options) error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("get working directory: %w", err)
	}
	root, err := harness.ModuleRoot(wd)
	if err != nil {
		return err
	}
	binDir := filepath.Join(root, "bench", ".bin")
	stamp := time.Now().UTC().Format("20060102-150405")
	outDir := filepath.Join(root, "bench", "out")
	runDir := filepath.Join(outDir, "ingest-"+stamp)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("create output dir: %w", err)
	}
	rep := &report{opts: o, machine: harness.ReadMachine(), started: time.Now()}

	// Build everything first, so that a build failure does not come after
	// half an hour of measuring.
	bins := map[string]string{}
	results := map[string]*result{}
	for _, name := range o.only {
		sys, _ := systemByName(name)
		t0 := time.Now()
		log.Printf("building %s (log: %s)", sys.title, filepath.Join(runDir, "build-"+name+".log"))
		bin, err := buildSystem(ctx, sys, root, binDir, runDir)
		rep.phases = append(rep.phases, phaseTime{"build " + name, time.Since(t0)})
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			log.Printf("%s will be skipped: %v", name, err)
			results[name] = &result{sys: sys, err: err}
			continue
		}
		bins[name] = bin
	}

	fleetOpts, err := sizeFleet(ctx, o)
	if err != nil {
		return err
	}
	rep.fleet = fleetOpts

	for _, name := range o.only {
		bin, ok := bins[name]
		if !ok {
			continue
		}
		sys, _ := systemByName(name)
		t0 := time.Now()
		res := measure(ctx, sys, bin, fleetOpts, o, runDir)
		rep.phases = append(rep.phases, phaseTime{"run " + name, time.Since(t0)})
		results[name] = res
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, context.Cause(ctx))
		}
		if res.err != nil {
			log.Printf("%s: %v", name, res.err)
		}
		if res.seriesPerScrape > 0 && rep.seriesPerScrape == 0 {
			rep.seriesPerScrape = res.seriesPerScrape
		}
	}

	for _, name := range o.only {
		rep.results = append(rep.results, results[name])
	}
	text := rep.markdown()
	fmt.Print(text)
	path := filepath.Join(outDir, "ingest-"+stamp+".md")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	log.Printf("report written to %s; logs in %s", path, runDir)
	for _, r := range rep.results {
		if r.err != nil {
			return errors.New("some systems failed; see the report")
		}
	}
	return nil
}

func buildSystem(ctx context.Context, sys system, root, binDir, runDir string) (string, error) {
	f, err := os.Create(filepath.Join(runDir, "build-"+sys.name+".log"))
	if err != nil {
		return "", fmt.Errorf("create build log: %w", err)
	}
	defer f.Close()
	return sys.build(ctx, root, binDir, f)
}
