package main

// The small-box run (-small-box): one GPU box as a user runs it. The
// appliance scrapes the vLLM servers and the DCGM exporter, reads the host
// itself (collectors), probes every vLLM server and evaluates the rule
// packs, alerting to a webhook. The stack a user would run instead does
// the same with four programs: Prometheus (the same targets, node_exporter
// and blackbox_exporter's probes, the same packs compiled to PromQL),
// Alertmanager, blackbox_exporter and node_exporter. The report gives the
// appliance's peak RSS and CPU beside Prometheus' alone and beside the
// stack's total.

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/demo"
	"github.com/aiserve/appliance/rules"
)

const (
	// smallBoxInterval is the scrape, evaluation and probe interval: the
	// appliance's default.
	smallBoxInterval = 15 * time.Second
	// smallBoxInstances × smallBoxModels vLLM servers, about 700 series
	// each, with the DCGM exporter and the host: about 3,000 series.
	smallBoxInstances = 3
	smallBoxModels    = 2
	// smallBoxProfile is the appliance's CPU profile after its window.
	smallBoxProfile = 45 * time.Second
)

// smallBoxPacks are the rule packs both sides evaluate.
var smallBoxPacks = []string{"vllm", "targets", "gpu", "probes"}

// proc is one measured process of a side.
type proc struct {
	name           string
	cpu            time.Duration // in the window
	peakRSS        uint64        // VmHWM at the end
	rss            uint64        // VmRSS at the end
	rssAnon        uint64        // RssAnon at the end: heap, stacks, the runtime's own
	rssFile        uint64        // RssFile at the end: mostly the program's own binary, paged in
	seriesInMemory float64       // the process's own head/active series count, 0 where none
}

// side is the appliance or the stack, with its processes.
type side struct {
	title  string
	window time.Duration
	procs  []proc
	err    error
}

func (s *side) total() (cpu time.Duration, rss, end uint64) {
	for _, p := range s.procs {
		cpu += p.cpu
		rss += p.peakRSS
		end += p.rss
	}
	return cpu, rss, end
}

// runSmallBox builds everything, then measures the appliance and the stack
// one after another, each against a fresh fleet, and writes the report.
func runSmallBox(ctx context.Context, o options) error {
	run, err := harness.NewRunDir(".", "smallbox", time.Now())
	if err != nil {
		return err
	}
	load0 := harness.LoadAverage()
	logf := func(name string) (*os.File, error) { return os.Create(filepath.Join(run.Dir, "build-"+name+".log")) }
	bins := map[string]string{}
	for _, sys := range []harness.System{harness.Appliance, harness.Prometheus, harness.Alertmanager, harness.BlackboxExporter, harness.NodeExporter} {
		f, err := logf(sys.Name)
		if err != nil {
			return err
		}
		log.Printf("building %s", sys.Title)
		bin, err := sys.Build(ctx, run.Root, run.BinDir, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("build %s (log in %s): %w", sys.Name, run.Dir, err)
		}
		bins[sys.Name] = bin
	}
	dcgm, err := os.ReadFile(filepath.Join(run.Root, "testdata", "dcgm-exporter.prom"))
	if err != nil {
		return fmt.Errorf("read the DCGM fixture: %w", err)
	}

	// -only picks the sides: appliance, and prometheus for the stack.
	var names []string
	for _, sys := range o.only {
		switch sys.Name {
		case harness.Appliance.Name:
			names = append(names, "appliance")
		case harness.Prometheus.Name:
			names = append(names, "stack")
		}
	}
	var sides []*side
	for _, name := range names {
		s := measureSide(ctx, name, bins, dcgm, run.Dir, o)
		if s.err != nil {
			log.Printf("%s: %v", name, s.err)
		}
		sides = append(sides, s)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	text := smallBoxReport(sides, o, run.Started, load0, harness.LoadAverage())
	if err := run.WriteReport(os.Stdout, text); err != nil {
		return err
	}
	for _, s := range sides {
		if s.err != nil {
			return harness.ErrSomeFailed
		}
	}
	return nil
}

// measureSide starts one side's programs, waits for the warm-up, measures
// the window and stops them.
func measureSide(ctx context.Context, name string, bins map[string]string, dcgm []byte, runDir string, o options) *side {
	s := &side{title: name}
	s.err = measureSideInto(ctx, s, bins, dcgm, runDir, o)
	return s
}

type launched struct {
	name string
	srv  *harness.Server
}

func measureSideInto(ctx context.Context, s *side, bins map[string]string, dcgm []byte, runDir string, o options) (err error) {
	client := &http.Client{Timeout: time.Minute}
	fopts := demo.DefaultFleetOptions()
	fopts.Host, fopts.BasePort = "127.0.0.1", 0
	fopts.Instances, fopts.Models, fopts.Seed = smallBoxInstances, modelNames(smallBoxModels), o.seed
	fleet, err := harness.StartFleet(ctx, fopts)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := fleet.Stop(); err == nil {
			err = stopErr
		}
	}()
	// The DCGM exporter (one GPU, the fixture) and a webhook that takes
	// the alerts, both served from here.
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(dcgm)
	})
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the DCGM exporter: %w", err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	helper := ln.Addr().String()
	hook := "http://" + helper + "/hook"

	dir := filepath.Join(runDir, s.title)
	if err := harness.FreshDir(dir); err != nil {
		return err
	}
	var procs []launched
	defer func() {
		// Stop in reverse order of start. The exporters do not catch
		// SIGTERM and exit by it: logged, not a failure.
		for i := len(procs) - 1; i >= 0; i-- {
			if stopErr := procs[i].srv.Stop(harness.StopGrace); stopErr != nil {
				log.Printf("%s: %s: stop: %v", s.title, procs[i].name, stopErr)
			}
		}
	}()
	launch := func(sys harness.System, config string) (*harness.Server, error) {
		data := filepath.Join(dir, sys.Name+"-data")
		if err := harness.FreshDir(data); err != nil {
			return nil, err
		}
		srv, err := harness.Launch(ctx, client, sys, bins[sys.Name], config, data, filepath.Join(dir, sys.Name+".log"), 0)
		if err != nil {
			return nil, err
		}
		procs = append(procs, launched{sys.Name, srv})
		return srv, nil
	}
	write := func(name, body string) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, []byte(body), 0o644)
	}
	vllm := fleet.Targets()
	global := fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: 10s\n  evaluation_interval: %s\n", smallBoxInterval, smallBoxInterval)
	jobs := "scrape_configs:\n" + job("vllm", vllm) + job("dcgm", []string{helper})

	if s.title == "appliance" {
		var probes strings.Builder
		probes.WriteString("probes:\n")
		for i, t := range vllm {
			fmt.Fprintf(&probes, "  - {name: vllm-%d, kind: http, url: \"http://%s/health\", interval: %s}\n", i, t, smallBoxInterval)
		}
		cfg, err := write("appliance.yml", global+jobs+probes.String()+
			"rule_packs: ["+strings.Join(smallBoxPacks, ", ")+"]\n"+
			"autodetect: {enabled: false}\n"+
			fmt.Sprintf("alerting:\n  route: {receiver: hook}\n  receivers:\n    - name: hook\n      webhook_configs: [{url: %q}]\n", hook))
		if err != nil {
			return err
		}
		if _, err := launch(harness.Appliance, cfg); err != nil {
			return err
		}
	} else {
		ne, err := launch(harness.NodeExporter, "")
		if err != nil {
			return err
		}
		bbCfg, err := write("blackbox.yml", "modules:\n  http_2xx:\n    prober: http\n    timeout: 10s\n")
		if err != nil {
			return err
		}
		bb, err := launch(harness.BlackboxExporter, bbCfg)
		if err != nil {
			return err
		}
		amCfg, err := write("alertmanager.yml", fmt.Sprintf("route: {receiver: hook}\nreceivers:\n  - name: hook\n    webhook_configs: [{url: %q}]\n", hook))
		if err != nil {
			return err
		}
		am, err := launch(harness.Alertmanager, amCfg)
		if err != nil {
			return err
		}
		packRules, err := rules.PrometheusRuleFile(nil, smallBoxPacks)
		if err != nil {
			return fmt.Errorf("compile the rule packs for Prometheus: %w", err)
		}
		if _, err := write("packs.rules.yml", string(packRules)); err != nil {
			return err
		}
		probeTargets := make([]string, len(vllm))
		for i, t := range vllm {
			probeTargets[i] = "http://" + t + "/health"
		}
		promCfg, err := write("prometheus.yml", global+jobs+job("node", []string{ne.Addr})+
			job("blackbox", probeTargets)+
			fmt.Sprintf("    metrics_path: /probe\n    params: {module: [http_2xx]}\n    relabel_configs:\n"+
				"      - {source_labels: [__address__], target_label: __param_target}\n"+
				"      - {source_labels: [__param_target], target_label: instance}\n"+
				"      - {target_label: __address__, replacement: %q}\n", bb.Addr)+
			"rule_files: [packs.rules.yml]\n"+
			fmt.Sprintf("alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", am.Addr))
		if err != nil {
			return err
		}
		if _, err := launch(harness.Prometheus, promCfg); err != nil {
			return err
		}
	}

	log.Printf("%s: warming up for %s", s.title, o.warmup)
	if err := harness.Sleep(ctx, o.warmup); err != nil {
		return err
	}
	stats0 := make([]harness.ProcStats, len(procs))
	for i, p := range procs {
		if stats0[i], err = readAlive(p.srv); err != nil {
			return err
		}
	}
	t0 := time.Now()
	log.Printf("%s: measuring for %s", s.title, o.duration)
	if err := harness.Sleep(ctx, o.duration); err != nil {
		return err
	}
	s.window = time.Since(t0)
	for i, p := range procs {
		st, err := readAlive(p.srv)
		if err != nil {
			return err
		}
		pr := proc{name: p.name, cpu: st.CPU - stats0[i].CPU, peakRSS: st.PeakRSS, rss: st.RSS}
		if pr.rssAnon, pr.rssFile, err = readRSSSplit(p.srv.Pid()); err != nil {
			return err
		}
		switch p.name {
		case harness.Appliance.Name:
			pr.seriesInMemory, _ = harness.SumMetric(ctx, client, p.srv.URL+"/metrics", "appliance_storage_active_series")
			if err := saveProfile(ctx, client, p.srv.URL+"/debug/pprof/heap", filepath.Join(dir, "appliance.heap.pprof")); err != nil {
				log.Printf("appliance: heap profile: %v", err)
			}
			// The Go runtime's own figures (go_memstats_*, go_gc_*): what
			// of the RSS is heap, stacks, and what the collector aims for.
			if err := saveProfile(ctx, client, p.srv.URL+"/metrics", filepath.Join(dir, "appliance.metrics.txt")); err != nil {
				log.Printf("appliance: metrics: %v", err)
			}
			// After the window, so that profiling is not in its CPU.
			defer func() {
				log.Printf("appliance: CPU profile for %s", smallBoxProfile)
				if err := saveProfile(ctx, client, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.srv.URL, int(smallBoxProfile.Seconds())),
					filepath.Join(dir, "appliance.cpu.pprof")); err != nil {
					log.Printf("appliance: CPU profile: %v", err)
				}
			}()
		case harness.Prometheus.Name:
			pr.seriesInMemory, _ = harness.SumMetric(ctx, client, p.srv.URL+"/metrics", "prometheus_tsdb_head_series")
		}
		s.procs = append(s.procs, pr)
		log.Printf("%s: %s: %.2f CPU s in %s, peak RSS %s", s.title, p.name, pr.cpu.Seconds(), s.window.Round(time.Second), harness.Bytes(float64(pr.peakRSS)))
	}
	return nil
}

func readAlive(srv *harness.Server) (harness.ProcStats, error) {
	if err := srv.Alive(); err != nil {
		return harness.ProcStats{}, err
	}
	return harness.ReadProcStats(srv.Pid())
}

// saveProfile writes a /debug/pprof answer to path, for `go tool pprof`
// (where the memory and the CPU go).
func saveProfile(ctx context.Context, client *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// job is a scrape job with static targets in Prometheus' syntax.
func job(name string, targets []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - job_name: %s\n    static_configs:\n      - targets:\n", name)
	for _, t := range targets {
		fmt.Fprintf(&b, "          - %q\n", t)
	}
	return b.String()
}

func smallBoxReport(sides []*side, o options, started time.Time, load0, load1 string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Small box, %s\n\n", started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "One GPU box: %d simulated vLLM servers × %d models, the DCGM exporter fixture (one GPU), the host; "+
		"scrape, rules and probes every %s; rule packs %s. %s warm-up, then a %s window per side. "+
		"Load average (1m 5m 15m): %s at the start, %s at the end. Machine: %s. %s.\n\n",
		smallBoxInstances, smallBoxModels, smallBoxInterval, strings.Join(smallBoxPacks, ", "), o.warmup, o.duration,
		load0, load1, harness.ReadMachine(), runtimeEnv())
	t := harness.Table{Header: []string{"process", "peak RSS", "RSS at the end", "of which anon + file", "CPU (share of one core)", "series in memory"}}
	var appRSS, promRSS, stackRSS uint64
	var appCPU, promCPU, stackCPU float64
	for _, s := range sides {
		if s.window <= 0 {
			t.AddRow(s.title+": "+errText(s.err), "–", "–", "–", "–", "–")
			continue
		}
		for _, p := range s.procs {
			share := p.cpu.Seconds() / s.window.Seconds()
			series := "–"
			if p.seriesInMemory > 0 {
				series = fmt.Sprintf("%.0f", p.seriesInMemory)
			}
			t.AddRow(p.name, harness.Bytes(float64(p.peakRSS)), harness.Bytes(float64(p.rss)), rssSplit(p.rssAnon, p.rssFile), fmt.Sprintf("%.2f %%", 100*share), series)
			switch p.name {
			case harness.Appliance.Name:
				appRSS, appCPU = p.peakRSS, share
			case harness.Prometheus.Name:
				promRSS, promCPU = p.peakRSS, share
			}
		}
		if s.title == "stack" {
			cpu, rss, end := s.total()
			var anon, file uint64
			for _, p := range s.procs {
				anon, file = anon+p.rssAnon, file+p.rssFile
			}
			stackRSS, stackCPU = rss, cpu.Seconds()/s.window.Seconds()
			t.AddRow("**stack total**", harness.Bytes(float64(rss)), harness.Bytes(float64(end)), rssSplit(anon, file), fmt.Sprintf("%.2f %%", 100*stackCPU), "")
		}
	}
	b.WriteString(t.Markdown())
	if appRSS > 0 && promRSS > 0 {
		fmt.Fprintf(&b, "\nappliance ÷ Prometheus alone: peak RSS %.2f×, CPU %.2f×. appliance ÷ stack total: peak RSS %.2f×, CPU %.2f×. "+
			"Goal: peak RSS ≤ 100 MiB (%s), CPU ≤ Prometheus alone (%s).\n",
			float64(appRSS)/float64(promRSS), appCPU/promCPU, float64(appRSS)/float64(stackRSS), appCPU/stackCPU,
			yesNo(appRSS <= 100<<20), yesNo(appCPU <= promCPU))
	}
	for _, s := range sides {
		if s.err != nil {
			fmt.Fprintf(&b, "\n%s: %v\n", s.title, s.err)
		}
	}
	b.WriteString("\nPeak RSS is VmHWM at the end of the window; RSS at the end is VmRSS, split into RssAnon (heap, stacks, the Go runtime) " +
		"and RssFile (file-backed pages: mostly the program's own binary, paged in as it runs); CPU is utime+stime over the window. " +
		"The appliance's heap profile at the end of the window and a CPU profile of the next " + smallBoxProfile.String() +
		" are `appliance/appliance.heap.pprof` and `appliance/appliance.cpu.pprof` in the run dir, " +
		"its `/metrics` at the end of the window (the Go runtime's memory figures) `appliance/appliance.metrics.txt`.\n")
	return b.String()
}

// runtimeEnv names the Go runtime settings every measured program
// inherits from the benchmark's environment: GOMAXPROCS (a bigger box is
// modelled with GOMAXPROCS=16; VictoriaMetrics sizes buffers by it), and
// GOGC and GOMEMLIMIT where set.
func runtimeEnv() string {
	s := fmt.Sprintf("GOMAXPROCS %d", runtime.GOMAXPROCS(0))
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		s += " ($GOMAXPROCS)"
	}
	for _, name := range []string{"GOGC", "GOMEMLIMIT"} {
		if v := os.Getenv(name); v != "" {
			s += fmt.Sprintf(", %s=%s", name, v)
		}
	}
	return s
}

// readRSSSplit reads RssAnon and RssFile from /proc/<pid>/status, in bytes.
func readRSSSplit(pid int) (anon, file uint64, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	return parseRSSSplit(status)
}

// parseRSSSplit returns RssAnon and RssFile, in bytes, from the contents
// of /proc/<pid>/status.
func parseRSSSplit(status []byte) (anon, file uint64, err error) {
	var seen int
	for line := range strings.Lines(string(status)) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || (name != "RssAnon" && name != "RssFile") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse %s in /proc status: %w", name, err)
		}
		if name == "RssAnon" {
			anon = kb << 10
		} else {
			file = kb << 10
		}
		seen++
	}
	if seen != 2 {
		return 0, 0, fmt.Errorf("/proc status has no RssAnon and RssFile")
	}
	return anon, file, nil
}

// rssSplit is "anon + file" for the table.
func rssSplit(anon, file uint64) string {
	return harness.Bytes(float64(anon)) + " + " + harness.Bytes(float64(file))
}

func errText(err error) string {
	if err == nil {
		return "not measured"
	}
	return err.Error()
}

func yesNo(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
