package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
)

// pushClient sends remote-write requests in a loop, one sample per
// request for its series, and records which were acknowledged (2xx).
type pushClient struct {
	name   string
	mu     sync.Mutex
	acked  map[int64]float64 // timestamp -> value, of acknowledged samples
	lastTS int64
	seq    float64
}

func newPushClient(name string) *pushClient {
	return &pushClient{name: name, acked: map[int64]float64{}}
}

// push sends one request to addr and records it when acknowledged. It
// returns the status code (0 on a transport error).
func (c *pushClient) push(t *testing.T, addr string) int {
	c.mu.Lock()
	ts := max(time.Now().UnixMilli(), c.lastTS+1)
	c.lastTS = ts
	c.seq++
	v := c.seq
	c.mu.Unlock()
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "durability_push"}, {Name: "client", Value: c.name}},
		Samples: []prompb.Sample{{Timestamp: ts, Value: v}},
	}}}
	code := postRemoteWrite(t, addr, req)
	if code/100 == 2 {
		c.mu.Lock()
		c.acked[ts] = v
		c.mu.Unlock()
	}
	return code
}

// postRemoteWrite sends req; 0 means the request did not get an answer.
func postRemoteWrite(t *testing.T, addr string, req *prompb.WriteRequest) int {
	code, _ := postRemoteWriteBody(t, addr, req)
	return code
}

func postRemoteWriteBody(t *testing.T, addr string, req *prompb.WriteRequest) (int, string) {
	raw, err := req.Marshal()
	require.NoError(t, err)
	hreq, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	require.NoError(t, err)
	for k, v := range rwHeaders {
		hreq.Header.Set(k, v)
	}
	hreq.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rangeSamples returns the samples of the single series matching sel over
// the last window, as timestamp (ms) -> value.
func (p *proc) rangeSamples(sel string, window time.Duration) map[int64]float64 {
	p.t.Helper()
	q := fmt.Sprintf("%s[%ds]", sel, int(window.Seconds()))
	// Raw samples only: a 2h range may otherwise be read from the 1m tier
	// once the downsampler rolled a minute up, one average per minute.
	code, r := p.get("/api/v1/query", url.Values{"query": {q}, "max_source_resolution": {"raw"}})
	require.Equal(p.t, http.StatusOK, code, "query %q: %s", q, r.Error)
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	require.NoError(p.t, json.Unmarshal(r.Data, &data))
	require.Equal(p.t, "matrix", data.ResultType)
	out := map[int64]float64{}
	for _, s := range data.Result {
		for _, v := range s.Values {
			ts := int64(v[0].(float64)*1000 + 0.5)
			f, err := strconv.ParseFloat(v[1].(string), 64)
			require.NoError(p.t, err)
			out[ts] = f
		}
	}
	return out
}

// requireAcked fails unless every acknowledged sample of c is stored. A
// sample is searchable within VictoriaMetrics' flush interval of about 2s
// after it was acknowledged (replayed ones at once), so a missing one is
// looked for again for a few seconds before the test fails.
func requireAcked(t *testing.T, p *proc, c *pushClient) {
	t.Helper()
	var missing []int64
	for try := 0; try < 50; try++ {
		got := p.rangeSamples(`durability_push{client="`+c.name+`"}`, 2*time.Hour)
		c.mu.Lock()
		missing = missing[:0]
		for ts, v := range c.acked {
			if g, ok := got[ts]; !ok || g != v {
				missing = append(missing, ts)
			}
		}
		c.mu.Unlock()
		if len(missing) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Empty(t, missing, "client %s: %d of %d acknowledged samples missing", c.name, len(missing), len(c.acked))
}

// seqExporter serves one counter whose sample carries the exporter's own
// sequence number and timestamp, and remembers the last one it served.
type seqExporter struct {
	srv  *http.Server
	addr string
	seq  atomic.Int64
	// extra is served after the counter (the oversize test's series).
	extra atomic.Pointer[string]
}

func newSeqExporter(t *testing.T) *seqExporter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &seqExporter{addr: ln.Addr().String()}
	e.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := e.seq.Add(1)
		fmt.Fprintf(w, "durability_scrape_seq %d %d\n", n, time.Now().UnixMilli())
		if x := e.extra.Load(); x != nil {
			io.WriteString(w, *x)
		}
	})}
	go func() { _ = e.srv.Serve(ln) }()
	t.Cleanup(func() { _ = e.srv.Close() })
	return e
}

// TestKill9KeepsAcknowledgedData: kill -9 during sustained remote write
// and scraping, ten times in a row: after each restart every sample
// answered 2xx is there, and the scrape lost at most its last interval.
func TestKill9KeepsAcknowledgedData(t *testing.T) {
	exp := newSeqExporter(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 900ms}
scrape_configs:
  - job_name: seq
    static_configs: [{targets: [%q]}]
`, exp.addr))
	clients := []*pushClient{newPushClient("a"), newPushClient("b"), newPushClient("c")}

	for round := range 10 {
		p := start(t, cfg, data)
		// Sustained push: each client pushes as fast as it is answered
		// until the process dies under it.
		var wg sync.WaitGroup
		var acks atomic.Int64
		for _, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 100_000; i++ {
					code := c.push(t, p.addr)
					if code == 0 {
						return // killed
					}
					if code/100 == 2 {
						acks.Add(1)
					}
				}
			}()
		}
		// Enough acknowledged pushes and scrapes in this round.
		seq0 := exp.seq.Load()
		eventually(t, 30*time.Second, "pushes and scrapes before the kill", func() bool {
			return acks.Load() >= 60 && exp.seq.Load() >= seq0+3
		})
		lastServed := exp.seq.Load()
		p.kill9()
		wg.Wait()

		p = start(t, cfg, data)
		for _, c := range clients {
			requireAcked(t, p, c)
		}
		// The scrapes committed before the kill: the last one served may
		// have been in flight, the one before must be there.
		got := p.rangeSamples(`durability_scrape_seq`, 2*time.Hour)
		newest := 0.0
		for _, v := range got {
			newest = max(newest, v)
		}
		require.GreaterOrEqual(t, newest, float64(lastServed-1), "round %d: scraped data lost more than one interval", round)
		p.kill9()
	}
}

// startAt is start on a given address (a config that scrapes the
// appliance itself needs it before the process runs).
func startAt(t *testing.T, addr, cfgPath, data string) *proc {
	t.Helper()
	p := launch(t, addr, "run", "--data", data, "--listen", addr, "--config", cfgPath)
	p.data, p.cfg = data, cfgPath
	for i := 0; i < 600; i++ {
		select {
		case <-p.done:
			t.Fatalf("appliance exited before it was ready: %v\n%s", p.err, p.Output())
		default:
		}
		if resp, err := http.Get(p.url("/-/ready")); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("appliance not ready within 60s:\n%s", p.Output())
	return nil
}

// mountTmpfs mounts a tmpfs of size bytes on dir for the test.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput()
	require.NoError(t, err, "mount a tmpfs (needs root): %s", out)
	t.Cleanup(func() {
		// The process is gone by now (launch's cleanup ran first).
		_ = exec.Command("umount", "-l", dir).Run()
	})
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(dir, &st))
	return int64(st.Bavail) * int64(st.Bsize)
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// TestDiskFullTurnsReadOnly: on a small tmpfs under sustained push, the
// appliance answers 503 before the disk fills, stays up, loses nothing it
// acknowledged, says so on /-/ready and /metrics, and takes pushes again
// once space is freed.
func TestDiskFullTurnsReadOnly(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	// Large enough that once the filler is gone, the free space less what
	// the last pushes booked (diskPendingSeconds) is well above the
	// watermark and its 10% hysteresis: on 64 MiB the store's ~40 MB left
	// 27.7 MB free, within 0.1 MB of the resume limit, and a loaded CI
	// run waited past its deadline.
	mountTmpfs(t, mnt, 128<<20)
	const minFree = 24 << 20
	// The self-scrape (job appliance, as in the default config) feeds the
	// always-on P0 alert.
	addr := freeAddr(t)
	cfg := writeConfig(t, dir, fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s}
storage: {min_free_disk: 24MiB}
scrape_configs:
  - job_name: appliance
    static_configs: [{targets: [%q]}]
`, addr))
	p := startAt(t, addr, cfg, filepath.Join(mnt, "data"))

	// Leave about 8 MiB above the watermark, then push new series with
	// incompressible labels until the appliance refuses.
	filler := filepath.Join(mnt, "filler")
	fill := freeBytes(t, mnt) - minFree - 8<<20
	require.Positive(t, fill)
	require.NoError(t, os.WriteFile(filler, make([]byte, fill), 0o644))

	c := newPushClient("disk")
	pushBig := func(i int) int {
		req := &prompb.WriteRequest{}
		now := time.Now().UnixMilli()
		for s := range 500 {
			req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
				Labels:  []prompb.Label{{Name: "__name__", Value: "durability_fill"}, {Name: "id", Value: strconv.Itoa(i*500 + s)}, {Name: "pad", Value: randomHex(t, 400)}},
				Samples: []prompb.Sample{{Timestamp: now, Value: 1}},
			})
		}
		return postRemoteWrite(t, p.addr, req)
	}
	refused := false
	for i := 0; i < 2000 && !refused; i++ {
		code := pushBig(i)
		require.NotZero(t, code, "the appliance must not crash")
		if code == http.StatusServiceUnavailable {
			refused = true
			break
		}
		require.Equal(t, http.StatusNoContent, code)
		if code := c.push(t, p.addr); code != http.StatusNoContent {
			require.Equal(t, http.StatusServiceUnavailable, code)
			refused = true
		}
		// Never below the watermark while pushes are acknowledged.
		require.Greater(t, freeBytes(t, mnt), int64(minFree/2), "push %d", i)
	}
	require.True(t, refused, "no 503 before the disk filled")

	// Read-only, said everywhere, and still answering queries.
	code, body := postRemoteWriteBody(t, p.addr, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels: []prompb.Label{{Name: "__name__", Value: "durability_push"}, {Name: "client", Value: "disk"}}, Samples: []prompb.Sample{{Timestamp: time.Now().UnixMilli(), Value: -1}}}}})
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "storage.min_free_disk")
	code, body = p.post("/api/v1/import/prometheus", "text/plain", []byte("durability_import 1\n"), nil)
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	resp, err := http.Get(p.url("/-/ready"))
	require.NoError(t, err)
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, string(rb), "free disk space is below storage.min_free_disk")
	resp, err = http.Get(p.url("/metrics"))
	require.NoError(t, err)
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(mb), "appliance_storage_read_only 1")
	require.Contains(t, string(mb), "appliance_storage_free_disk_bytes ")
	requireAcked(t, p, c)
	eventually(t, 30*time.Second, "the P0 self-alert ApplianceStorageReadOnly firing", func() bool {
		_, r := p.get("/api/v1/alerts", nil)
		var d struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		require.NoError(t, json.Unmarshal(r.Data, &d))
		for _, a := range d.Alerts {
			if a.Labels["alertname"] == "ApplianceStorageReadOnly" && a.State == "firing" {
				require.Equal(t, "P0", a.Labels["severity"])
				return true
			}
		}
		return false
	})

	// Space freed: ingest resumes by itself (at the latest once the last
	// pushes' bookings, diskPendingSeconds, have expired).
	require.NoError(t, os.Remove(filler))
	eventually(t, 60*time.Second, "pushes accepted again", func() bool {
		return c.push(t, p.addr) == http.StatusNoContent
	})
	resp, err = http.Get(p.url("/-/ready"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireAcked(t, p, c)

	// And nothing acknowledged is lost across a kill -9 either.
	p.kill9()
	p = startAt(t, addr, cfg, filepath.Join(mnt, "data"))
	requireAcked(t, p, c)
	p.kill9()
}

// TestOversizedSeriesRefused: label sets the index cannot hold, or over
// the global label limits, are refused with 400 naming the series and the
// limit, counted, and nothing of their request is stored; a scrape with
// such a series fails with the target's error and stores nothing of it.
func TestOversizedSeriesRefused(t *testing.T) {
	exp := newSeqExporter(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 900ms, label_limit: 64}
scrape_configs:
  - job_name: big
    static_configs: [{targets: [%q]}]
`, exp.addr))
	p := start(t, cfg, filepath.Join(dir, "data"))
	now := time.Now().UnixMilli()

	twoBig := []prompb.Label{{Name: "__name__", Value: "durability_big"}, {Name: "a", Value: strings.Repeat("x", 40_000)}, {Name: "b", Value: strings.Repeat("y", 40_000)}}
	normal := []prompb.Label{{Name: "__name__", Value: "durability_normal"}, {Name: "via", Value: "rw"}}
	code, body := postRemoteWriteBody(t, p.addr, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: normal, Samples: []prompb.Sample{{Timestamp: now, Value: 1}}},
		{Labels: twoBig, Samples: []prompb.Sample{{Timestamp: now, Value: 1}}},
	}})
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "exceeds the index limit of 65472 bytes")
	require.Contains(t, body, `durability_big`)
	require.Contains(t, body, "(truncated)")
	require.Less(t, len(body), 1000, "the series is named by a prefix")

	// 10,000 labels: over label_limit first.
	many := []prompb.Label{{Name: "__name__", Value: "durability_many"}}
	for i := range 10_000 {
		many = append(many, prompb.Label{Name: fmt.Sprintf("l%05d", i), Value: "v"})
	}
	code, body = postRemoteWriteBody(t, p.addr, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: many, Samples: []prompb.Sample{{Timestamp: now, Value: 1}}}}})
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "more than label_limit 64")

	// Import: all or nothing.
	imp := "durability_normal{via=\"import\"} 1\ndurability_big{a=\"" + strings.Repeat("x", 40_000) + "\",b=\"" + strings.Repeat("y", 40_000) + "\"} 2\n"
	code, body = p.post("/api/v1/import/prometheus", "text/plain", []byte(imp), nil)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "exceeds the index limit")
	require.Contains(t, body, "nothing of this body was stored")

	// Scrape: the target fails with the reason; nothing of it is stored.
	big := `durability_scraped_big{a="` + strings.Repeat("x", 40_000) + `",b="` + strings.Repeat("y", 40_000) + "\"} 1\n"
	exp.extra.Store(&big)
	var lastErr string
	eventually(t, 30*time.Second, "the target to fail with the index limit", func() bool {
		_, r := p.get("/api/v1/targets", nil)
		var d struct {
			ActiveTargets []struct {
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		}
		require.NoError(t, json.Unmarshal(r.Data, &d))
		for _, tg := range d.ActiveTargets {
			if tg.Health == "down" && strings.Contains(tg.LastError, "index limit") {
				lastErr = tg.LastError
				return true
			}
		}
		return false
	})
	require.Less(t, len(lastErr), 1000)
	seqBefore := exp.seq.Load()
	eventually(t, 30*time.Second, "two more scrapes", func() bool { return exp.seq.Load() >= seqBefore+2 })

	resp, err := http.Get(p.url("/metrics"))
	require.NoError(t, err)
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Regexp(t, `(?m)^appliance_ingest_rejected_samples_total\{reason="series_too_large"\} [1-9]`, string(mb))
	require.Regexp(t, `(?m)^appliance_ingest_rejected_samples_total\{reason="label_limit"\} [1-9]`, string(mb))

	// Nothing half-stored: neither the big series nor their neighbours.
	for _, q := range []string{`durability_normal`, `durability_big`, `durability_many`, `durability_scraped_big`, `durability_scrape_seq{job="big"}`} {
		got := p.rangeSamples(q, time.Hour)
		if q == `durability_scrape_seq{job="big"}` {
			// Scrapes before the big series was served are stored; none
			// after it.
			for _, v := range got {
				require.Less(t, v, float64(seqBefore), "a failed scrape stored its other series")
			}
			continue
		}
		require.Empty(t, got, "%s was stored", q)
	}
	eventually(t, 30*time.Second, `up{job="big"} 0`, func() bool {
		vs := p.instant(`up{job="big"}`, time.Time{})
		return len(vs) == 1 && value(t, vs[0]) == 0
	})
}
