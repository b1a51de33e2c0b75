package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"net/http"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/demo"
)

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
	f, err := harness.StartFleet(ctx, probe)
	if err != nil {
		return opts, err
	}
	log.Printf("sizing the fleet: counting the series of %d instances after %s", probeInstances, probeSettle)
	n := 0
	err = harness.Sleep(ctx, probeSettle)
	if err == nil {
		n, err = harness.SeriesPerScrape(ctx, &http.Client{Timeout: 30 * time.Second}, f.Targets())
	}
	if stopErr := f.Stop(); err == nil {
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

// modelNames returns n model names: the demo's defaults first, then
// generated ones.
func modelNames(n int) []string {
	names := demo.DefaultFleetOptions().Models
	if n <= len(names) {
		return names[:n]
	}
	out := append([]string(nil), names...)
	for i := len(names); i < n; i++ {
		out = append(out, fmt.Sprintf("bench-model-%d", i))
	}
	return out
}
