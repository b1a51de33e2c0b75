// Command alertlatency times an alert from the scrape that first sees its
// condition to the webhook that receives it, in the appliance and in
// Prometheus with Alertmanager, one after another in one run.
//
// A target served from this process exposes flip_value{n="1"} … {n="N"},
// all 0. Each repeat k waits a random part of an interval (so the flip
// falls anywhere between scrapes and evaluations), sets series k to 1 and
// waits for the alert of rule group k, `flip_value{n="k"} > 0` with
// for: 0s, at a webhook receiver, also served from this process. Each
// group is evaluated at its own offset within the interval, as each scrape
// is, so the repeats sample the phase between scrape and evaluation. The latency is the
// receipt at the webhook minus the arrival of the first scrape request that
// was answered with 1 (the target's own request log). Every alert is a new
// aggregation group (group_by [alertname, n]) with group_wait 0s.
//
// Run it from the module root:
//
//	go run ./bench/alertlatency                # 15 s interval, 10 repeats per system
//	go run ./bench/alertlatency -short         # 5 s interval, 5 repeats
//
// Prometheus and Alertmanager are built into bench/.bin with `go install`
// from the Go module proxy; the appliance from ./cmd/appliance. The report
// is printed and written to bench/out/alertlatency-<time>.md.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

func main() { os.Exit(harness.Main("alertlatency", parseFlags, bench)) }

// options are the run parameters, printed with the report.
type options struct {
	interval time.Duration // scrape and evaluation interval
	repeats  int
	seed     uint64
	only     []system
}

func parseFlags() (options, error) {
	var o options
	flag.DurationVar(&o.interval, "interval", 15*time.Second, "scrape and rule evaluation interval of both systems")
	flag.IntVar(&o.repeats, "repeats", 10, "alerts timed per system; the median and max are reported")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the random wait before each flip")
	only, err := harness.DefineSystemFlags(flag.CommandLine, systems, "interval=5s", "repeats=5").Parse(os.Args[1:])
	if err != nil {
		return o, err
	}
	o.only = only
	if o.interval < time.Second || o.repeats < 1 {
		return o, errors.New("-interval must be at least 1s and -repeats positive")
	}
	return o, nil
}

func bench(ctx context.Context, o options) error {
	run, err := harness.NewRunDir(".", "alertlatency", time.Now())
	if err != nil {
		return err
	}
	rep := &report{opts: o, machine: harness.ReadMachine(), started: run.Started}
	rep.load0 = harness.LoadAverage()
	built, err := harness.BuildAll(ctx, run, o.only)
	if err != nil {
		return err
	}
	results, err := harness.MeasureEach(ctx, o.only, built,
		func(sys system, bin string) (*result, error) {
			res := measure(ctx, sys, bin, run, o)
			return res, res.err
		},
		func(sys system, err error) *result { return &result{sys: sys, err: err} })
	if err != nil && !errors.Is(err, harness.ErrSomeFailed) {
		return err
	}
	rep.results = results
	rep.load1 = harness.LoadAverage()
	if werr := run.WriteReport(os.Stdout, rep.markdown()); werr != nil {
		return werr
	}
	return err
}
