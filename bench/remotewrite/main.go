package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/demo"
)

func main() { os.Exit(harness.Main("remotewrite", parseFlags, bench)) }

type options struct {
	series   int
	interval time.Duration
	warmup   time.Duration
	duration time.Duration
	outage   time.Duration
	seed     int64
}

func parseFlags() (options, error) {
	var o options
	flag.IntVar(&o.series, "series", 100_000, "active series of the simulated fleet")
	flag.DurationVar(&o.interval, "interval", 10*time.Second, "scrape interval")
	flag.DurationVar(&o.warmup, "warmup", time.Minute, "per system, before the steady-state window")
	flag.DurationVar(&o.duration, "duration", 2*time.Minute, "steady-state window per system")
	flag.DurationVar(&o.outage, "outage", time.Minute, "the receiver answers 503 this long, then the backlog drain is timed")
	flag.Int64Var(&o.seed, "seed", 1, "fleet random seed")
	short := flag.Bool("short", false, "a quick run: 20k series, 20s warm-up, 40s window, 30s outage")
	if err := harness.ParseFlags(flag.CommandLine, os.Args[1:]); err != nil {
		return o, err
	}
	if *short {
		o.series, o.warmup, o.duration, o.outage = 20_000, 20*time.Second, 40*time.Second, 30*time.Second
	}
	if o.series <= 0 || o.duration <= 0 || o.interval <= 0 {
		return o, errors.New("-series, -duration and -interval must be positive")
	}
	return o, nil
}

// receiver takes Prometheus remote write 1.0 and counts samples per
// sender (the URL path), keeping the newest timestamp.
type receiver struct {
	down    atomic.Bool
	mu      sync.Mutex
	samples map[string]int64
	newest  map[string]int64
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var wr prompb.WriteRequest
	if err := wr.Unmarshal(raw); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var n, newest int64
	for _, ts := range wr.Timeseries {
		n += int64(len(ts.Samples))
		for _, s := range ts.Samples {
			newest = max(newest, s.Timestamp)
		}
	}
	r.mu.Lock()
	r.samples[req.URL.Path] += n
	r.newest[req.URL.Path] = max(r.newest[req.URL.Path], newest)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) read(path string) (samples, newest int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.samples[path], r.newest[path]
}

// contender is a system that scrapes the fleet and remote-writes it.
type contender struct {
	name, title string
	build       func(ctx context.Context, root, binDir string, log io.Writer) (string, error)
	// args starts it: scrape config file, data dir, listen address,
	// remote write URL.
	args      func(scrapeCfg, data, addr, rwURL string) ([]string, error)
	readyPath string
	forwards  bool // false: the appliance without remote_write (its baseline)
}

type result struct {
	c                   contender
	sent                int64
	window              time.Duration
	cpu                 time.Duration
	peakRSS             uint64
	drainSamples        int64
	drainTook, drainCPU time.Duration
	drainSkipped        bool
}

func bench(ctx context.Context, o options) error {
	run, err := harness.NewRunDir(".", "remotewrite", time.Now())
	if err != nil {
		return err
	}
	root, err := harness.ModuleRoot(".")
	if err != nil {
		return err
	}
	binDir := filepath.Join(root, "bench", ".bin")
	appliance := func(forwards bool) contender {
		name := "appliance"
		if !forwards {
			name = "appliance-no-rw"
		}
		return contender{
			name: name, title: name, forwards: forwards, readyPath: "/-/ready",
			build: harness.Appliance.Build,
			args: func(scrapeCfg, data, addr, rwURL string) ([]string, error) {
				b, err := os.ReadFile(scrapeCfg)
				if err != nil {
					return nil, err
				}
				cfg := string(b) + "autodetect: {enabled: false}\ncollectors: {enabled: false}\n"
				if forwards {
					cfg += fmt.Sprintf("remote_write:\n  - url: %s\n    name: bench\n    max_disk_bytes: 4GiB\n", rwURL)
				}
				path := filepath.Join(filepath.Dir(data), name+".yml")
				if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
					return nil, err
				}
				return []string{"run", "--config", path, "--data", data, "--listen", addr}, nil
			},
		}
	}
	contenders := []contender{
		{
			name: "vmagent", title: "vmagent " + harness.VictoriaMetricsVersion, forwards: true, readyPath: "/health",
			build: func(ctx context.Context, _, binDir string, log io.Writer) (string, error) {
				return harness.GoInstall(ctx, binDir, "github.com/VictoriaMetrics/VictoriaMetrics/app/vmagent", harness.VictoriaMetricsVersion, log)
			},
			args: func(scrapeCfg, data, addr, rwURL string) ([]string, error) {
				return []string{"-promscrape.config=" + scrapeCfg, "-remoteWrite.url=" + rwURL,
					"-remoteWrite.tmpDataPath=" + data, "-httpListenAddr=" + addr,
					// Prometheus' protocol (snappy protobuf), as the appliance sends.
					"-remoteWrite.forcePromProto"}, nil
			},
		},
		appliance(true),
		appliance(false),
	}
	bins := make([]string, len(contenders))
	for i, c := range contenders {
		logf, err := os.Create(filepath.Join(run.Dir, "build-"+c.name+".log"))
		if err != nil {
			return err
		}
		log.Printf("building %s", c.title)
		bins[i], err = c.build(ctx, root, binDir, logf)
		logf.Close()
		if err != nil {
			return fmt.Errorf("build %s: %w", c.name, err)
		}
	}

	// The fleet: demo vLLM-like servers, sized on a probe of a few.
	fo := demo.DefaultFleetOptions()
	fo.Host, fo.BasePort, fo.Seed = "127.0.0.1", 0, o.seed
	fo.Instances = 5
	probe, err := harness.StartFleet(ctx, fo)
	if err != nil {
		return err
	}
	perInstance := 0
	if err = harness.Sleep(ctx, 15*time.Second); err == nil {
		perInstance, err = harness.SeriesPerScrape(ctx, &http.Client{Timeout: 30 * time.Second}, probe.Targets())
	}
	if stopErr := probe.Stop(); err == nil {
		err = stopErr
	}
	if err != nil || perInstance == 0 {
		return fmt.Errorf("size the fleet: %d series, %v", perInstance, err)
	}
	fo.Instances = max(1, o.series*5/perInstance)
	fleet, err := harness.StartFleet(ctx, fo)
	if err != nil {
		return err
	}
	defer fleet.Stop()
	var targets []string
	for _, t := range fleet.Targets() {
		targets = append(targets, fmt.Sprintf("%q", strings.TrimPrefix(t, "http://")))
	}
	scrapeCfg := filepath.Join(run.Dir, "scrape.yml")
	if err := os.WriteFile(scrapeCfg, []byte(fmt.Sprintf("global: {scrape_interval: %s, scrape_timeout: %s}\nscrape_configs:\n  - job_name: fleet\n    static_configs: [{targets: [%s]}]\n",
		o.interval, min(o.interval, 10*time.Second), strings.Join(targets, ", "))), 0o644); err != nil {
		return err
	}
	n, err := harness.SeriesPerScrape(ctx, &http.Client{Timeout: 30 * time.Second}, fleet.Targets())
	if err != nil {
		return err
	}
	log.Printf("fleet: %d instances, %d series", fo.Instances, n)

	recv := &receiver{samples: map[string]int64{}, newest: map[string]int64{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	var results []result
	for i, c := range contenders {
		r, err := measure(ctx, o, c, bins[i], run.Dir, scrapeCfg, "http://"+ln.Addr().String()+"/"+c.name, recv)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		results = append(results, r)
	}
	return run.WriteReport(os.Stdout, report(o, n, results))
}

func measure(ctx context.Context, o options, c contender, bin, runDir, scrapeCfg, rwURL string, recv *receiver) (result, error) {
	res := result{c: c}
	data := filepath.Join(runDir, c.name+"-data")
	if err := harness.FreshDir(data); err != nil {
		return res, err
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		return res, err
	}
	args, err := c.args(scrapeCfg, data, addr, rwURL)
	if err != nil {
		return res, err
	}
	log.Printf("%s: starting", c.name)
	p, err := harness.Start(c.name, bin, args, filepath.Join(runDir, c.name+".log"))
	if err != nil {
		return res, err
	}
	defer p.Stop(30 * time.Second)
	if err := harness.WaitHTTP(ctx, &http.Client{Timeout: 5 * time.Second}, "http://"+addr+c.readyPath, p.Exited()); err != nil {
		return res, err
	}
	path := "/" + c.name
	if err := p.Sleep(ctx, o.warmup); err != nil {
		return res, err
	}
	s0, _ := recv.read(path)
	st0, err := harness.ReadProcStats(p.Pid())
	if err != nil {
		return res, err
	}
	begin := time.Now()
	log.Printf("%s: measuring %s", c.name, o.duration)
	if err := p.Sleep(ctx, o.duration); err != nil {
		return res, err
	}
	s1, _ := recv.read(path)
	st1, err := harness.ReadProcStats(p.Pid())
	if err != nil {
		return res, err
	}
	res.window = time.Since(begin)
	res.sent, res.cpu, res.peakRSS = s1-s0, st1.CPU-st0.CPU, st1.PeakRSS
	if !c.forwards || o.outage <= 0 {
		res.drainSkipped = true
		return res, nil
	}
	// The backlog: the receiver is down for the outage, then the drain
	// is timed until the sender has sent what was scraped at its end.
	log.Printf("%s: receiver down for %s", c.name, o.outage)
	recv.down.Store(true)
	if err := p.Sleep(ctx, o.outage); err != nil {
		return res, err
	}
	d0, _ := recv.read(path)
	cpu0, err := harness.ReadProcStats(p.Pid())
	if err != nil {
		return res, err
	}
	upAt := time.Now()
	recv.down.Store(false)
	for {
		if err := p.Sleep(ctx, 200*time.Millisecond); err != nil {
			return res, err
		}
		if _, newest := recv.read(path); newest >= upAt.UnixMilli() {
			break
		}
		if time.Since(upAt) > 10*o.outage+time.Minute {
			return res, errors.New("the backlog did not drain")
		}
	}
	d1, _ := recv.read(path)
	cpu1, err := harness.ReadProcStats(p.Pid())
	if err != nil {
		return res, err
	}
	res.drainSamples, res.drainTook, res.drainCPU = d1-d0, time.Since(upAt), cpu1.CPU-cpu0.CPU
	return res, nil
}

func report(o options, series int, rs []result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Remote write: the appliance against vmagent\n\n")
	fmt.Fprintf(&b, "%s; fleet %d series scraped every %s; warm-up %s, window %s, outage %s. Load average at the end: %s.\n\n",
		harness.ReadMachine(), series, o.interval, o.warmup, o.duration, o.outage, harness.LoadAverage())
	var base0 result
	for _, r := range rs {
		if !r.c.forwards {
			base0 = r
		}
	}
	var t harness.Table
	t.Header = []string{"system", "samples sent/s (steady)", "CPU s per 1M samples sent", "peak RSS", "backlog drain samples/s", "drain CPU s per 1M", "drain CPU s per 1M less storing"}
	perM := map[string]float64{}
	for _, r := range rs {
		sentPS := float64(r.sent) / r.window.Seconds()
		cpuPerM := 0.0
		if r.sent > 0 {
			cpuPerM = r.cpu.Seconds() / float64(r.sent) * 1e6
		}
		perM[r.c.name] = cpuPerM
		drain, drainCPU, drainLess := "-", "-", "-"
		if !r.drainSkipped && r.drainTook > 0 && r.drainSamples > 0 {
			drain = fmt.Sprintf("%.0f", float64(r.drainSamples)/r.drainTook.Seconds())
			drainCPU = fmt.Sprintf("%.2f", r.drainCPU.Seconds()/float64(r.drainSamples)*1e6)
			drainLess = drainCPU
			if r.c.name == "appliance" && base0.window > 0 {
				// What the appliance spends without remote write over as long.
				less := r.drainCPU.Seconds() - base0.cpu.Seconds()/base0.window.Seconds()*r.drainTook.Seconds()
				drainLess = fmt.Sprintf("%.2f", less/float64(r.drainSamples)*1e6)
			}
		}
		cpuCell := fmt.Sprintf("%.2f", cpuPerM)
		if !r.c.forwards {
			sentPS = 0
			cpuCell = fmt.Sprintf("(%.1f CPU s in the window, no remote write)", r.cpu.Seconds())
		}
		t.AddRow(r.c.title, fmt.Sprintf("%.0f", sentPS), cpuCell, harness.Bytes(float64(r.peakRSS)), drain, drainCPU, drainLess)
	}
	b.WriteString(t.Markdown())
	var app, base, vma result
	for _, r := range rs {
		switch r.c.name {
		case "appliance":
			app = r
		case "appliance-no-rw":
			base = r
		case "vmagent":
			vma = r
		}
	}
	if vma.sent > 0 && app.sent > 0 {
		fmt.Fprintf(&b, "\nCPU per sample sent, appliance / vmagent: **%.2f×** (the appliance also stores every sample; vmagent only forwards).\n", perM["appliance"]/perM["vmagent"])
		if base.window > 0 {
			marginal := (app.cpu.Seconds()/app.window.Seconds() - base.cpu.Seconds()/base.window.Seconds()) * app.window.Seconds() / float64(app.sent) * 1e6
			fmt.Fprintf(&b, "Remote write's own cost in the appliance (with minus without remote_write, same fleet): %.2f CPU s per 1M samples, **%.2f×** vmagent's whole cost per sample.\n", marginal, marginal/perM["vmagent"])
		}
	}
	fmt.Fprintf(&b, "\nThe drain is timed from the receiver's return until it has a sample scraped after it; both senders were backing off when it returned (the appliance up to max_backoff 5s, its default), so drain samples/s includes that wait. \"Less storing\" takes off the CPU the appliance without remote_write spends over as long (scraping and storing).\n")
	fmt.Fprintf(&b, "\nCommand: `go run ./bench/remotewrite -series %d -interval %s -warmup %s -duration %s -outage %s`\n", o.series, o.interval, o.warmup, o.duration, o.outage)
	return b.String()
}
