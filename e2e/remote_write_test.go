package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/bench/harness"
)

// remoteMetric reads the appliance's /metrics sample name{remote_name="remote",...}.
func remoteMetric(t *testing.T, p *proc, name, remote string) float64 {
	t.Helper()
	resp, err := http.Get(p.url("/metrics"))
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, `remote_name="`+remote+`"`) {
			f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(t, err, line)
			return f
		}
	}
	require.NoError(t, sc.Err())
	return 0
}

// samplesByKey reads an /api/v1/export body into series -> timestamps
// (duplicates kept), keyed without the labels in drop.
func samplesByKey(t *testing.T, body []byte, drop ...string) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l struct {
			Metric     map[string]string `json:"metric"`
			Timestamps []int64           `json:"timestamps"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		for _, d := range drop {
			delete(l.Metric, d)
		}
		k := seriesKey(l.Metric)
		out[k] = append(out[k], l.Timestamps...)
	}
	require.NoError(t, sc.Err())
	for k := range out {
		sort.Slice(out[k], func(i, j int) bool { return out[k][i] < out[k][j] })
	}
	return out
}

// uniq returns ts without repeats, and how many repeats there were.
func uniq(ts []int64) ([]int64, int) {
	var out []int64
	dup := 0
	for i, x := range ts {
		if i > 0 && x == ts[i-1] {
			dup++
			continue
		}
		out = append(out, x)
	}
	return out, dup
}

// TestRemoteWriteDurability: the appliance remote-writes scraped and
// pushed samples to a real VictoriaMetrics single. VictoriaMetrics is
// stopped for DURABILITY_OUTAGE (default 30s; the run is 10m),
// and meanwhile the appliance is killed with kill -9 and started again.
// Once VictoriaMetrics is back, every sample the appliance stores is in
// it, per series, and repeats are only the at-least-once resends. A
// second remote with a small max_disk_bytes to the same receiver (its
// series marked remote="small" by write_relabel_configs) drops its
// oldest samples, counts them, and keeps its directory within the bound.
//
// VictoriaMetrics runs without -dedup.minScrapeInterval, so that its
// export shows every sample it received, repeats included.
func TestRemoteWriteDurability(t *testing.T) {
	outage := 30 * time.Second
	if s := os.Getenv("DURABILITY_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err)
		outage = d
	}
	vmBin := externalBinary(t, "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics", harness.VictoriaMetricsVersion)
	dir := t.TempDir()
	vmAddr := freeAddr(t)
	vmArgs := []string{"-storageDataPath=" + filepath.Join(dir, "vm"), "-httpListenAddr=" + vmAddr,
		"-retentionPeriod=1y", "-search.disableCache", "-search.latencyOffset=0s"}
	vm := startExternal(t, vmBin, vmAddr, "/health", vmArgs...)

	exporter := metricsServer(t, func(*http.Request) string {
		var b strings.Builder
		for i := range 5 {
			fmt.Fprintf(&b, "rw_scraped{k=\"%d\"} %d\n", i, i)
		}
		return b.String()
	})
	const smallBound = 512 << 10
	cfg := writeConfig(t, dir, fmt.Sprintf(`
global:
  scrape_interval: 1s
  external_labels: {box: b1}
scrape_configs:
  - job_name: exp
    static_configs: [{targets: [%q]}]
remote_write:
  - url: http://%s/api/v1/write
    name: full
    queue_config: {batch_send_deadline: 200ms, min_backoff: 50ms, max_backoff: 1s}
  - url: http://%s/api/v1/write
    name: small
    max_disk_bytes: %d
    queue_config: {batch_send_deadline: 200ms, min_backoff: 50ms, max_backoff: 1s}
    write_relabel_configs:
      - {target_label: remote, replacement: small}
`, strings.TrimPrefix(exporter.URL, "http://"), vmAddr, vmAddr, smallBound))
	data := filepath.Join(dir, "data")
	app := start(t, cfg, data)

	// push imports samples with timestamps (acknowledged: fsynced).
	base := time.Now().Add(-20 * time.Minute).Truncate(time.Second)
	push := func(p *proc, name string, series, n int, from time.Time) {
		t.Helper()
		var body strings.Builder
		for i := range series {
			for j := range n {
				fmt.Fprintf(&body, "%s{s=\"%d\"} %d %d\n", name, i, j, from.Add(time.Duration(j)*time.Second).UnixMilli())
			}
		}
		code, msg := p.post("/api/v1/import/prometheus", "text/plain", []byte(body.String()), nil)
		require.Equal(t, http.StatusNoContent, code, msg)
	}
	drained := func(p *proc) func() bool {
		return func() bool {
			return remoteMetric(t, p, "prometheus_remote_storage_samples_pending", "full") == 0 &&
				remoteMetric(t, p, "prometheus_remote_storage_samples_pending", "small") == 0 &&
				remoteMetric(t, p, "prometheus_remote_storage_samples_total", "full") > 0
		}
	}

	push(app, "rw_before", 20, 30, base)
	eventually(t, 60*time.Second, "the queues drain to VictoriaMetrics", drained(app))

	// The outage: VictoriaMetrics stops; the appliance keeps storing.
	vm.out.stop()
	outageStart := time.Now()
	push(app, "rw_outage", 20, 60, base.Add(time.Minute))
	eventually(t, 60*time.Second, "the sender retries", func() bool {
		return remoteMetric(t, app, "prometheus_remote_storage_samples_retried_total", "full") > 0
	})
	time.Sleep(outage / 2) // the outage itself: scrapes go on meanwhile
	app.kill9()
	app = start(t, cfg, data)
	// After the restart, more than the small queue holds: it drops.
	push(app, "rw_after_kill", 500, 300, base.Add(5*time.Minute))
	eventually(t, 60*time.Second, "the small queue drops its oldest", func() bool {
		return remoteMetric(t, app, "prometheus_remote_storage_samples_dropped_total", "small") > 0
	})
	require.LessOrEqual(t, dirBytes(t, filepath.Join(data, "remote_write", "small")), int64(smallBound+64<<10), "the small queue keeps within max_disk_bytes")
	if rest := outage - time.Since(outageStart); rest > 0 {
		time.Sleep(rest)
	}
	pendingFull := remoteMetric(t, app, "prometheus_remote_storage_samples_pending", "full")
	droppedSmall := remoteMetric(t, app, "prometheus_remote_storage_samples_dropped_total", "small")
	require.Zero(t, remoteMetric(t, app, "prometheus_remote_storage_samples_dropped_total", "full"))
	require.Zero(t, remoteMetric(t, app, "prometheus_remote_storage_samples_failed_total", "full"))

	// VictoriaMetrics is back, on the same address and data.
	vm = startExternal(t, vmBin, vmAddr, "/health", vmArgs...)
	eventually(t, 120*time.Second, "the queues drain after the outage", drained(app))
	resp, err := http.Get("http://" + vmAddr + "/internal/force_flush")
	require.NoError(t, err)
	resp.Body.Close()

	// Compare up to a moment all queues had: scrapes go on.
	end := time.Now().Add(-5 * time.Second)
	eventually(t, 60*time.Second, "the queues pass the end", func() bool {
		return remoteMetric(t, app, "prometheus_remote_storage_queue_highest_sent_timestamp_seconds", "full") > float64(end.Unix()+2)
	})
	resp, err = http.Get("http://" + vmAddr + "/internal/force_flush")
	require.NoError(t, err)
	resp.Body.Close()
	params := url.Values{"match[]": {`{__name__=~"rw_.*"}`}, "start": {strconv.FormatInt(base.Add(-time.Minute).Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}}
	local := samplesByKey(t, httpExport(t, app.url(""), params))
	full := samplesByKey(t, httpExport(t, "http://"+vmAddr, url.Values{"match[]": {`{__name__=~"rw_.*",remote!="small"}`}, "start": params["start"], "end": params["end"]}), "box")
	small := samplesByKey(t, httpExport(t, "http://"+vmAddr, url.Values{"match[]": {`{__name__=~"rw_.*",remote="small"}`}, "start": params["start"], "end": params["end"]}), "box", "remote")

	require.Len(t, local, 20+20+500+5)
	localN, fullN, dups, smallN := 0, 0, 0, 0
	for k, ts := range local {
		localN += len(ts)
		got, d := uniq(full[k])
		dups += d
		fullN += len(got)
		require.Equal(t, ts, got, "series %s: every stored sample is in VictoriaMetrics (count %d vs %d)", k, len(got), len(ts))
		s, _ := uniq(small[k])
		smallN += len(s)
	}
	require.Len(t, full, len(local))
	// And as the issue asks it: count_over_time per series, the
	// appliance's against VictoriaMetrics' (deduplicated by query).
	counts := func(p *proc) map[string]float64 {
		out := map[string]float64{}
		for _, name := range []string{"rw_before", "rw_outage", "rw_after_kill"} {
			for _, x := range p.instant(`count_over_time(`+name+`{remote!="small"}[1h])`, end) {
				delete(x.Metric, "box")
				out[name+seriesKey(x.Metric)] = value(t, x)
			}
		}
		return out
	}
	vmQuery := &proc{t: t, addr: vmAddr}
	require.Equal(t, counts(app), counts(vmQuery))
	t.Logf("outage %s: appliance stores %d samples; VictoriaMetrics has %d of them (%d repeats from at-least-once resends); pending at the end of the outage %v", outage, localN, fullN, dups, pendingFull)
	t.Logf("small queue (max_disk_bytes %d): %d samples in VictoriaMetrics, %v dropped and counted (after the restart)", smallBound, smallN, droppedSmall)
	require.Less(t, smallN, localN, "the small queue dropped samples")
	require.LessOrEqual(t, dups, 2*2000, "repeats are at most the requests in flight at the kill")
}

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return err
	}))
	return n
}
