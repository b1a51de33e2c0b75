package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/bench/history"
	"github.com/aiserve/appliance/demo"
)

// guard is left out at the old end of the history so that its oldest
// sample is still inside the appliance's 90-day retention when queried.
const guard = time.Hour

var client = &http.Client{Timeout: 10 * time.Minute}

// dataPlan is what both systems are loaded with.
type dataPlan struct {
	fleet         demo.FleetOptions
	perInstance   int // series one fleet instance exposes
	fleetStart    time.Time
	end           time.Time
	interval      time.Duration
	history       history.Config
	historySeries int
}

func (d dataPlan) fleetSamples() int64 {
	return int64(d.fleet.Instances*d.perInstance) * int64(d.end.Sub(d.fleetStart)/d.interval)
}

func (d dataPlan) historySamples() int64 {
	return int64(d.historySeries) * int64(d.history.End.Sub(d.history.Start)/d.history.Interval)
}

// planData sizes the fleet (counting one instance's series after a few
// simulated scrapes) and the history.
func planData(ctx context.Context, o options, end time.Time) (dataPlan, error) {
	d := dataPlan{end: end, fleetStart: end.Add(-o.window), interval: o.interval}
	d.fleet = demo.DefaultFleetOptions()
	d.fleet.BasePort = 0
	d.fleet.Seed = int64(o.seed)
	d.fleet.Models = fleetModels(o.models)
	probe := d.fleet
	probe.Instances = 1
	lines := 0
	err := eachFleetStep(probe, d.fleetStart, d.fleetStart.Add(5*time.Minute), o.interval, func(_ int64, page []byte, _ int) error {
		lines = bytes.Count(page, []byte("\n"))
		return ctx.Err()
	})
	if err != nil {
		return d, err
	}
	d.perInstance = lines
	d.fleet.Instances = o.instances
	if d.fleet.Instances == 0 {
		d.fleet.Instances = max(1, int(math.Round(float64(o.series)/float64(lines))))
	}
	d.history = history.Config{
		Models:    o.models,
		Instances: o.historyInstances,
		Start:     end.Add(-time.Duration(o.days)*24*time.Hour + guard),
		End:       d.fleetStart,
		Interval:  o.historyInterval,
		Seed:      o.seed,
	}
	d.historySeries = history.New(d.history).NumSeries()
	log.Printf("data: fleet of %d instances × %d series = %d series, %s at %s; history of %d series over %d days at %s",
		d.fleet.Instances, d.perInstance, d.fleet.Instances*d.perInstance, o.window, o.interval, d.historySeries, o.days, o.historyInterval)
	return d, nil
}

// fleetModels are the demo's models, then generated names; the history
// uses the same names for its first models (bench/history's modelNames).
func fleetModels(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = history.ModelName(i)
	}
	return names
}

// eachFleetStep simulates a fleet on a clock of its own from start
// (exclusive) to end every interval and calls fn with each instance's
// page, relabelled with job="vllm" and a stable instance and stamped with
// the step's time in milliseconds.
func eachFleetStep(opts demo.FleetOptions, start, end time.Time, interval time.Duration, fn func(t int64, page []byte, instance int) error) error {
	now := start
	opts.Now = func() time.Time { return now }
	f, err := demo.NewFleet(opts)
	if err != nil {
		return fmt.Errorf("create the fleet: %w", err)
	}
	defer f.Close()
	var raw, out []byte
	for now = start.Add(interval); !now.After(end); now = now.Add(interval) {
		ts := strconv.AppendInt(nil, now.UnixMilli(), 10)
		for i := range f.Len() {
			raw = f.Instance(i).AppendMetrics(raw[:0])
			labels := fmt.Appendf(nil, `job="vllm",instance="10.1.%d.%d:8000"`, i/250, i%250+1)
			out = relabel(out[:0], raw, labels, ts)
			if err := fn(now.UnixMilli(), out, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// relabel copies a text-format page without its comments, adding labels
// to every sample and the timestamp ts.
func relabel(dst, page, labels, ts []byte) []byte {
	for len(page) > 0 {
		line := page
		if i := bytes.IndexByte(page, '\n'); i >= 0 {
			line, page = page[:i], page[i+1:]
		} else {
			page = nil
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		j := bytes.IndexAny(line, "{ ")
		if j < 0 {
			continue
		}
		dst = append(dst, line[:j]...)
		dst = append(dst, '{')
		dst = append(dst, labels...)
		rest := line[j:]
		if rest[0] == '{' {
			if len(rest) > 1 && rest[1] != '}' {
				dst = append(dst, ',')
			}
			rest = rest[1:]
		} else {
			dst = append(dst, '}')
		}
		dst = append(dst, rest...)
		dst = append(dst, ' ')
		dst = append(dst, ts...)
		dst = append(dst, '\n')
	}
	return dst
}

// loadData sends the history, then the fleet's window, to every base URL's
// /api/v1/import/prometheus, in batches of whole 5-minute windows of every
// series (in time order, as storage's doc asks of the appliance); each
// batch goes to all systems at once before the next is sent.
func loadData(ctx context.Context, d dataPlan, bases []string) (string, error) {
	var requests, bytesSent int64
	send := func(body []byte) error {
		errs := make([]error, len(bases))
		var wg sync.WaitGroup
		for i, base := range bases {
			wg.Go(func() { errs[i] = post(ctx, base+"/api/v1/import/prometheus", body) })
		}
		wg.Wait()
		requests++
		bytesSent += int64(len(body))
		if requests%50 == 0 {
			log.Printf("  imported %d batches, %s each system", requests, harness.Bytes(float64(bytesSent)))
		}
		return errors.Join(errs...)
	}

	// The history, as bench/tiers imports it.
	g := history.New(d.history)
	perWindow := int((5 * time.Minute) / d.history.Interval)
	steps := perWindow * max(1, 200_000/(g.NumSeries()*perWindow))
	buf := make([]byte, 0, 16<<20)
	for {
		buf = append(buf[:0], history.TypeLines...)
		n := 0
		for ; n < steps; n++ {
			t, ok := g.Next()
			if !ok {
				break
			}
			buf = g.AppendStep(buf, t, history.FormatPrometheus)
		}
		if n == 0 {
			break
		}
		if err := send(buf); err != nil {
			return "", fmt.Errorf("history: %w", err)
		}
	}
	log.Printf("history loaded (%d batches); now the fleet's %s", requests, d.end.Sub(d.fleetStart))

	// The fleet, one 5-minute window of every instance per batch.
	buf = buf[:0]
	windowEnd := d.fleetStart.Add(5 * time.Minute).UnixMilli()
	err := eachFleetStep(d.fleet, d.fleetStart, d.end, d.interval, func(t int64, page []byte, instance int) error {
		if t > windowEnd && instance == 0 {
			if err := send(buf); err != nil {
				return err
			}
			buf = buf[:0]
			windowEnd += (5 * time.Minute).Milliseconds()
		}
		buf = append(buf, page...)
		return ctx.Err()
	})
	if err == nil && len(buf) > 0 {
		err = send(buf)
	}
	if err != nil {
		return "", fmt.Errorf("fleet: %w", err)
	}
	return fmt.Sprintf("%d import requests of %s in all, the same to each system", requests, harness.Bytes(float64(bytesSent))), nil
}

func post(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain; version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("import to %s: %s: %s", url, resp.Status, msg)
	}
	return nil
}

// systems are the two servers under test, running together.
type systems struct {
	app, vm  *harness.Server
	dashDir  string   // vmui's -vmui.customDashboardsPath
	dataDirs []string // removed by stop unless -keep-data
}

// stop stops both servers and, unless keep, removes their data dirs.
func (s *systems) stop(keep bool) {
	for _, p := range []*harness.Server{s.app, s.vm} {
		if p == nil {
			continue
		}
		if err := p.Stop(harness.StopGrace); err != nil {
			log.Printf("stop: %v", err)
		}
	}
	if !keep {
		for _, d := range s.dataDirs {
			os.RemoveAll(d)
		}
	}
}

// startSystems starts the appliance (raw 7d, 1m 30d, 5m 90d, as
// bench/tiers) and VictoriaMetrics (retention 100d, no rollup result
// cache, as the other benches run it) on fresh data dirs.
func startSystems(ctx context.Context, dir, appBin, vmBin string, vmCache bool) (*systems, error) {
	s := &systems{dashDir: filepath.Join(dir, "vmui-dashboards")}
	if err := os.MkdirAll(s.dashDir, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "appliance.yml")
	body := "storage:\n  retention: {raw: 7d, 1m: 30d, 5m: 90d}\nweb:\n  max_request_body_bytes: 512MiB\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return nil, err
	}
	appData, vmData := filepath.Join(dir, "appliance-data"), filepath.Join(dir, "victoriametrics-data")
	s.dataDirs = []string{appData, vmData}
	for _, d := range s.dataDirs {
		if err := harness.FreshDir(d); err != nil {
			return nil, err
		}
	}
	app := harness.Appliance
	var err error
	if s.app, err = harness.Launch(ctx, client, app, appBin, cfg, appData, filepath.Join(dir, "appliance.log"), 0); err != nil {
		return nil, err
	}
	vm := harness.VictoriaMetrics
	vm.Args = func(_, dataDir, addr string) []string {
		args := []string{
			"-storageDataPath=" + dataDir,
			"-httpListenAddr=" + addr,
			"-retentionPeriod=100d",
			"-vmui.customDashboardsPath=" + s.dashDir,
		}
		if !vmCache {
			args = append(args, "-search.disableCache")
		}
		return args
	}
	if s.vm, err = harness.Launch(ctx, client, vm, vmBin, "", vmData, filepath.Join(dir, "victoriametrics.log"), 0); err != nil {
		s.stop(false)
		return nil, err
	}
	return s, nil
}

// settle flushes VictoriaMetrics and waits until the appliance's
// downsampler has caught up with the imported data (every tier's lag
// under 3 min, 10 min for 5m, and its rows-written counter unchanged
// between two readings 10 s apart).
func settle(ctx context.Context, s *systems, timeout time.Duration) (string, error) {
	if _, err := getBody(ctx, s.vm.URL+"/internal/force_flush"); err != nil {
		return "", err
	}
	deadline := time.Now().Add(timeout)
	var last float64 = -1
	stable := 0
	for {
		d, err := harness.ReadDownsampler(ctx, client, s.app.URL)
		if err != nil {
			return "", err
		}
		if d.CaughtUp && d.Rows == last {
			stable++
		} else {
			stable = 0
		}
		log.Printf("  downsampler: %s; rollup rows written %.0f", d.Lags, d.Rows)
		if stable >= 1 {
			return fmt.Sprintf("appliance downsampler caught up (%s; %.0f rollup rows); VictoriaMetrics flushed", d.Lags, d.Rows), nil
		}
		last = d.Rows
		if time.Now().After(deadline) {
			return "", fmt.Errorf("downsampler not caught up after %s", timeout)
		}
		if err := harness.Sleep(ctx, 10*time.Second); err != nil {
			return "", err
		}
	}
}

// storedSeries counts the series the appliance holds with samples in the
// fleet's window.
func storedSeries(ctx context.Context, base string, d dataPlan) (int, error) {
	q := fmt.Sprintf(`count(last_over_time({__name__=~".+"}[%ds]))`, int(d.end.Sub(d.fleetStart).Seconds()))
	b, err := getBody(ctx, base+"/api/v1/query?query="+url.QueryEscape(q)+"&time="+strconv.FormatInt(d.end.Unix(), 10))
	if err != nil {
		return 0, err
	}
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Data.Result) == 0 {
		return 0, fmt.Errorf("count series: %v: %s", err, b)
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	n, err := strconv.ParseFloat(s, 64)
	return int(n), err
}

func getBody(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return b, nil
}
