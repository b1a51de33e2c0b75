package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/demo"
)

const (
	// scrapeInterval is the interval (and timeout) every system scrapes
	// the fleet at.
	scrapeInterval = 5 * time.Second
	// benchQuery is the query timed on every system, over the whole run.
	benchQuery = `histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))`
	// queryPoints is about how many points per series the range query
	// returns: a chart's width.
	queryPoints = 250
	// stopGrace is how long a system gets to flush and exit after SIGTERM.
	stopGrace = 2 * time.Minute
)

// result is what one system measured.
type result struct {
	sys system
	err error // the system could not be measured (fully); figures may be partial

	seriesPerScrape int // fleet series in one round of scrapes, counted by us at the start
	seriesAtEnd     int // the same, counted at the end of the window
	targets         int

	window        time.Duration // steady-state window actually measured
	cpuWindow     time.Duration // CPU time in the window
	samplesWindow float64       // samples ingested in the window
	samplesTotal  float64       // samples ingested from start to stop
	peakRSS       uint64
	disk          harness.DiskUsage
	stopErr       error // not nil: SIGTERM did not end it cleanly

	queryStep    time.Duration
	querySpan    time.Duration
	queries      []time.Duration
	querySeries  int
	queryPoints  int
	queryFailure error
}

// sizeFleet returns the fleet options: the instance count from -instances,
// or, when that is 0, enough instances for about -series series, counted on
// a small probe fleet once its series count has settled.
func sizeFleet(ctx context.Context, o options) (demo.FleetOptions, error) {
	opts := demo.DefaultFleetOptions()
	opts.Host = "127.0.0.1"
	opts.BasePort = 0
	opts.Models = modelNames(o.models)
	opts.Seed = o.seed
	opts.Instances = o.instances
	if o.instances > 0 {
		return opts, nil
	}
	// A simulated server adds series as its first requests bring label
	// values it had not shown yet: one vLLM instance with one model shows
	// 348 series at once, 385 after 15 s and about 393 after a minute
	// (measured with seed 1), so count after probeSettle, over a few
	// instances to average their randomness.
	const (
		probeInstances = 5
		probeSettle    = 15 * time.Second
	)
	probe := opts
	probe.Instances = probeInstances
	f, err := startFleet(ctx, probe)
	if err != nil {
		return opts, err
	}
	log.Printf("sizing the fleet: counting the series of %d instances after %s", probeInstances, probeSettle)
	t := time.NewTimer(probeSettle)
	select {
	case <-ctx.Done():
		err = context.Cause(ctx)
	case <-t.C:
	}
	t.Stop()
	n := 0
	if err == nil {
		n, err = countSeries(ctx, &http.Client{Timeout: 30 * time.Second}, f.Targets())
	}
	if stopErr := f.stop(); err == nil {
		err = stopErr
	}
	if err != nil {
		return opts, fmt.Errorf("count series of the probe fleet: %w", err)
	}
	if n == 0 {
		return opts, errors.New("the demo instances expose no series")
	}
	perInstance := float64(n) / probeInstances
	opts.Instances = max(1, int(math.Round(float64(o.targetSeries)/perInstance)))
	log.Printf("one instance with %d model(s) exposes about %.0f series: using %d instances for about %.0f series",
		o.models, perInstance, opts.Instances, float64(opts.Instances)*perInstance)
	return opts, nil
}

// measure runs one system against a fresh fleet and data directory. It
// always stops the system and the fleet before returning.
func measure(ctx context.Context, sys system, bin string, fleetOpts demo.FleetOptions, o options, runDir string) *result {
	res := &result{sys: sys}
	res.err = measureInto(ctx, res, bin, fleetOpts, o, runDir)
	return res
}

func measureInto(ctx context.Context, res *result, bin string, fleetOpts demo.FleetOptions, o options, runDir string) (err error) {
	sys := res.sys
	client := &http.Client{Timeout: 5 * time.Minute}

	fleet, err := startFleet(ctx, fleetOpts)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := fleet.stop(); err == nil {
			err = stopErr
		}
	}()
	targets := fleet.Targets()
	res.targets = len(targets)
	if res.seriesPerScrape, err = countSeries(ctx, client, targets); err != nil {
		return fmt.Errorf("count fleet series: %w", err)
	}
	log.Printf("%s: fleet of %d targets exposes %d series per scrape", sys.name, len(targets), res.seriesPerScrape)

	configPath := filepath.Join(runDir, sys.name+".yml")
	if err := os.WriteFile(configPath, scrapeConfig(targets, o.interval), 0o644); err != nil {
		return fmt.Errorf("write scrape config: %w", err)
	}
	dataDir := filepath.Join(runDir, sys.name+"-data")
	if err := os.RemoveAll(dataDir); err != nil {
		return fmt.Errorf("clear data dir: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if !o.keepData {
		defer os.RemoveAll(dataDir)
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		return err
	}
	base := "http://" + addr
	logPath := filepath.Join(runDir, sys.name+".log")
	proc, err := harness.Start(sys.name, bin, sys.args(configPath, dataDir, addr), logPath)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			proc.Kill()
		}
	}()

	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = harness.WaitHTTP(readyCtx, client, base+sys.readyPath, proc.Exited())
	cancel()
	if err != nil {
		return fmt.Errorf("%s did not become ready (log: %s): %w", sys.name, logPath, err)
	}
	start := time.Now()
	log.Printf("%s: ready on %s (pid %d); warming up for %s", sys.name, addr, proc.Pid(), o.warmup)

	if err := sleep(ctx, o.warmup, proc); err != nil {
		return err
	}
	stats0, samples0, err := sample(ctx, client, proc, base, sys)
	if err != nil {
		return err
	}
	t0 := time.Now()
	log.Printf("%s: measuring for %s", sys.name, o.duration)
	if err := sleep(ctx, o.duration, proc); err != nil {
		return err
	}
	stats1, samples1, err := sample(ctx, client, proc, base, sys)
	if err != nil {
		return err
	}
	res.window = time.Since(t0)
	res.cpuWindow = stats1.CPU - stats0.CPU
	res.samplesWindow = samples1 - samples0
	log.Printf("%s: %.0f samples (%.0f/s), %.1f CPU s in the window", sys.name,
		res.samplesWindow, res.samplesWindow/res.window.Seconds(), res.cpuWindow.Seconds())
	// The simulated servers add series as requests come in (label values
	// first seen later), so the count grows a little during the run.
	if res.seriesAtEnd, err = countSeries(ctx, client, targets); err != nil {
		return fmt.Errorf("count fleet series at the end: %w", err)
	}

	// The query covers the run from the moment the system was ready; the
	// system keeps scraping meanwhile, as it would in use.
	end := time.Now()
	res.querySpan = end.Sub(start)
	res.queryStep = max(time.Second, (res.querySpan / queryPoints).Round(time.Second))
	for i := 0; i < o.queries; i++ {
		q, err := harness.QueryRange(ctx, client, base, benchQuery, start, end, res.queryStep)
		if err != nil {
			res.queryFailure = err
			log.Printf("%s: query: %v", sys.name, err)
			break
		}
		res.queries = append(res.queries, q.Latency)
		res.querySeries, res.queryPoints = q.Series, q.Points
	}
	if len(res.queries) > 0 {
		log.Printf("%s: query median %s over %d runs, %d series, %d points", sys.name,
			harness.Median(res.queries), len(res.queries), res.querySeries, res.queryPoints)
		if res.queryPoints == 0 {
			res.queryFailure = errors.New("the query returned no points")
		}
	}

	final, total, err := sample(ctx, client, proc, base, sys)
	if err != nil {
		return err
	}
	res.peakRSS = final.PeakRSS
	res.samplesTotal = total

	log.Printf("%s: stopping (SIGTERM)", sys.name)
	res.stopErr = proc.Stop(stopGrace)
	stopped = true
	if res.disk, err = harness.DirUsage(dataDir); err != nil {
		return err
	}
	log.Printf("%s: %s on disk after stop", sys.name, harness.Bytes(float64(res.disk.Allocated)))
	if res.queryFailure != nil {
		return fmt.Errorf("query: %w", res.queryFailure)
	}
	return nil
}

// sample reads the process's CPU and memory and, right after, its samples
// counter, failing if the process has died.
func sample(ctx context.Context, client *http.Client, proc *harness.Process, base string, sys system) (harness.ProcStats, float64, error) {
	select {
	case <-proc.Exited():
		return harness.ProcStats{}, 0, exitedEarly(proc)
	default:
	}
	stats, err := harness.ReadProcStats(proc.Pid())
	if err != nil {
		return stats, 0, err
	}
	n, err := harness.SumMetric(ctx, client, base+"/metrics", sys.samplesMetric)
	if err != nil {
		return stats, 0, fmt.Errorf("read samples ingested: %w", err)
	}
	return stats, n, nil
}

// sleep waits for d, failing early if ctx ends or the process exits.
func sleep(ctx context.Context, d time.Duration, proc *harness.Process) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-proc.Exited():
		return exitedEarly(proc)
	case <-t.C:
		return nil
	}
}

// scrapeConfig is the one config every system gets: Prometheus' syntax,
// which VictoriaMetrics' -promscrape.config and the appliance also read.
func scrapeConfig(targets []string, interval time.Duration) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n", interval, interval)
	b.WriteString("scrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets:\n")
	for _, t := range targets {
		fmt.Fprintf(&b, "          - %q\n", t)
	}
	return []byte(b.String())
}

// exitedEarly describes a system that exited while it was being measured.
func exitedEarly(proc *harness.Process) error {
	if err := proc.ExitErr(); err != nil {
		return fmt.Errorf("%s exited early (see its log): %w", proc.Name, err)
	}
	return fmt.Errorf("%s exited early with status 0 (see its log)", proc.Name)
}
