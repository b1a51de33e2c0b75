// Command rollup measures the downsampler at issue 11's "1.5 million
// series in one minute": how long after it could start each 1m and 5m
// window holding the series is rolled up, whether the appliance pack's
// DownsamplingBehind fires while the downsampler is behind and resolves
// when it has caught up, and the process's peak memory. It runs the
// storage and the downsampler in this process (no HTTP), on real time.
//
// Run it from the module root:
//
//	go run ./bench/rollup                      # 1,500,000 series, about 10-20 minutes on 2 cores
//	go run ./bench/rollup -series=200000       # a few minutes
//
// Timeline, all on one clock that runs at wall-clock speed:
//
//  1. a fresh storage and downsampler (first start: the downsampler walks
//     the raw retention's empty windows once);
//  2. the burst: -series series, four samples each (15 s apart), in one
//     minute M, written as fast as this machine takes them;
//  3. the outage: the downsampler is stopped for -outage (default 10m, as
//     when every pass failed on the query cap). The clock jumps over it;
//     the self-scrape and the rule are evaluated every 15 s through it, so
//     DownsamplingBehind goes pending and fires;
//  4. catch-up: the downsampler runs (Run, a pass every 15 s) while the
//     self-scrape stores its lag and the rule is evaluated every 15 s.
//     Reported: when the burst's 1m and 5m windows were rolled up after
//     the downsampler resumed, and when the alert resolved;
//  5. steady state: the same series get the next minute's four samples;
//     reported: how long after its close that 1m window, and the 5m window
//     holding it, were rolled up (the downsampler waits Delay, 1m, after a
//     1m window closes, so 60 s of the figure is by design).
//
// Every window is checked: appliance_downsample_rows_written_total must
// count the four aggregates of every series in each tier.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	promrules "github.com/prometheus/prometheus/rules"
	promstorage "github.com/prometheus/prometheus/storage"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/downsample"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/rules"
	"github.com/aiserve/appliance/rules/rulefile"
	"github.com/aiserve/appliance/storage"
)

func main() { os.Exit(harness.Main("rollup", parseFlags, run)) }

type options struct {
	series  int
	page    int
	outage  time.Duration
	timeout time.Duration
	dir     string
	cpuProf string
	memProf string
}

func parseFlags() (options, error) {
	var o options
	fs := flag.CommandLine
	fs.IntVar(&o.series, "series", 1_500_000, "series in the burst minute")
	fs.IntVar(&o.page, "page", 0, "storage.Options.RollupPageSize (0: the default)")
	fs.DurationVar(&o.outage, "outage", 10*time.Minute, "how long the downsampler is stopped after the burst")
	fs.DurationVar(&o.timeout, "timeout", 90*time.Minute, "give up after this long")
	fs.StringVar(&o.dir, "dir", "", "data directory (default: a temporary one, removed after)")
	fs.StringVar(&o.cpuProf, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.StringVar(&o.memProf, "memprofile", "", "write a heap profile to this file when the Go heap is at its highest so far (checked every second)")
	if err := harness.ParseFlags(fs, os.Args[1:]); err != nil {
		return o, err
	}
	if o.series <= 0 {
		return o, errors.New("-series must be positive")
	}
	return o, nil
}

// clock is wall-clock time plus an offset the outage moves.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) jump(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

func run(ctx context.Context, o options) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "bench-rollup-")
		if err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if o.cpuProf != "" {
		f, err := os.Create(o.cpuProf)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	clk := &clock{}
	opts := storage.DefaultOptions()
	opts.Path = dir
	opts.Now = clk.now
	opts.RollupPageSize = o.page
	db, err := storage.Open(opts)
	if err != nil {
		return err
	}
	defer db.Close()
	reg := prometheus.NewRegistry()
	ds, err := downsample.New(db, downsample.Options{Now: clk.now, Registerer: reg})
	if err != nil {
		return err
	}
	defer ds.Close()
	mem := startMemory(o.memProf)
	defer mem.stop()
	log.Printf("%d series, GOMAXPROCS %d, %d CPUs, data in %s; times in brackets are the appliance's clock (it jumps over the outage)", o.series, runtime.GOMAXPROCS(0), runtime.NumCPU(), dir)

	// 1. First start.
	began := time.Now()
	if err := ds.Step(ctx); err != nil {
		return fmt.Errorf("first pass: %w", err)
	}
	log.Printf("first start: the downsampler walked the raw retention's empty windows in %s", since(began))

	// 2. The burst, in the minute that is current now.
	minute := clk.now().Truncate(time.Minute)
	began, c0 := time.Now(), cpu()
	if err := write(ctx, db, o.series, minute); err != nil {
		return err
	}
	log.Printf("burst: wrote %d series x 4 samples in minute [%s] in %s (CPU %s)", o.series, minute.UTC().Format("15:04"), since(began), cpuSince(c0))

	// 3. The outage.
	alert, err := downsamplingBehind()
	if err != nil {
		return err
	}
	eng := query.New(query.Options{}, nil, nil)
	ev := &evaluator{db: db, reg: reg, rule: alert, qf: promrules.EngineQueryFunc(eng, db)}
	for end := clk.now().Add(o.outage); clk.now().Before(end); clk.jump(15 * time.Second) {
		if err := ev.tick(ctx, clk.now()); err != nil {
			return err
		}
	}
	log.Printf("outage: %s without a pass (simulated); alert %s", o.outage, ev.summary())

	// 4. Catch-up, live.
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = ds.Run(runCtx) })
	defer func() { stopRun(); wg.Wait() }()
	resumed, c0 := time.Now(), cpu()
	w1, w5 := minute.Add(time.Minute), minute.Truncate(5*time.Minute).Add(5*time.Minute)
	var at1, at5 time.Duration
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	nextEval := time.Now()
	for at1 == 0 || at5 == 0 || ev.state != promrules.StateInactive {
		select {
		case <-ctx.Done():
			return fmt.Errorf("catch-up: %w (1m watermark %s, 5m %s, alert %s)", ctx.Err(), ds.Watermark(storage.Tier1m).UTC(), ds.Watermark(storage.Tier5m).UTC(), ev.summary())
		case <-tick.C:
		}
		if at1 == 0 && !ds.Watermark(storage.Tier1m).Before(w1) {
			at1 = time.Since(resumed)
		}
		if at5 == 0 && !ds.Watermark(storage.Tier5m).Before(w5) {
			at5 = time.Since(resumed)
		}
		if time.Now().After(nextEval) {
			if err := ev.tick(ctx, clk.now()); err != nil {
				return err
			}
			nextEval = nextEval.Add(15 * time.Second)
		}
	}
	log.Printf("catch-up: burst's 1m window rolled up %s after the downsampler resumed, its 5m window %s; alert %s (resumed at +%s)",
		at1.Round(time.Second), at5.Round(time.Second), ev.summary(), since(resumed))
	log.Printf("catch-up: CPU %s", cpuSince(c0))
	r1, r5 := counter(reg, "appliance_downsample_rows_written_total", "1m"), counter(reg, "appliance_downsample_rows_written_total", "5m")
	if want := float64(4 * o.series); r1 < want || r5 < want {
		return fmt.Errorf("catch-up: %g rows in 1m and %g in 5m, want at least %g each (the four aggregates of every series)", r1, r5, want)
	}

	// 5. Steady state: the next minute of the same series.
	next := clk.now().Truncate(time.Minute)
	began, c0 = time.Now(), cpu()
	if err := write(ctx, db, o.series, next); err != nil {
		return err
	}
	log.Printf("steady: wrote the next minute [%s] in %s (CPU %s)", next.UTC().Format("15:04"), since(began), cpuSince(c0))
	c0 = cpu()
	w1, w5 = next.Add(time.Minute), next.Truncate(5*time.Minute).Add(5*time.Minute)
	at1, at5 = 0, 0
	for at1 == 0 || at5 == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("steady: %w", ctx.Err())
		case <-tick.C:
		}
		now := clk.now()
		if at1 == 0 && !ds.Watermark(storage.Tier1m).Before(w1) {
			at1 = now.Sub(w1)
		}
		if at5 == 0 && !ds.Watermark(storage.Tier5m).Before(w5) {
			at5 = now.Sub(w5)
		}
		if time.Now().After(nextEval) {
			if err := ev.tick(ctx, now); err != nil {
				return err
			}
			nextEval = nextEval.Add(15 * time.Second)
		}
	}
	log.Printf("steady: the 1m window rolled up %s after its close, its 5m window %s after its close; alert %s; CPU from the write to the 5m window %s",
		at1.Round(time.Second), at5.Round(time.Second), ev.summary(), cpuSince(c0))
	if e := counter(reg, "appliance_downsample_errors_total", "1m") + counter(reg, "appliance_downsample_errors_total", "5m"); e != 0 {
		return fmt.Errorf("%g rollup calls failed", e)
	}
	r1b, r5b := counter(reg, "appliance_downsample_rows_written_total", "1m"), counter(reg, "appliance_downsample_rows_written_total", "5m")
	if want := float64(4 * o.series); r1b-r1 < want || r5b-r5 < want {
		return fmt.Errorf("steady: %g rows in 1m and %g in 5m, want at least %g each", r1b-r1, r5b-r5, want)
	}
	ps, err := harness.ReadProcStats(os.Getpid())
	if err != nil {
		return err
	}
	log.Printf("rows written: 1m %.0f, 5m %.0f; CPU %s; peak RSS %.0f MiB; peak Go heap %.0f MiB",
		r1b, r5b, ps.CPU.Round(time.Second), float64(ps.PeakRSS)/(1<<20), float64(mem.peak())/(1<<20))
	return nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

// cpu is this process's CPU time so far (0 where /proc cannot say).
func cpu() time.Duration {
	ps, err := harness.ReadProcStats(os.Getpid())
	if err != nil {
		return 0
	}
	return ps.CPU
}

// cpuSince formats the CPU time used since c0.
func cpuSince(c0 time.Duration) string { return (cpu() - c0).Round(100 * time.Millisecond).String() }

// write appends four samples (15 s apart) of n gauge series in minute m.
func write(ctx context.Context, db *storage.DB, n int, m time.Time) error {
	const batch = 50_000
	app := db.AppenderV2(ctx)
	b := labels.NewScratchBuilder(3)
	for i := range n {
		b.Reset()
		b.Add(labels.MetricName, "tokens_in_flight")
		b.Add("pod", "pod-"+strconv.Itoa(i/100))
		b.Add("seq", strconv.Itoa(i))
		ls := b.Labels()
		for _, off := range []time.Duration{5, 20, 35, 50} {
			if _, err := app.Append(0, ls, 0, m.Add(off*time.Second).UnixMilli(), float64(i%97)+float64(off), nil, nil, promstorage.AOptions{}); err != nil {
				return fmt.Errorf("append: %w", err)
			}
		}
		if (i+1)%batch == 0 {
			if err := ctx.Err(); err != nil {
				_ = app.Rollback()
				return err
			}
			if err := app.Commit(); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			app = db.AppenderV2(ctx)
		}
	}
	if err := app.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// evaluator is the appliance's self-scrape of the lag and its evaluation
// of DownsamplingBehind, one tick every 15 s.
type evaluator struct {
	db    *storage.DB
	reg   *prometheus.Registry
	rule  *promrules.AlertingRule
	qf    promrules.QueryFunc
	state promrules.AlertState
	// changes lists the alert's states with the lag when each began.
	changes []string
}

func (e *evaluator) tick(ctx context.Context, now time.Time) error {
	app := e.db.AppenderV2(ctx)
	var lag1 float64
	for _, tier := range []string{"1m", "5m"} {
		v := gauge(e.reg, "appliance_downsample_lag_seconds", tier)
		if tier == "1m" {
			lag1 = v
		}
		ls := labels.FromStrings(labels.MetricName, "appliance_downsample_lag_seconds", "instance", "localhost:9090", "job", "appliance", "tier", tier)
		if _, err := app.Append(0, ls, 0, now.UnixMilli(), v, nil, nil, promstorage.AOptions{}); err != nil {
			return fmt.Errorf("self-scrape: %w", err)
		}
	}
	if err := app.Commit(); err != nil {
		return fmt.Errorf("self-scrape: %w", err)
	}
	if _, err := e.rule.Eval(ctx, 0, now, e.qf, nil, 0); err != nil {
		return fmt.Errorf("evaluate DownsamplingBehind: %w", err)
	}
	st := promrules.StateInactive
	for _, a := range e.rule.ActiveAlerts() {
		st = max(st, a.State)
	}
	if len(e.changes) == 0 || st != e.state {
		e.changes = append(e.changes, fmt.Sprintf("%s at %s (1m lag %.0fs)", st, now.UTC().Format("15:04:05"), lag1))
	}
	e.state = st
	return nil
}

func (e *evaluator) summary() string { return fmt.Sprint(e.changes) }

// downsamplingBehind is the appliance pack's rule, compiled as the
// appliance loads it.
func downsamplingBehind() (*promrules.AlertingRule, error) {
	data, _ := rules.Pack("appliance")
	f, errs := rulefile.Parse(data)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	groups, _ := f.Compile()
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "DownsamplingBehind" {
				continue
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				return nil, err
			}
			return promrules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), time.Duration(r.KeepFiringFor),
				labels.FromMap(r.Labels), labels.FromMap(r.Annotations), labels.EmptyLabels(), "", false, nil), nil
		}
	}
	return nil, errors.New("no DownsamplingBehind in the appliance pack")
}

func gauge(reg *prometheus.Registry, name, tier string) float64 {
	m := find(reg, name, tier)
	if m == nil || m.GetGauge() == nil {
		return 0
	}
	return m.GetGauge().GetValue()
}

func counter(reg *prometheus.Registry, name, tier string) float64 {
	m := find(reg, name, tier)
	if m == nil || m.GetCounter() == nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

func find(reg *prometheus.Registry, name, tier string) *dto.Metric {
	mfs, err := reg.Gather()
	if err != nil {
		return nil
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tier" && l.GetValue() == tier {
					return m
				}
			}
		}
	}
	return nil
}

// memory samples the Go heap every second (and writes a heap profile at
// its peak when asked); the goroutine is stop's.
type memory struct {
	mu   sync.Mutex
	max  uint64
	done chan struct{}
	wg   sync.WaitGroup
}

func startMemory(profile string) *memory {
	m := &memory{done: make(chan struct{})}
	m.wg.Go(func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var written uint64
		for {
			metrics.Read(s)
			v := s[0].Value.Uint64()
			m.mu.Lock()
			m.max = max(m.max, v)
			m.mu.Unlock()
			// A new profile at each 10% above the last one written.
			if profile != "" && v > written+written/10 {
				if f, err := os.Create(profile); err == nil {
					_ = pprof.WriteHeapProfile(f)
					f.Close()
					written = v
				}
			}
			select {
			case <-m.done:
				return
			case <-t.C:
			}
		}
	})
	return m
}

func (m *memory) peak() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max
}

func (m *memory) stop() {
	close(m.done)
	m.wg.Wait()
}
