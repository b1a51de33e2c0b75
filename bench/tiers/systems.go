package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/bench/history"
)

// bins are the binaries a system needs.
type bins struct {
	main     string
	promtool string // Prometheus only
}

// system is one system under test and how it is backfilled.
type system struct {
	name  string // as in -only
	title string
	build func(ctx context.Context, root, binDir string, log io.Writer) (bins, error)
	// args returns the command line for a data dir and listen address;
	// outDir holds its config file.
	args      func(b bins, dataDir, outDir, addr string) ([]string, error)
	readyPath string
	// queryParams are added to every timed query_range request.
	queryParams url.Values
	// preload fills the data dir before the system starts (Prometheus).
	preload func(ctx context.Context, b bins, cfg history.Config, o options, dataDir, outDir string) (string, error)
	// load backfills through the running system's HTTP API.
	load func(ctx context.Context, base string, cfg history.Config, o options) (string, error)
	// settle waits until background work on the data is done.
	settle func(ctx context.Context, base, logPath string, o options) (string, error)
}

var systems = []system{
	{
		name:  "appliance",
		title: "appliance",
		build: func(ctx context.Context, root, binDir string, log io.Writer) (bins, error) {
			// Not bench/.bin/appliance: bench/ingest rebuilds that one.
			bin := filepath.Join(binDir, "appliance-tiers")
			return bins{main: bin}, harness.GoBuild(ctx, root, "./cmd/appliance", bin, log)
		},
		args: func(_ bins, dataDir, outDir, addr string) ([]string, error) {
			cfg := filepath.Join(outDir, "appliance.yml")
			body := "storage:\n  retention: {raw: 7d, 1m: 30d, 5m: 90d}\nweb:\n  max_request_body_bytes: 256MiB\n"
			if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
				return nil, err
			}
			return []string{"run", "--config", cfg, "--data", dataDir, "--listen", addr}, nil
		},
		readyPath: "/-/ready",
		// Repeats of a query are timed from storage, not from its
		// query_range result cache (ui/rangecache), which leaves
		// requests with a parameter it does not know to the engine; as
		// VictoriaMetrics' -search.disableCache below.
		queryParams: url.Values{"nocache": {"1"}},
		load: func(ctx context.Context, base string, cfg history.Config, o options) (string, error) {
			return importAll(ctx, base+"/api/v1/import/prometheus", cfg, o.batchSamples)
		},
		settle: settleAppliance,
	},
	{
		name:  "victoriametrics",
		title: harness.VictoriaMetrics.Title,
		build: func(ctx context.Context, root, binDir string, log io.Writer) (bins, error) {
			bin, err := harness.VictoriaMetrics.Build(ctx, root, binDir, log)
			return bins{main: bin}, err
		},
		args: func(_ bins, dataDir, _, addr string) ([]string, error) {
			return []string{
				"-storageDataPath=" + dataDir,
				"-httpListenAddr=" + addr,
				"-retentionPeriod=100d",
				// Repeats of a query are timed from storage, not from
				// its rollup result cache (the others have none).
				"-search.disableCache",
			}, nil
		},
		readyPath: "/health",
		load: func(ctx context.Context, base string, cfg history.Config, o options) (string, error) {
			return importAll(ctx, base+"/api/v1/import/prometheus", cfg, o.batchSamples)
		},
		settle: settleVictoriaMetrics,
	},
	{
		name:  "prometheus",
		title: harness.Prometheus.Title,
		build: func(ctx context.Context, root, binDir string, log io.Writer) (bins, error) {
			bin, err := harness.Prometheus.Build(ctx, root, binDir, log)
			if err != nil {
				return bins{}, err
			}
			tool, err := harness.GoInstall(ctx, binDir, "github.com/prometheus/prometheus/cmd/promtool", harness.PrometheusVersion, log)
			return bins{main: bin, promtool: tool}, err
		},
		args: func(_ bins, dataDir, outDir, addr string) ([]string, error) {
			cfg := filepath.Join(outDir, "prometheus.yml")
			if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 15s\n"), 0o644); err != nil {
				return nil, err
			}
			return []string{
				"--config.file=" + cfg,
				"--storage.tsdb.path=" + dataDir,
				"--storage.tsdb.retention.time=100d",
				"--web.listen-address=" + addr,
			}, nil
		},
		readyPath: "/-/ready",
		preload:   promtoolBackfill,
	},
}

func systemByName(name string) (system, bool) {
	for _, s := range systems {
		if s.name == name {
			return s, true
		}
	}
	return system{}, false
}

var client = &http.Client{Timeout: 10 * time.Minute}

// runSystem backfills one system on a fresh data dir, lets it settle, times
// the queries, stops it and measures its data dir.
func runSystem(ctx context.Context, sys system, b bins, cfg history.Config, o options, outDir string) (*sysResult, error) {
	res := &sysResult{title: sys.title, queries: map[string]*queryResult{}}
	dataDir := filepath.Join(outDir, sys.name+"-data")
	if o.reuse != "" {
		// The data of an earlier run: no backfill, no settling; a
		// system without its data dir there is backfilled into it.
		dataDir = filepath.Join(o.reuse, sys.name+"-data")
		if _, err := os.Stat(dataDir); err == nil {
			sys.preload, sys.load, sys.settle = nil, nil, nil
		} else if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, err
		}
	} else {
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, err
		}
		if !o.keepData {
			defer os.RemoveAll(dataDir)
		}
	}
	phase := func(name string, t0 time.Time, note string) {
		d := time.Since(t0).Round(100 * time.Millisecond)
		res.phases = append(res.phases, phaseTime{name: name, d: d, note: note})
		log.Printf("%s: %s took %s %s", sys.title, name, d, note)
	}

	if sys.preload != nil {
		t0 := time.Now()
		log.Printf("%s: backfill into %s", sys.title, dataDir)
		note, err := sys.preload(ctx, b, cfg, o, dataDir, outDir)
		if err != nil {
			return nil, fmt.Errorf("backfill: %w", err)
		}
		phase("backfill", t0, note)
	}

	addr, err := harness.FreeAddr()
	if err != nil {
		return nil, err
	}
	args, err := sys.args(b, dataDir, outDir, addr)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(outDir, sys.name+".log")
	t0 := time.Now()
	p, err := harness.Start(sys.name, b.main, args, logPath)
	if err != nil {
		return nil, err
	}
	defer p.Kill()
	base := "http://" + addr
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err = harness.WaitHTTP(wctx, client, base+sys.readyPath, p.Exited())
	cancel()
	if err != nil {
		return nil, err
	}
	phase("start", t0, "")

	if sys.load != nil {
		t0 := time.Now()
		log.Printf("%s: backfill through %s", sys.title, base)
		note, err := sys.load(ctx, base, cfg, o)
		if err != nil {
			return nil, fmt.Errorf("backfill: %w", err)
		}
		phase("backfill", t0, note)
	}
	if sys.settle != nil {
		t0 := time.Now()
		note, err := sys.settle(ctx, base, logPath, o)
		if err != nil {
			return nil, fmt.Errorf("settle: %w", err)
		}
		phase("settle", t0, note)
	}

	t0 = time.Now()
	for _, q := range benchQueries {
		for _, rng := range queryRanges(o.days) {
			key := queryKey(q.name, rng)
			qr := &queryResult{}
			res.queries[key] = qr
			start, end, step := queryWindow(cfg.End, rng)
			for range o.warm {
				if _, err := timeQuery(ctx, base, q.expr, start, end, step, sys.queryParams); err != nil {
					return nil, fmt.Errorf("query %s over %s: %w", q.name, rangeName(rng), err)
				}
			}
			for i := 0; i < o.queries; i++ {
				r, err := timeQuery(ctx, base, q.expr, start, end, step, sys.queryParams)
				if err != nil {
					return nil, fmt.Errorf("query %s over %s: %w", q.name, rangeName(rng), err)
				}
				qr.latencies = append(qr.latencies, r.latency)
				qr.series, qr.points, qr.mean, qr.tiers = r.series, r.points, r.mean, r.tiers
			}
			log.Printf("%s: %s over %s (step %s): median %s of %v; %d series, %d points, mean %.4g%s",
				sys.title, q.name, rangeName(rng), step, harness.Median(qr.latencies), qr.latencies, qr.series, qr.points, qr.mean, tiersNote(qr.tiers))
		}
	}
	res.queryLoad = harness.LoadAverage()
	phase("queries", t0, "load average "+res.queryLoad)

	if sys.name == "appliance" {
		res.tierStats, _ = applianceTiers(ctx, base)
	}
	t0 = time.Now()
	if err := p.Stop(harness.StopGrace); err != nil {
		log.Printf("%s: stop: %v", sys.title, err)
	}
	phase("stop", t0, "")
	du, err := harness.DirUsage(dataDir)
	if err != nil {
		return nil, err
	}
	res.disk = du
	if res.caches, err = vmCacheUsage(dataDir); err != nil {
		return nil, err
	}
	log.Printf("%s: data dir %s (%d files; VictoriaMetrics caches %s)", sys.title, harness.Bytes(float64(du.Allocated)), du.Files, harness.Bytes(float64(res.caches)))
	return res, nil
}

// vmCacheUsage adds up the VictoriaMetrics cache directories under a data
// dir (VictoriaMetrics' own `cache`, the appliance's `tsdb/<tier>/cache`):
// lookup caches saved at a graceful stop and rebuilt when missing.
func vmCacheUsage(dataDir string) (int64, error) {
	var total int64
	for _, pattern := range []string{"cache", "tsdb/*/cache"} {
		dirs, err := filepath.Glob(filepath.Join(dataDir, pattern))
		if err != nil {
			return 0, err
		}
		for _, d := range dirs {
			u, err := harness.DirUsage(d)
			if err != nil {
				return 0, err
			}
			total += u.Allocated
		}
	}
	return total, nil
}

func tiersNote(t string) string {
	if t == "" {
		return ""
	}
	return "; tiers " + t
}

// importAll streams the generated data to a Prometheus text import
// endpoint in time order, in batches of whole 5-minute windows of every
// series (as storage's doc asks for the appliance), generating the next
// batch while the previous one is sent.
func importAll(ctx context.Context, url string, cfg history.Config, batchSamples int) (string, error) {
	g := history.New(cfg)
	perWindow := int((5 * time.Minute) / cfg.Interval)
	stepsPerBatch := perWindow * max(1, batchSamples/(g.NumSeries()*perWindow))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bodies := make(chan []byte, 2)
	go func() {
		defer close(bodies)
		for {
			buf := make([]byte, 0, 1<<20)
			buf = append(buf, history.TypeLines...)
			n := 0
			for ; n < stepsPerBatch; n++ {
				t, ok := g.Next()
				if !ok {
					break
				}
				buf = g.AppendStep(buf, t, history.FormatPrometheus)
			}
			if n == 0 {
				return
			}
			select {
			case bodies <- buf:
			case <-ctx.Done():
				return
			}
		}
	}()
	var requests, bytesSent int64
	for body := range bodies {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "text/plain; version=0.0.4")
		resp, err := client.Do(req)
		if err != nil {
			return "", fmt.Errorf("import: %w", err)
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return "", fmt.Errorf("import request %d: %s: %s", requests+1, resp.Status, msg)
		}
		requests++
		bytesSent += int64(len(body))
		if requests%100 == 0 {
			log.Printf("  imported %d requests, %s", requests, harness.Bytes(float64(bytesSent)))
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return fmt.Sprintf("(%d requests of %d samples, %s of text)", requests, stepsPerBatch*g.NumSeries(), harness.Bytes(float64(bytesSent))), nil
}

// promtoolBlock is the block length promtool writes: 162h is the longest
// range Prometheus' own compaction makes with a 100d retention (10% of it,
// rounded down to its 2h·3ⁿ ranges), so the blocks are the ones Prometheus
// would have after a long run.
const promtoolBlock = 162 * time.Hour

// promtoolBackfill writes the data as OpenMetrics, one file per 162h block
// range (aligned as promtool aligns its blocks, so each run makes exactly
// one block), and runs `promtool tsdb create-blocks-from openmetrics` on
// each while the next file is generated.
func promtoolBackfill(ctx context.Context, b bins, cfg history.Config, _ options, dataDir, outDir string) (string, error) {
	g := history.New(cfg)
	blockMs := promtoolBlock.Milliseconds()
	files := make(chan string, 1)
	errc := make(chan error, 1)
	toolLog, err := os.Create(filepath.Join(outDir, "promtool.log"))
	if err != nil {
		return "", err
	}
	defer toolLog.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for f := range files {
			cmd := exec.CommandContext(ctx, b.promtool, "tsdb", "create-blocks-from", "openmetrics",
				"--max-block-duration="+promtoolBlock.String(), "--quiet", f, dataDir)
			cmd.Stdout, cmd.Stderr = toolLog, toolLog
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			err := cmd.Run()
			os.Remove(f)
			if err != nil {
				cancel()
				errc <- fmt.Errorf("promtool on %s: %w (see %s)", f, err, toolLog.Name())
				for range files {
				}
				return
			}
		}
		errc <- nil
	}()

	var (
		nFiles    int
		bytesText int64
		cur       *os.File
		w         *bufio.Writer
		curBlock  int64 = -1
		buf       []byte
	)
	closeCur := func() error {
		if cur == nil {
			return nil
		}
		if _, err := w.WriteString("# EOF\n"); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if err := cur.Close(); err != nil {
			return err
		}
		select {
		case files <- cur.Name():
		case <-ctx.Done():
			return ctx.Err()
		}
		cur = nil
		return nil
	}
	genErr := func() error {
		for {
			t, ok := g.Next()
			if !ok {
				return closeCur()
			}
			if blk := t / blockMs; blk != curBlock {
				if err := closeCur(); err != nil {
					return err
				}
				curBlock = blk
				f, err := os.Create(filepath.Join(outDir, fmt.Sprintf("block-%d.om", blk)))
				if err != nil {
					return err
				}
				cur, w = f, bufio.NewWriterSize(f, 1<<20)
				nFiles++
				log.Printf("  writing OpenMetrics for block %d (%s)", nFiles, time.UnixMilli(blk*blockMs).UTC().Format(time.DateTime))
			}
			buf = g.AppendStep(buf[:0], t, history.FormatOpenMetrics)
			bytesText += int64(len(buf))
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	}()
	if cur != nil {
		cur.Close()
		os.Remove(cur.Name())
	}
	close(files)
	toolErr := <-errc
	if err := errors.Join(toolErr, genErr); err != nil {
		return "", err
	}
	return fmt.Sprintf("(%d promtool runs, %s of OpenMetrics, --max-block-duration=%s)", nFiles, harness.Bytes(float64(bytesText)), promtoolBlock), nil
}

// settleAppliance waits until the downsampler has caught up: the 1m and 5m
// watermarks within a few minutes of now and no rollup rows written for
// two polls in a row (a pass runs every 15 s; late samples from the import
// are rolled up again in passes after it).
func settleAppliance(ctx context.Context, base, _ string, o options) (string, error) {
	deadline := time.Now().Add(o.settle)
	var (
		lastRows float64 = -1
		stable   int
	)
	for {
		d, err := harness.ReadDownsampler(ctx, client, base)
		if err != nil {
			return "", err
		}
		if d.CaughtUp && d.Rows == lastRows {
			stable++
		} else {
			stable = 0
		}
		log.Printf("  downsampler: %s, rollup rows written %.0f", d.Lags, d.Rows)
		if stable >= 2 {
			return fmt.Sprintf("(watermarks: %s; %.0f rollup rows written by the downsampler)", d.Lags, d.Rows), nil
		}
		lastRows = d.Rows
		if time.Now().After(deadline) {
			return "", fmt.Errorf("downsampler not caught up after %s", o.settle)
		}
		if err := harness.Sleep(ctx, 20*time.Second); err != nil {
			return "", err
		}
	}
}

type tierStat struct {
	Tier       string   `json:"tier"`
	Resolution string   `json:"resolution"`
	Retention  string   `json:"retention"`
	Watermark  *string  `json:"watermark"`
	LagSeconds *float64 `json:"lagSeconds"`
	Series     uint64   `json:"series"`
	Samples    uint64   `json:"samples"`
	DiskBytes  uint64   `json:"diskBytes"`
}

func applianceTiers(ctx context.Context, base string) ([]tierStat, error) {
	var r struct {
		Status string     `json:"status"`
		Data   []tierStat `json:"data"`
	}
	if err := getJSON(ctx, base+"/api/v1/status/tiers", &r); err != nil {
		return nil, err
	}
	return r.Data, nil
}

func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}

// settleVictoriaMetrics flushes, then forces a merge of every partition and
// waits for the line VictoriaMetrics logs when it is done.
func settleVictoriaMetrics(ctx context.Context, base, logPath string, o options) (string, error) {
	for _, path := range []string{"/internal/force_flush", "/internal/force_merge"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("GET %s: %s", path, resp.Status)
		}
	}
	deadline := time.Now().Add(o.settle)
	for {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return "", err
		}
		if i := bytes.Index(b, []byte(`forced merge for partition_prefix="" has been successfully finished`)); i >= 0 {
			line, _, _ := strings.Cut(string(b[i:]), "\n")
			return "(/internal/force_flush, then /internal/force_merge: " + line + ")", nil
		}
		if bytes.Contains(b, []byte("error in forced merge")) {
			return "", fmt.Errorf("force merge failed (see %s)", logPath)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("force merge not finished after %s", o.settle)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
