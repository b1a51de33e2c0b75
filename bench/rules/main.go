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
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/demo"
)

func main() { os.Exit(harness.Main("rules", parseFlags, bench)) }

// options are the run parameters, printed with the report.
type options struct {
	warmup       time.Duration
	duration     time.Duration
	interval     time.Duration // scrape and evaluation interval
	instances    int
	targetSeries int
	seed         int64
	only         []system
}

func parseFlags() (options, error) {
	var o options
	// What is scraped, then for how long.
	flag.IntVar(&o.instances, "instances", 50, "simulated vLLM instances (two models each)")
	flag.IntVar(&o.targetSeries, "series", 100_000, "series to aim for in all; synthetic targets make up what the vLLM fleet does not")
	flag.Int64Var(&o.seed, "seed", 1, "fleet random seed")
	flag.DurationVar(&o.warmup, "warmup", 7*time.Minute, "time per system before the window: series creation, and for the appliance the recent window filling (rules with 5m ranges read it after 6 min, all of the packs' after 17 min)")
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "measuring window per system")
	o.interval = 15 * time.Second
	var err error
	if o.only, err = harness.DefineSystemFlags(flag.CommandLine, systems, "warmup=2m", "duration=1m").Parse(os.Args[1:]); err != nil {
		return o, err
	}
	if o.duration < o.interval || o.warmup < 0 || o.instances < 1 {
		return o, fmt.Errorf("-duration must be at least %s, -warmup not negative, -instances positive", o.interval)
	}
	return o, nil
}

func bench(ctx context.Context, o options) (err error) {
	run, err := harness.NewRunDir(".", "rules", time.Now())
	if err != nil {
		return err
	}
	built, err := harness.BuildAll(ctx, run, o.only)
	if err != nil {
		return err
	}
	rep := &report{opts: o, machine: harness.ReadMachine(), started: run.Started}

	// One fleet for the whole run: both systems scrape the same servers.
	fleetOpts := demo.DefaultFleetOptions()
	fleetOpts.BasePort = 0
	fleetOpts.Instances = o.instances
	fleetOpts.Seed = o.seed
	fleet, err := harness.StartFleet(ctx, fleetOpts)
	if err != nil {
		return err
	}
	defer func() {
		if e := fleet.Stop(); e != nil && err == nil {
			err = e
		}
	}()
	sc := scrapeSetup{interval: o.interval, vllm: fleet.Targets()}

	// A simulated server shows new label values as its first requests
	// come in; count once that has mostly settled.
	if err := harness.Sleep(ctx, 15*time.Second); err != nil {
		return err
	}
	rep.vllmSeries, err = harness.SeriesPerScrape(ctx, &http.Client{Timeout: 30 * time.Second}, sc.vllm)
	if err != nil {
		return fmt.Errorf("count fleet series: %w", err)
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
	rep.results, err = harness.MeasureEach(ctx, o.only, built,
		func(sys system, bin string) (*result, error) {
			res := measure(ctx, sys, bin, sc, groups, o, run.Dir)
			return res, res.err
		},
		func(sys system, err error) *result { return &result{sys: sys, err: err} })
	if err != nil && !errors.Is(err, harness.ErrSomeFailed) {
		return err
	}
	if werr := run.WriteReport(os.Stdout, rep.markdown()); werr != nil {
		return werr
	}
	return err
}
