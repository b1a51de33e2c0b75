package main

import (
	"context"
	"errors"
	"fmt"
	"log"
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

	// cpu is the breakdown of the CPU profile taken over the window;
	// profileErr says why there is none.
	cpu        *breakdown
	profileErr error

	queryStep    time.Duration
	querySpan    time.Duration
	queries      []time.Duration
	querySeries  int
	queryPoints  int
	queryFailure error
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

	fleet, err := harness.StartFleet(ctx, fleetOpts)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := fleet.Stop(); err == nil {
			err = stopErr
		}
	}()
	targets := fleet.Targets()
	res.targets = len(targets)
	if res.seriesPerScrape, err = harness.SeriesPerScrape(ctx, client, targets); err != nil {
		return fmt.Errorf("count fleet series: %w", err)
	}
	log.Printf("%s: fleet of %d targets exposes %d series per scrape", sys.Name, len(targets), res.seriesPerScrape)

	configPath := filepath.Join(runDir, sys.Name+".yml")
	if err := os.WriteFile(configPath, scrapeConfig(targets, o.interval), 0o644); err != nil {
		return fmt.Errorf("write scrape config: %w", err)
	}
	dataDir := filepath.Join(runDir, sys.Name+"-data")
	if err := harness.FreshDir(dataDir); err != nil {
		return err
	}
	if !o.keepData {
		defer os.RemoveAll(dataDir)
	}
	logPath := filepath.Join(runDir, sys.Name+".log")
	srv, err := harness.Launch(ctx, client, sys.System, bin, configPath, dataDir, logPath, o.warmup)
	if err != nil {
		return err
	}
	defer srv.Kill() // a no-op after the Stop below

	stats0, samples0, err := sample(ctx, client, srv, sys)
	if err != nil {
		return err
	}
	t0 := time.Now()
	log.Printf("%s: measuring for %s, CPU profile on", sys.Name, o.duration)
	profCtx, stopProfile := context.WithCancel(ctx)
	profiled := make(chan error, 1)
	go func() {
		p, err := cpuProfile(profCtx, client, srv.URL, o.duration, filepath.Join(runDir, sys.Name+".cpu.pprof"))
		if err == nil {
			b := classify(p)
			res.cpu = &b
		}
		profiled <- err
	}()
	defer func() { // on an early return; a no-op after the receive below
		stopProfile()
		if profiled != nil {
			<-profiled
		}
	}()
	if err := srv.Sleep(ctx, o.duration); err != nil {
		return err
	}
	stats1, samples1, err := sample(ctx, client, srv, sys)
	if err != nil {
		return err
	}
	res.window = time.Since(t0)
	res.cpuWindow = stats1.CPU - stats0.CPU
	res.samplesWindow = samples1 - samples0
	// Who holds the memory at the end of the window (peak RSS is near).
	if err := saveProfile(ctx, client, srv.URL+"/debug/pprof/heap", filepath.Join(runDir, sys.Name+".heap.pprof")); err != nil {
		log.Printf("%s: heap profile: %v", sys.Name, err)
	}
	// The profile's last request ends a moment after the window.
	if res.profileErr = <-profiled; res.profileErr != nil {
		res.cpu = nil
		log.Printf("%s: CPU profile: %v", sys.Name, res.profileErr)
	}
	profiled = nil
	log.Printf("%s: %.0f samples (%.0f/s), %.1f CPU s in the window", sys.Name,
		res.samplesWindow, res.samplesWindow/res.window.Seconds(), res.cpuWindow.Seconds())
	// The simulated servers add series as requests come in (label values
	// first seen later), so the count grows a little during the run.
	if res.seriesAtEnd, err = harness.SeriesPerScrape(ctx, client, targets); err != nil {
		return fmt.Errorf("count fleet series at the end: %w", err)
	}

	// The query covers the run from the moment the system was ready; the
	// system keeps scraping meanwhile, as it would in use.
	start, end := srv.Ready, time.Now()
	res.querySpan = end.Sub(start)
	res.queryStep = max(time.Second, (res.querySpan / queryPoints).Round(time.Second))
	for i := 0; i < o.queries; i++ {
		q, err := harness.QueryRange(ctx, client, srv.URL, benchQuery, start, end, res.queryStep)
		if err != nil {
			res.queryFailure = err
			log.Printf("%s: query: %v", sys.Name, err)
			break
		}
		res.queries = append(res.queries, q.Latency)
		res.querySeries, res.queryPoints = q.Series, q.Points
	}
	if len(res.queries) > 0 {
		log.Printf("%s: query median %s over %d runs, %d series, %d points", sys.Name,
			harness.Median(res.queries), len(res.queries), res.querySeries, res.queryPoints)
		if res.queryPoints == 0 {
			res.queryFailure = errors.New("the query returned no points")
		}
	}

	final, total, err := sample(ctx, client, srv, sys)
	if err != nil {
		return err
	}
	res.peakRSS = final.PeakRSS
	res.samplesTotal = total

	log.Printf("%s: stopping (SIGTERM)", sys.Name)
	res.stopErr = srv.Stop(harness.StopGrace)
	if res.disk, err = harness.DirUsage(dataDir); err != nil {
		return err
	}
	log.Printf("%s: %s on disk after stop", sys.Name, harness.Bytes(float64(res.disk.Allocated)))
	if res.queryFailure != nil {
		return fmt.Errorf("query: %w", res.queryFailure)
	}
	return nil
}

// sample reads the process's CPU and memory and, right after, its samples
// counter, failing if the process has died.
func sample(ctx context.Context, client *http.Client, srv *harness.Server, sys system) (harness.ProcStats, float64, error) {
	if err := srv.Alive(); err != nil {
		return harness.ProcStats{}, 0, err
	}
	stats, err := harness.ReadProcStats(srv.Pid())
	if err != nil {
		return stats, 0, err
	}
	n, err := harness.SumMetric(ctx, client, srv.URL+"/metrics", sys.samplesMetric)
	if err != nil {
		return stats, 0, fmt.Errorf("read samples ingested: %w", err)
	}
	return stats, n, nil
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
