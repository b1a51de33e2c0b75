package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

// The rules manager's metrics (Prometheus' names; the appliance prefixes
// them with appliance_).
const (
	metricGroupDurationSum = "prometheus_rule_group_duration_seconds_sum"
	metricIterations       = "prometheus_rule_group_iterations_total"
	metricMissed           = "prometheus_rule_group_iterations_missed_total"
	metricFailures         = "prometheus_rule_evaluation_failures_total"
	metricLastDuration     = "prometheus_rule_group_last_duration_seconds"
	metricLastSamples      = "prometheus_rule_group_last_evaluation_samples"
	metricRules            = "prometheus_rule_group_rules"
)

// counters are cumulative figures read at the start and end of the window.
type counters struct {
	at         time.Time
	cpu        time.Duration // user+system CPU of the process
	durSum     float64       // seconds spent evaluating groups, all groups
	iterations float64       // group evaluations, all groups
	missed     float64
	failures   float64
}

// result is what one system measured.
type result struct {
	sys system
	err error // the system could not be measured (fully); figures may be partial

	rules      float64 // rules loaded, from the system's own gauge
	window     time.Duration
	rounds     float64       // evaluation rounds in the window: group evaluations / groups
	meanRound  time.Duration // group evaluation time per round, mean over the window
	sampled    []time.Duration
	cpuShare   float64 // process CPU time / wall time in the window (scrape, store, rules)
	outSamples float64 // samples the rules produced in their last round
	missed     float64
	failures   float64
	peakRSS    uint64
	stopErr    error
}

// roundFigures turns two counter readings into rounds and mean round time:
// a round is one evaluation of every group, so rounds = group evaluations
// / groups, and the round time is the time spent in all group evaluations
// divided by that.
func roundFigures(c0, c1 counters, groups int) (rounds float64, mean time.Duration) {
	rounds = (c1.iterations - c0.iterations) / float64(groups)
	if rounds <= 0 {
		return 0, 0
	}
	return rounds, time.Duration((c1.durSum - c0.durSum) / rounds * float64(time.Second))
}

// measure runs one system against the running fleet with a fresh data dir.
// It always stops the system before returning.
func measure(ctx context.Context, sys system, bin string, sc scrapeSetup, groups int, o options, runDir string) *result {
	res := &result{sys: sys}
	res.err = measureInto(ctx, res, bin, sc, groups, o, runDir)
	return res
}

func measureInto(ctx context.Context, res *result, bin string, sc scrapeSetup, groups int, o options, runDir string) error {
	sys := res.sys
	client := &http.Client{Timeout: time.Minute}
	dir := filepath.Join(runDir, sys.Name)
	dataDir := filepath.Join(dir, "data")
	if err := harness.FreshDir(dataDir); err != nil {
		return err
	}
	defer os.RemoveAll(dataDir)
	config, err := sys.config(dir, sc)
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, sys.Name+".log")
	srv, err := harness.Launch(ctx, client, sys.System, bin, config, dataDir, logPath, o.warmup)
	if err != nil {
		return err
	}
	defer srv.Kill() // a no-op after the Stop below

	read := func() (counters, error) { return readCounters(ctx, client, srv, sys.metricPrefix) }
	c0, err := read()
	if err != nil {
		return err
	}
	log.Printf("%s: measuring for %s", sys.Name, o.duration)
	for time.Since(c0.at) < o.duration {
		if err := srv.Sleep(ctx, min(o.interval, o.duration-time.Since(c0.at))); err != nil {
			return err
		}
		v, err := harness.SumMetric(ctx, client, srv.URL+"/metrics", sys.metricPrefix+metricLastDuration)
		if err != nil {
			return fmt.Errorf("read last group durations: %w", err)
		}
		res.sampled = append(res.sampled, time.Duration(v*float64(time.Second)))
	}
	c1, err := read()
	if err != nil {
		return err
	}
	res.window = c1.at.Sub(c0.at)
	res.rounds, res.meanRound = roundFigures(c0, c1, groups)
	res.cpuShare = (c1.cpu - c0.cpu).Seconds() / res.window.Seconds()
	res.missed, res.failures = c1.missed-c0.missed, c1.failures-c0.failures
	if res.rules, err = harness.SumMetric(ctx, client, srv.URL+"/metrics", sys.metricPrefix+metricRules); err != nil {
		return fmt.Errorf("read rules loaded: %w", err)
	}
	if res.outSamples, err = harness.SumMetric(ctx, client, srv.URL+"/metrics", sys.metricPrefix+metricLastSamples); err != nil {
		return fmt.Errorf("read samples of the last round: %w", err)
	}
	st, err := harness.ReadProcStats(srv.Pid())
	if err != nil {
		return err
	}
	res.peakRSS = st.PeakRSS
	log.Printf("%s: %.1f rounds, %s per round, process CPU %.1f%% of a core", sys.Name,
		res.rounds, res.meanRound.Round(time.Millisecond), 100*res.cpuShare)

	log.Printf("%s: stopping (SIGTERM)", sys.Name)
	res.stopErr = srv.Stop(harness.StopGrace)
	if res.rounds == 0 {
		return fmt.Errorf("no rule group was evaluated in the window (log: %s)", logPath)
	}
	return nil
}

// readCounters reads the process's CPU time and, right after, the rules
// manager's counters, failing if the process has died.
func readCounters(ctx context.Context, client *http.Client, srv *harness.Server, prefix string) (counters, error) {
	if err := srv.Alive(); err != nil {
		return counters{}, err
	}
	c := counters{at: time.Now()}
	st, err := harness.ReadProcStats(srv.Pid())
	if err != nil {
		return c, err
	}
	c.cpu = st.CPU
	for _, m := range []struct {
		name string
		dst  *float64
	}{
		{metricGroupDurationSum, &c.durSum},
		{metricIterations, &c.iterations},
		{metricMissed, &c.missed},
		{metricFailures, &c.failures},
	} {
		if *m.dst, err = harness.SumMetric(ctx, client, srv.URL+"/metrics", prefix+m.name); err != nil {
			return c, fmt.Errorf("read %s: %w", prefix+m.name, err)
		}
	}
	return c, nil
}
