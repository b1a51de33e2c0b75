package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/demo"
)

// runningFleet is a demo fleet served by this process. It owns the
// goroutine running the fleet; stop ends it.
type runningFleet struct {
	*demo.Fleet
	cancel context.CancelFunc
	done   chan error
}

func startFleet(ctx context.Context, opts demo.FleetOptions) (*runningFleet, error) {
	f, err := demo.NewFleet(opts)
	if err != nil {
		return nil, fmt.Errorf("create demo fleet of %d instances: %w", opts.Instances, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &runningFleet{Fleet: f, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f.Run(ctx) }()
	return r, nil
}

// stop ends the fleet and waits for it. It is safe to call twice.
func (r *runningFleet) stop() error {
	r.cancel()
	err, ok := <-r.done
	if !ok {
		return nil
	}
	close(r.done)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("demo fleet: %w", err)
	}
	return nil
}

// countSeries scrapes every target once, concurrently, and returns the
// number of series one round of scrapes appends (without the scraper's own
// up, scrape_* series).
func countSeries(ctx context.Context, client *http.Client, targets []string) (int, error) {
	const parallel = 8
	var (
		mu    sync.Mutex
		total int
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, parallel)
	)
	for _, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			n, err := countTarget(ctx, client, t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			total += n
		}()
	}
	wg.Wait()
	return total, first
}

func countTarget(ctx context.Context, client *http.Client, target string) (int, error) {
	return harness.CountSeries(ctx, client, "http://"+target+"/metrics")
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
