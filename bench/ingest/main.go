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
//	go run ./bench/ingest -small-box -warmup=2m -duration=5m   # one GPU box, beside the stack a user would run
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
	"os"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

func main() { os.Exit(harness.Main("ingest", parseFlags, bench)) }

// options are the run parameters, printed with the report.
type options struct {
	duration     time.Duration // steady-state window per system
	warmup       time.Duration // before the window, excluded from CPU figures
	instances    int           // fleet targets; 0: sized for targetSeries
	models       int           // models per instance
	targetSeries int           // series the fleet should expose when instances is 0
	queries      int           // timed repeats of the query
	seed         int64
	only         []system
	keepData     bool
	interval     time.Duration
	smallBox     bool // the single GPU box run instead (smallbox.go)
}

func parseFlags() (options, error) {
	var o options
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "steady-state measuring window per system")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Minute, "warm-up per system before the window (series creation), excluded from CPU per sample")
	flag.IntVar(&o.instances, "instances", 0, "fleet instances (scrape targets); 0 sizes the fleet to about -series series")
	flag.IntVar(&o.models, "models", 1, "models served per instance")
	flag.IntVar(&o.targetSeries, "series", 100_000, "active series to aim for when -instances=0")
	flag.IntVar(&o.queries, "queries", 10, "timed repeats of the range query; the median is reported")
	flag.Int64Var(&o.seed, "seed", 1, "fleet random seed; every system sees the same fleet")
	flag.BoolVar(&o.keepData, "keep-data", false, "keep each system's data directory under bench/out after measuring it")
	flag.BoolVar(&o.smallBox, "small-box", false, "instead: one GPU box (about 3k series at 15 s, rule packs, probes, local readings), the appliance beside Prometheus + Alertmanager + blackbox_exporter + node_exporter")
	only, err := harness.DefineSystemFlags(flag.CommandLine, systems, "duration=2m", "warmup=30s").Parse(os.Args[1:])
	if err != nil {
		return o, err
	}
	o.only, o.interval = only, scrapeInterval
	if o.duration <= 0 || o.warmup < 0 || o.models < 1 || o.instances < 0 || o.queries < 1 {
		return o, errors.New("-duration, -models and -queries must be positive, -warmup and -instances not negative")
	}
	return o, nil
}

func bench(ctx context.Context, o options) error {
	if o.smallBox {
		return runSmallBox(ctx, o)
	}
	run, err := harness.NewRunDir(".", "ingest", time.Now())
	if err != nil {
		return err
	}
	rep := &report{opts: o, machine: harness.ReadMachine(), started: run.Started}

	built, err := harness.BuildAll(ctx, run, o.only)
	if err != nil {
		return err
	}
	for i, sys := range o.only {
		rep.phases = append(rep.phases, phaseTime{"build " + sys.Name, built[i].Took})
	}

	fleetOpts, err := sizeFleet(ctx, o)
	if err != nil {
		return err
	}
	rep.fleet = fleetOpts

	results, err := harness.MeasureEach(ctx, o.only, built,
		func(sys system, bin string) (*result, error) {
			t0 := time.Now()
			res := measure(ctx, sys, bin, fleetOpts, o, run.Dir)
			rep.phases = append(rep.phases, phaseTime{"run " + sys.Name, time.Since(t0)})
			return res, res.err
		},
		func(sys system, err error) *result { return &result{sys: sys, err: err} })
	if err != nil && !errors.Is(err, harness.ErrSomeFailed) {
		return err
	}
	rep.results = results
	for _, r := range results {
		if r.seriesPerScrape > 0 {
			rep.seriesPerScrape = r.seriesPerScrape
			break
		}
	}
	if werr := run.WriteReport(os.Stdout, rep.markdown()); werr != nil {
		return werr
	}
	return err
}
