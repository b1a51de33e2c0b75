// Command rules runs Prometheus v0.316.0 and the appliance one after another
// against the same simulated fleet, each scraping it and evaluating the same
// 200 alerting and recording rules every 15 s, and prints side by side the
// time of an evaluation round and the CPU share (issue 4, "Must show").
//
// The fleet is 50 simulated vLLM servers with two models each (demo.Fleet)
// plus 27 synthetic targets whose synthetic_requests_total series bring the
// total to about -series; the rules are the vllm, targets and gpu packs
// (compiled by the appliance, whose rules.PrometheusRuleFile gives
// Prometheus the same PromQL, warm-up group included) plus 187 synthetic
// rules, each a sum by instance of a rate over a share of the synthetic
// series. Run it from the module root:
//
//	go run ./bench/rules -short   # 2 min warm-up + 1 min window per system, ~8 min in all
//	go run ./bench/rules          # 7 min warm-up + 5 min window per system, ~26 min in all
//
// Prometheus is built once into bench/.bin with `go install` from the Go
// module proxy; the appliance is rebuilt from ./cmd/appliance on every run.
// The report is printed and written to bench/out/rules-<time>.md. See
// bench/README.md for what each figure means.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/demo"
)

func main() { os.Exit(run()) }

// options are the run parameters, printed with the report.
type options struct {
	warmup       time.Duration
	duration     time.Duration
	interval     time.Duration // scrape and evaluation interval
	instances    int
	targetSeries int
	seed         int64
	only         []string
}

func run() int {
	log.SetFlags(log.Ltime)
	log.SetPrefix("rules: ")
	var (
		o     options
		short bool
		only  string
	)
	flag.DurationVar(&o.warmup, "warmup", 7*time.Minute, "time per system before the window: series creation, and for the appliance the recent window filling (rules with 5m ranges read it after 6 min, all of the packs' after 17 min)")
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "measuring window per system")
	flag.BoolVar(&short, "short", false, "quick check: -warmup=2m -duration=1m unless those are given")
	flag.IntVar(&o.instances, "instances", 50, "simulated vLLM instances (two models each)")
	flag.IntVar(&o.targetSeries, "series", 100_000, "series to aim for in all; synthetic targets make up what the vLLM fleet does not")
	flag.Int64Var(&o.seed, "seed", 1, "fleet random seed")
	flag.StringVar(&only, "only", "prometheus,appliance", "comma-separated systems to run, in this order")
	flag.Parse()
	if flag.NArg() > 0 {
		log.Printf("unexpected arguments %q; see -help", flag.Args())
		return 2
	}
	if short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["warmup"] {
			o.warmup = 2 * time.Minute
		}
		if !set["duration"] {
			o.duration = time.Minute
		}
	}
	o.interval = 15 * time.Second
	for _, name := range strings.Split(only, ",") {
		name = strings.TrimSpace(name)
		if _, ok := systemByName(name); !ok {
			log.Printf("-only: unknown system %q: want prometheus or appliance", name)
			return 2
		}
		o.only = append(o.only, name)
	}
	if o.duration < o.interval || o.warmup < 0 || o.instances < 1 {
		log.Printf("-duration must be at least %s, -warmup not negative, -instances positive", o.interval)
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

func bench(ctx context.Context, o options) (err error) {
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
	runDir := filepath.Join(outDir, "rules-"+stamp)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("create output dir: %w", err)
	}
	rep := &report{opts: o, machine: harness.ReadMachine(), started: time.Now()}

	bins := map[string]string{}
	results := map[string]*result{}
	for _, name := range o.only {
		sys, _ := systemByName(name)
		logPath := filepath.Join(runDir, "build-"+name+".log")
		log.Printf("building %s (log: %s)", sys.title, logPath)
		bin, err := buildSystem(ctx, sys, root, binDir, logPath)
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

	// One fleet for the whole run: both systems scrape the same servers.
	fleetOpts := demo.DefaultFleetOptions()
	fleetOpts.BasePort = 0
	fleetOpts.Instances = o.instances
	fleetOpts.Seed = o.seed
	fleet, err := demo.NewFleet(fleetOpts)
	if err != nil {
		return fmt.Errorf("create demo fleet of %d instances: %w", o.instances, err)
	}
	fleetCtx, stopFleet := context.WithCancel(ctx)
	fleetDone := make(chan error, 1)
	go func() { fleetDone <- fleet.Run(fleetCtx) }()
	defer func() {
		stopFleet()
		if e := <-fleetDone; e != nil && !errors.Is(e, context.Canceled) && err == nil {
			err = fmt.Errorf("demo fleet: %w", e)
		}
	}()
	sc := scrapeSetup{interval: o.interval, vllm: fleet.Targets()}

	// A simulated server shows new label values as its first requests
	// come in; count once that has mostly settled.
	if err := wait(ctx, 15*time.Second); err != nil {
		return err
	}
	rep.vllmSeries, err = countSeries(ctx, sc.vllm)
	if err != nil {
		return err
	}
	codes := max(1, int(math.Round(float64(o.targetSeries-rep.vllmSeries)/(syntheticRules*syntheticTargets))))
	synth, err := startSynthetic(codes, time.Now)
	if err != nil {
		return err
	}
	defer func() {
		if e := synth.Close(); e != nil && err == nil {
			err = e
		}
	}()
	sc.synthetic = synth.Targets()
	rep.syntheticSeries = synth.Series()
	log.Printf("fleet: %d vLLM series on %d targets, %d synthetic series on %d targets",
		rep.vllmSeries, len(sc.vllm), rep.syntheticSeries, len(sc.synthetic))

	groups := len(packs) + 1 + (syntheticRules+rulesPerGroup-1)/rulesPerGroup // packs, warm-up, synthetic
	for _, name := range o.only {
		bin, ok := bins[name]
		if !ok {
			continue
		}
		sys, _ := systemByName(name)
		res := measure(ctx, sys, bin, sc, groups, o, runDir)
		results[name] = res
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, context.Cause(ctx))
		}
		if res.err != nil {
			log.Printf("%s: %v", name, res.err)
		}
	}
	for _, name := range o.only {
		rep.results = append(rep.results, results[name])
	}
	text := rep.markdown()
	fmt.Print(text)
	path := filepath.Join(outDir, "rules-"+stamp+".md")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	log.Printf("report written to %s; configs and logs in %s", path, runDir)
	for _, r := range rep.results {
		if r.err != nil {
			return errors.New("some systems failed; see the report")
		}
	}
	return nil
}

func buildSystem(ctx context.Context, sys system, root, binDir, logPath string) (string, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return "", fmt.Errorf("create build log: %w", err)
	}
	defer f.Close()
	return sys.build(ctx, root, binDir, f)
}

// countSeries scrapes every target once and returns the series they expose.
func countSeries(ctx context.Context, targets []string) (int, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	n := 0
	for _, t := range targets {
		c, err := harness.CountSeries(ctx, client, "http://"+t+"/metrics")
		if err != nil {
			return 0, fmt.Errorf("count fleet series: %w", err)
		}
		n += c
	}
	return n, nil
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
