package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

// result is what one system measured.
type result struct {
	sys       system
	err       error
	latencies []time.Duration // one per repeat that arrived, in order
	missed    int             // repeats whose alert did not arrive in time
}

// measure runs one system against a fresh target, webhook and data dir.
func measure(ctx context.Context, sys system, bin string, run *harness.RunDir, o options) *result {
	res := &result{sys: sys}
	res.err = measureInto(ctx, res, bin, run, o)
	return res
}

func measureInto(ctx context.Context, res *result, bin string, run *harness.RunDir, o options) (err error) {
	sys := res.sys
	client := &http.Client{Timeout: 30 * time.Second}
	target, err := newFlipTarget(o.repeats)
	if err != nil {
		return err
	}
	hook, err := newWebhook()
	if err != nil {
		return err
	}
	defer serveBoth(target, hook)()

	dir := filepath.Join(run.Dir, sys.Name)
	if err := harness.FreshDir(dir); err != nil {
		return err
	}
	amAddr := ""
	if sys.Name == harness.Prometheus.Name {
		amDir := filepath.Join(dir, "alertmanager")
		if err := harness.FreshDir(amDir); err != nil {
			return err
		}
		// The config files are written before either starts; Alertmanager
		// gets its own config from the same call.
		if _, err := sys.files(dir, target.addr(), hook.url(), "127.0.0.1:0", o.interval, o.repeats); err != nil {
			return err
		}
		am, err := harness.Launch(ctx, client, harness.Alertmanager, alertmanagerBin(run.BinDir),
			filepath.Join(dir, "alertmanager.yml"), filepath.Join(amDir, "data"),
			filepath.Join(run.Dir, "alertmanager.log"), 0)
		if err != nil {
			return err
		}
		defer func() {
			if stopErr := am.Stop(harness.StopGrace); err == nil {
				err = stopErr
			}
		}()
		amAddr = am.Addr
	}
	config, err := sys.files(dir, target.addr(), hook.url(), amAddr, o.interval, o.repeats)
	if err != nil {
		return err
	}
	srv, err := harness.Launch(ctx, client, sys.System, bin, config, filepath.Join(dir, "data"),
		filepath.Join(run.Dir, sys.Name+".log"), 0)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := srv.Stop(harness.StopGrace); err == nil {
			err = stopErr
		}
	}()

	// Ready: every series scraped and queryable, then two evaluations on
	// them, so the first flip is not timed against a start-up.
	log.Printf("%s: waiting for the %d series to be queryable", sys.Name, o.repeats)
	for {
		n, err := countSeries(ctx, client, srv.URL, `flip_value == 0`)
		if err == nil && n == o.repeats {
			break
		}
		if err := srv.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	if err := srv.Sleep(ctx, 2*o.interval); err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(o.seed, 0))
	timeout := 3*o.interval + 30*time.Second
	for k := 1; k <= o.repeats; k++ {
		if err := srv.Sleep(ctx, time.Duration(rng.Int64N(int64(o.interval)))); err != nil {
			return err
		}
		target.flip(k)
		n := strconv.Itoa(k)
		deadline := time.NewTimer(timeout)
	wait:
		for {
			select {
			case <-ctx.Done():
				deadline.Stop()
				return context.Cause(ctx)
			case <-srv.Exited():
				deadline.Stop()
				return srv.Alive()
			case <-deadline.C:
				res.missed++
				log.Printf("%s: repeat %d: no alert within %s", sys.Name, k, timeout)
				break wait
			case got := <-hook.arrived:
				if got != n {
					continue
				}
				deadline.Stop()
				at, _ := hook.receivedAt(n)
				seen := target.seen(k)
				if seen.IsZero() || at.Before(seen) {
					return fmt.Errorf("repeat %d: alert at %s before any scrape saw the flip (%s)", k, at, seen)
				}
				res.latencies = append(res.latencies, at.Sub(seen))
				log.Printf("%s: repeat %d: %s from the scrape to the webhook", sys.Name, k, at.Sub(seen).Round(time.Millisecond))
				break wait
			}
		}
	}
	if res.missed > 0 {
		return fmt.Errorf("%d of %d alerts did not arrive within %s", res.missed, o.repeats, timeout)
	}
	return nil
}

// countSeries is the number of series an instant query returns.
func countSeries(ctx context.Context, client *http.Client, base, q string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("decode query answer: %w", err)
	}
	if body.Status != "success" {
		return 0, errors.New("query failed")
	}
	return len(body.Data.Result), nil
}
