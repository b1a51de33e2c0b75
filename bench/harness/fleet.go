package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/aiserve/appliance/demo"
)

// Fleet is a fleet of simulated vLLM servers ([demo.Fleet]) served from
// the benchmark's own process, so that its CPU time is never counted as the
// system's. It owns the goroutine running the fleet; Stop ends it.
type Fleet struct {
	*demo.Fleet
	cancel context.CancelFunc
	done   chan error

	stopOnce sync.Once
	stopErr  error
}

// StartFleet creates a demo fleet with opts and serves it until Stop or
// until ctx ends.
func StartFleet(ctx context.Context, opts demo.FleetOptions) (*Fleet, error) {
	f, err := demo.NewFleet(opts)
	if err != nil {
		return nil, fmt.Errorf("create demo fleet of %d instances: %w", opts.Instances, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Fleet{Fleet: f, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f.Run(ctx) }()
	return r, nil
}

// Stop ends the fleet and waits for its servers to shut down. It returns
// the fleet's error, if it failed other than by being stopped, and the same
// again when called twice.
func (r *Fleet) Stop() error {
	r.stopOnce.Do(func() {
		r.cancel()
		if err := <-r.done; err != nil && !errors.Is(err, context.Canceled) {
			r.stopErr = fmt.Errorf("demo fleet: %w", err)
		}
	})
	return r.stopErr
}

// SeriesPerScrape scrapes every target's /metrics once, a few at a time,
// and returns the number of series one round of scrapes appends, without
// the scraper's own up and scrape_* series. It returns the first error,
// with the count of the pages it could read.
func SeriesPerScrape(ctx context.Context, client *http.Client, targets []string) (int, error) {
	const parallel = 8 // scrapes in flight at once
	var (
		mu    sync.Mutex
		total int
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, parallel)
	)
	for _, t := range targets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			n, err := CountSeries(ctx, client, "http://"+t+"/metrics")
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = err
			}
			total += n
		})
	}
	wg.Wait()
	return total, first
}
