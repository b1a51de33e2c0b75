package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// Attacks from the outside on the real binary (issue 16). Each is
// bounded: a fixed number of connections, requests or bytes.

// requireCleanLog fails when the appliance's log shows a crash.
func requireCleanLog(t *testing.T, p *proc) {
	t.Helper()
	out := p.Output()
	for _, bad := range []string{"panic", "fatal error", "goroutine "} {
		require.NotContains(t, out, bad, "the log shows %q", bad)
	}
}

// requireHealthy checks that /-/healthy answers 200 within a second on a
// fresh connection.
func requireHealthy(t *testing.T, scheme, addr string, client *http.Client) time.Duration {
	t.Helper()
	if client == nil {
		client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/-/healthy", nil)
	require.NoError(t, err)
	begin := time.Now()
	resp, err := client.Do(req)
	require.NoError(t, err, "/-/healthy within 1s")
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return time.Since(begin)
}

// metric reads one sample of the appliance's /metrics (the first line
// whose series starts with name).
func (p *proc) metric(name string) float64 {
	p.t.Helper()
	resp, err := http.Get(p.url("/metrics"))
	require.NoError(p.t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(p.t, err, line)
			return f
		}
	}
	p.t.Fatalf("metric %s not found", name)
	return 0
}

func pushSample(t *testing.T, p *proc, name string, ts time.Time, v float64) {
	t.Helper()
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: name}},
		Samples: []prompb.Sample{{Timestamp: ts.UnixMilli(), Value: v}},
	}}}
	code, body := p.post("/api/v1/write", "application/x-protobuf", remoteWriteBody(t, req), rwHeaders)
	require.Equal(t, http.StatusNoContent, code, body)
}

// TestAbuseIdleConnections holds 1,100 idle connections against an
// appliance started with 1,024 file descriptors: it stays up, answers
// /-/healthy within a second, takes samples and keeps them over a
// restart.
func TestAbuseIdleConnections(t *testing.T) {
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prlimit (util-linux) is needed to start the appliance with 1,024 file descriptors")
		}
		t.Skip("prlimit not installed")
	}
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, "scrape_configs: []\n")
	data := filepath.Join(dir, "data")
	addr := freeAddr(t)
	p := launchCmd(t, addr, "appliance", exec.Command(prlimit, "--nofile=1024:1024", binary, "run", "--config", cfgPath, "--data", data, "--listen", addr))
	p.data, p.cfg = data, cfgPath
	waitReady(t, p, "appliance", "/-/ready")

	const idle = 1100
	conns := make([]net.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range idle {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	var worst time.Duration
	for i := range 20 {
		worst = max(worst, requireHealthy(t, "http", addr, nil))
		pushSample(t, p, "abuse_idle_probe", base.Add(time.Duration(i)*time.Second), float64(i))
	}
	closed := p.metric("appliance_http_idle_connections_closed_total")
	t.Logf("1,100 idle connections under 1,024 fds: /-/healthy worst %s over 20 calls; %v idle connections closed to make room; cap %v",
		worst, closed, p.metric("appliance_http_max_connections"))
	require.Positive(t, closed, "idle connections were closed to make room")

	eventually(t, 20*time.Second, "the samples pushed during the attack are queryable", func() bool {
		v := p.instant("count_over_time(abuse_idle_probe[5m])", time.Time{})
		return len(v) == 1 && value(t, v[0]) == 20
	})
	code, _ := p.stop()
	require.Equal(t, 0, code)
	requireCleanLog(t, p)

	p2 := start(t, cfgPath, data)
	v := p2.instant("count_over_time(abuse_idle_probe[5m])", time.Time{})
	require.Len(t, v, 1)
	require.Equal(t, 20.0, value(t, v[0]), "every acknowledged sample survives")
}

// TestAbuseSlowBody sends a request body one byte every 200 ms: the read
// timeout closes the connection while the client is still sending.
func TestAbuseSlowBody(t *testing.T) {
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, "scrape_configs: []\nweb:\n  listen_address: \"127.0.0.1:0\"\n  read_timeout: 2s\n"), filepath.Join(dir, "data"))
	c, err := net.Dial("tcp", p.addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = fmt.Fprintf(c, "POST /api/v1/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n")
	require.NoError(t, err)
	begin := time.Now()
	gotAnswerOrClose := make(chan struct{})
	go func() {
		defer close(gotAnswerOrClose)
		_, _ = io.Copy(io.Discard, c) // returns when the server closes
	}()
	closed := false
	for range 150 { // at most 30 s of sending
		select {
		case <-gotAnswerOrClose:
			closed = true
		case <-time.After(200 * time.Millisecond):
			_, _ = c.Write([]byte{'x'})
		}
		if closed {
			break
		}
	}
	require.True(t, closed, "the server closed the slow body")
	t.Logf("slow body (1 byte / 200 ms) closed after %s with web.read_timeout 2s", time.Since(begin).Round(100*time.Millisecond))
	requireHealthy(t, "http", p.addr, nil)
	requireCleanLog(t, p)
}

// TestAbuseReloadRotatesCredentials changes the password and the
// certificate and reloads: the old password gets 401 at once, the new one
// 200, and the next handshake serves the new certificate. Turning TLS off
// by reload is refused, saying why.
func TestAbuseReloadRotatesCredentials(t *testing.T) {
	dir := t.TempDir()
	writeSelfSigned(t, dir)
	cert1 := servedCertOf(t, filepath.Join(dir, "box.crt"))
	oldHash, err := bcrypt.GenerateFromPassword([]byte("old-password"), 10)
	require.NoError(t, err)
	newHash, err := bcrypt.GenerateFromPassword([]byte("new-password"), 10)
	require.NoError(t, err)
	addr := freeAddr(t)
	cfg := func(hash []byte, tlsOn bool) string {
		s := fmt.Sprintf("scrape_configs: []\nweb:\n  listen_address: %q\n  basic_auth_users:\n    admin: %q\n", addr, string(hash))
		if tlsOn {
			s += "  tls_server_config:\n    cert_file: box.crt\n    key_file: box.key\n"
		}
		return s
	}
	cfgPath := writeConfig(t, dir, cfg(oldHash, true))
	p := launch(t, addr, "run", "--config", cfgPath, "--data", filepath.Join(dir, "data"))

	var served atomic.Pointer[x509.Certificate]
	newClient := func() *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
				served.Store(cs.PeerCertificates[0])
				return nil
			}},
		}}
	}
	client := newClient()
	do := func(method, path, pass string) (int, string) {
		req, err := http.NewRequest(method, "https://"+addr+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth("admin", pass)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, 60*time.Second, "HTTPS ready", func() bool {
		code, _ := do(http.MethodGet, "/-/ready", "old-password")
		return code == http.StatusOK
	})
	require.True(t, served.Load().Equal(cert1))
	code, _ := do(http.MethodGet, "/api/v1/query?query=1", "new-password")
	require.Equal(t, http.StatusUnauthorized, code)

	// Rotate both.
	require.NoError(t, os.Remove(filepath.Join(dir, "box.crt")))
	writeSelfSigned(t, dir)
	cert2 := servedCertOf(t, filepath.Join(dir, "box.crt"))
	require.False(t, cert1.Equal(cert2))
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg(newHash, true)+"autodetect: {enabled: false}\ncollectors: {enabled: false}\n"), 0o644))
	code, body := do(http.MethodPost, "/-/reload", "old-password")
	require.Equal(t, http.StatusOK, code, body)

	code, _ = do(http.MethodGet, "/api/v1/query?query=1", "old-password")
	require.Equal(t, http.StatusUnauthorized, code, "the old password is refused right after the reload")
	code, body = do(http.MethodGet, "/api/v1/query?query=1", "new-password")
	require.Equal(t, http.StatusOK, code, body)
	require.True(t, served.Load().Equal(cert2), "the renewed certificate is served after the reload")

	// A renewed certificate without a reload is served too (re-read when
	// its files change).
	require.NoError(t, os.Remove(filepath.Join(dir, "box.crt")))
	writeSelfSigned(t, dir)
	cert3 := servedCertOf(t, filepath.Join(dir, "box.crt"))
	eventually(t, 10*time.Second, "the certificate renewed on disk is served", func() bool {
		code, _ := do(http.MethodGet, "/-/healthy", "new-password")
		return code == http.StatusOK && served.Load().Equal(cert3)
	})

	// TLS off needs a restart: refused, saying why, and HTTPS goes on.
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg(newHash, false)+"autodetect: {enabled: false}\ncollectors: {enabled: false}\n"), 0o644))
	code, body = do(http.MethodPost, "/-/reload", "new-password")
	require.Equal(t, http.StatusInternalServerError, code)
	require.Contains(t, body, "needs a restart")
	code, _ = do(http.MethodGet, "/api/v1/query?query=1", "new-password")
	require.Equal(t, http.StatusOK, code)
	requireCleanLog(t, p)
}

// servedCertOf parses the PEM certificate at path.
func servedCertOf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

// TestAbuseQueryBounds sends the queries that used to run past the
// timeout: they are refused with 400 at once; a heavy query whose client
// leaves stops using the engine.
func TestAbuseQueryBounds(t *testing.T) {
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, "scrape_configs: []\nquery:\n  timeout: 2m\n"), filepath.Join(dir, "data"))

	nested := strings.Repeat("(", 20_000) + "up" + strings.Repeat(")", 20_000)
	sum := strings.Repeat("up+", 50_000) + "up"
	for _, c := range []struct{ path, q string }{
		{"/api/v1/format_query", nested},
		{"/api/v1/parse_query", nested},
		{"/api/v1/query", nested},
		{"/api/v1/query", sum},
		{"/api/v1/format_query", sum},
		{"/api/v1/format_query", strings.Repeat("up+", 1_000) + "up"},
		{"/api/v1/query", "count_over_time(vector(1)[300d:1s])"}, // 25,920,000 steps
	} {
		begin := time.Now()
		code, body := p.post(c.path, "application/x-www-form-urlencoded", []byte(url.Values{"query": {c.q}}.Encode()), nil)
		require.Equal(t, http.StatusBadRequest, code, "%s: %.200s", c.path, body)
		require.Less(t, len(body), 1024, "a short answer")
		t.Logf("%s with %d bytes: %d in %s: %s", c.path, len(c.q), code, time.Since(begin).Round(time.Millisecond), strings.TrimSpace(body))
	}
	// What is allowed answers.
	code, body := p.post("/api/v1/format_query", "application/x-www-form-urlencoded",
		[]byte(url.Values{"query": {strings.Repeat("up+", 100) + "up"}}.Encode()), nil)
	require.Equal(t, http.StatusOK, code, body)

	// A query of many seconds' work whose client leaves once it has
	// used a core for a while: the engine stops it, and the process's
	// CPU time stops growing.
	terms := make([]string, 250)
	for i := range terms {
		terms[i] = fmt.Sprintf("count_over_time(vector(%d)[2d:1s])", i) // 172,800 steps each
	}
	heavy := strings.Join(terms, " + ")
	pid := p.cmd.Process.Pid
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url("/api/v1/query"), strings.NewReader(url.Values{"query": {heavy}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	answered := make(chan string, 1)
	cpuStart := procCPU(t, pid)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- fmt.Sprintf("%d %.200s", resp.StatusCode, b)
	}()
	eventually(t, 60*time.Second, "the heavy query running and using a core", func() bool {
		return p.metric("appliance_prometheus_engine_queries") == 1 && procCPU(t, pid)-cpuStart > 500*time.Millisecond
	})
	cancel()
	left := time.Now()
	require.Contains(t, <-answered, "context canceled", "the client left before the answer")
	var release time.Duration
	for p.metric("appliance_prometheus_engine_queries") != 0 {
		release = time.Since(left)
		require.Less(t, release, 30*time.Second, "the engine stops a query whose client left")
		time.Sleep(20 * time.Millisecond)
	}
	release = time.Since(left)
	// The CPU time over the next 20 health checks: the query's core is
	// free again.
	cpu0, wall0 := procCPU(t, pid), time.Now()
	for range 20 {
		requireHealthy(t, "http", p.addr, nil)
		time.Sleep(50 * time.Millisecond)
	}
	cpuAfter, wall := procCPU(t, pid)-cpu0, time.Since(wall0)
	t.Logf("heavy query (250 subqueries of 172,800 steps) stopped %s after its client left (query gauge at 0); CPU before the cancel %s; afterwards %s of CPU in %s",
		release.Round(time.Millisecond), procCPU(t, pid)-cpuStart-cpuAfter, cpuAfter, wall.Round(time.Millisecond))
	require.Less(t, cpuAfter, wall/2, "the process uses less than half a core once the query stopped")
	requireHealthy(t, "http", p.addr, nil)
	requireCleanLog(t, p)
}

// TestAbuseHugeLabel pushes a 1 MB label value: a 4xx (a retry cannot fix
// it), a short answer and no long log line.
func TestAbuseHugeLabel(t *testing.T) {
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, "scrape_configs: []\n"), filepath.Join(dir, "data"))
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "huge"}, {Name: "blob", Value: strings.Repeat("x", 1<<20)}},
		Samples: []prompb.Sample{{Timestamp: time.Now().UnixMilli(), Value: 1}},
	}}}
	code, body := p.post("/api/v1/write", "application/x-protobuf", remoteWriteBody(t, req), rwHeaders)
	t.Logf("1 MB label: %d, answer %d bytes: %.300s", code, len(body), body)
	require.GreaterOrEqual(t, code, 400)
	require.Less(t, code, 500, "a permanent error is 4xx, so that senders do not retry")
	require.Less(t, len(body), 4096, "the answer does not echo the label")
	longest := 0
	for line := range strings.Lines(p.Output()) {
		longest = max(longest, len(line))
	}
	t.Logf("longest log line: %d characters", longest)
	require.Less(t, longest, 4096)
	requireHealthy(t, "http", p.addr, nil)
	requireCleanLog(t, p)
}

// TestAbuseEncodedWritePath sends a body over web.max_request_body_bytes
// to /api/v1/%77rite: 413, like /api/v1/write, and nothing is stored.
func TestAbuseEncodedWritePath(t *testing.T) {
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, "scrape_configs: []\nweb:\n  listen_address: \"127.0.0.1:0\"\n  max_request_body_bytes: 1MiB\n"), filepath.Join(dir, "data"))
	wr := &prompb.WriteRequest{}
	for i := range 20_000 {
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
			Labels:  []prompb.Label{{Name: "__name__", Value: "bypass"}, {Name: "i", Value: strconv.Itoa(i)}, {Name: "pad", Value: fmt.Sprintf("%x", sha256.Sum256([]byte(strconv.Itoa(i))))}},
			Samples: []prompb.Sample{{Timestamp: time.Now().UnixMilli(), Value: 1}},
		})
	}
	raw, err := wr.Marshal()
	require.NoError(t, err)
	require.Greater(t, len(raw), 1<<20)
	body := remoteWriteBody(t, wr)
	// Snappy may compress the body under the limit; send it uncompressed
	// size in the frame then, so that it is over.
	if len(body) <= 1<<20 {
		body = append(body, bytes.Repeat([]byte{0}, 1<<20-len(body)+1000)...)
	}
	t.Logf("body: %d bytes", len(body))
	for _, path := range []string{"/api/v1/write", "/api/v1/%77rite", "/api/v1//write", "/api/v1/./write"} {
		code, answer := p.post(path, "application/x-protobuf", body, rwHeaders)
		require.Equal(t, http.StatusRequestEntityTooLarge, code, "%s: %.200s", path, answer)
	}
	time.Sleep(2 * time.Second) // past the storage's flush delay
	code, r := p.get("/api/v1/query", url.Values{"query": {"count(bypass)"}})
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(r.Data), `"result":[]`, "nothing stored")
	requireCleanLog(t, p)
}

// TestAbuseProbePasswordRedacted: a probe URL's password is shown as
// <secret> in /api/v1/status/config.
func TestAbuseProbePasswordRedacted(t *testing.T) {
	dir := t.TempDir()
	cfg := "scrape_configs: []\nprobes:\n  - {name: guarded, kind: http, url: \"http://prober:Hunter2Secret@127.0.0.1:1/health\", interval: 30s}\n"
	p := start(t, writeConfig(t, dir, cfg), filepath.Join(dir, "data"))
	code, r := p.get("/api/v1/status/config", nil)
	require.Equal(t, http.StatusOK, code)
	var data struct {
		YAML string `json:"yaml"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &data))
	require.NotContains(t, data.YAML, "Hunter2Secret")
	require.Contains(t, data.YAML, "http://prober:<secret>@127.0.0.1:1/health")
	requireCleanLog(t, p)
}

// TestAbusePasswordFlood: 16 clients send wrong passwords while a
// logged-in client polls; every logged-in request succeeds and does not
// wait behind the bcrypt checks of the flood.
func TestAbusePasswordFlood(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("right-password"), 10)
	require.NoError(t, err)
	addr := freeAddr(t)
	cfgPath := writeConfig(t, dir, fmt.Sprintf("scrape_configs: []\nweb:\n  listen_address: %q\n  basic_auth_users:\n    admin: %q\n", addr, string(hash)))
	p := launch(t, addr, "run", "--config", cfgPath, "--data", filepath.Join(dir, "data"))
	get := func(client *http.Client, user, pass string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/status/buildinfo", nil)
		require.NoError(t, err)
		req.SetBasicAuth(user, pass)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	good := &http.Client{Timeout: 10 * time.Second}
	eventually(t, 60*time.Second, "ready", func() bool { return get(good, "admin", "right-password") == http.StatusOK })
	// Logged in: the first check paid bcrypt; later ones are remembered.
	quiet := pollLatencies(t, good, get, 50)

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		codes = map[int]int{}
		flood = &http.Client{Timeout: 30 * time.Second}
	)
	const clients, perClient = 16, 6
	for i := range clients {
		wg.Go(func() {
			for j := range perClient {
				user := "admin"
				if j%2 == 1 {
					user = fmt.Sprintf("nobody%d", i) // unknown users cost the same
				}
				c := get(flood, user, fmt.Sprintf("wrong-%d-%d", i, j))
				mu.Lock()
				codes[c]++
				mu.Unlock()
			}
		})
	}
	floodDone := make(chan struct{})
	go func() { wg.Wait(); close(floodDone) }()
	var busy []time.Duration
	for len(busy) < 2000 {
		select {
		case <-floodDone:
		default:
			busy = append(busy, pollLatencies(t, good, get, 10)...)
			continue
		}
		break
	}
	<-floodDone
	t.Logf("logged-in p95: %s quiet, %s over %d requests during a 16-client wrong-password flood; flood answers %v",
		p95(quiet), p95(busy), len(busy), codes)
	require.NotEmpty(t, busy)
	require.Zero(t, codes[http.StatusOK], "no wrong password passes")
	require.Zero(t, codes[0], "the flood is answered, not dropped")
	require.Equal(t, clients*perClient, codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests])
	require.Equal(t, http.StatusOK, get(good, "admin", "right-password"))
	requireCleanLog(t, p)
}

// pollLatencies makes n logged-in requests, each of which must succeed,
// and returns their durations.
func pollLatencies(t *testing.T, client *http.Client, get func(*http.Client, string, string) int, n int) []time.Duration {
	t.Helper()
	d := make([]time.Duration, 0, n)
	for range n {
		begin := time.Now()
		require.Equal(t, http.StatusOK, get(client, "admin", "right-password"))
		d = append(d, time.Since(begin))
	}
	return d
}

func p95(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*95/100]
}

// procStatusKiB reads a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func procStatusKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err, line)
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// importRSSBoundMiB bounds how far the peak RSS of the appliance may grow
// above its RSS before six parallel 32 MiB imports of short lines (about
// 636,000 samples each). An import streams in batches of 256 KiB (about
// 4 MiB parsed) and at most ui.DefaultMaxConcurrentImports run at once;
// the rest of the growth is VictoriaMetrics' own (its pending rows and
// in-memory parts for 3.8 million new rows, and the caches of 6,000 new
// series), the head's copy of the 3.8 million samples until its next
// flush (storage/head.go), and the Go heap's headroom. Measured on the
// shared 2-core box: +242 MiB streamed before the head, +431 MiB at worst
// with it (three fresh-clone CI runs); +595 MiB when each body was parsed
// whole (two at a time, and before the head), which this bound fails.
const importRSSBoundMiB = 512

// TestAbuseParallelImports posts six 32 MiB text bodies at once: the
// appliance's peak RSS (VmHWM, reset before the imports) stays within
// importRSSBoundMiB of its RSS before them, /-/healthy answers within a
// second throughout, and every sample is queryable afterwards.
func TestAbuseParallelImports(t *testing.T) {
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, "scrape_configs: []\n"), filepath.Join(dir, "data"))
	pid := p.cmd.Process.Pid

	const imports, bodyBytes, seriesPerImport = 6, 32 << 20, 1000
	end := time.Now().Add(-time.Minute).Truncate(10 * time.Second)
	bodies := make([][]byte, imports)
	lines := make([]int, imports)
	for i := range bodies {
		var b bytes.Buffer
		b.Grow(bodyBytes + 256)
		var line []byte
		for n := 0; ; n++ {
			step := n / seriesPerImport
			ts := end.Add(-time.Duration(step) * 10 * time.Second).UnixMilli()
			// Short lines (about 45 bytes): many samples a MiB, as
			// a backfill of few-label series sends.
			line = fmt.Appendf(line[:0], "abuse_import{imp=\"%d\",gpu=\"%d\"} %d %d\n", i, n%seriesPerImport, n, ts)
			if b.Len()+len(line) > bodyBytes { // web.max_request_body_bytes is 32 MiB
				break
			}
			b.Write(line)
			lines[i]++
		}
		bodies[i] = b.Bytes()
	}

	baseRSS := procStatusKiB(t, pid, "VmRSS")
	// Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0).
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0o644))

	client := &http.Client{Timeout: 5 * time.Minute}
	var wg sync.WaitGroup
	codes := make([]int, imports)
	answers := make([]string, imports)
	took := make([]time.Duration, imports)
	begin := time.Now()
	for i := range imports {
		wg.Go(func() {
			start := time.Now()
			req, err := http.NewRequest(http.MethodPost, p.url("/api/v1/import/prometheus"), bytes.NewReader(bodies[i]))
			if err != nil {
				answers[i] = err.Error()
				return
			}
			req.Header.Set("Content-Type", "text/plain")
			resp, err := client.Do(req)
			if err != nil {
				answers[i] = err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			codes[i], answers[i], took[i] = resp.StatusCode, string(b), time.Since(start)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var worst time.Duration
	polls := 0
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-time.After(250 * time.Millisecond):
			worst = max(worst, requireHealthy(t, "http", p.addr, nil))
			polls++
		}
	}
	all := time.Since(begin)
	peak := procStatusKiB(t, pid, "VmHWM")
	for i := range imports {
		require.Equal(t, http.StatusNoContent, codes[i], "import %d: %.300s", i, answers[i])
	}
	growth := (peak - baseRSS) >> 10
	t.Logf("6 parallel 32 MiB imports (%d lines each) in %s (each %v); RSS before %d MiB, peak %d MiB (+%d MiB, bound +%d MiB); /-/healthy worst %s over %d polls",
		lines[0], all.Round(100*time.Millisecond), roundAll(took), baseRSS>>10, peak>>10, growth, importRSSBoundMiB, worst, polls)
	require.Less(t, growth, int64(importRSSBoundMiB), "peak RSS growth during the imports")

	eventually(t, 60*time.Second, "every imported sample queryable", func() bool {
		v := p.instant("sum by (imp) (count_over_time(abuse_import[3h]))", time.Time{})
		if len(v) != imports {
			return false
		}
		for _, s := range v {
			i, err := strconv.Atoi(s.Metric["imp"])
			require.NoError(t, err)
			if value(t, s) != float64(lines[i]) {
				return false
			}
		}
		return true
	})
	requireHealthy(t, "http", p.addr, nil)
	requireCleanLog(t, p)
}

func roundAll(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(100 * time.Millisecond)
	}
	return out
}

// procCPU is the CPU time (user and system) of process pid, from
// /proc/<pid>/stat (in clock ticks of 1/100 s, Linux's USER_HZ).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	// The command name (field 2) may hold spaces; fields count from
	// after its closing parenthesis.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, err := strconv.ParseInt(f[11], 10, 64)
	require.NoError(t, err)
	stime, err := strconv.ParseInt(f[12], 10, 64)
	require.NoError(t, err)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
