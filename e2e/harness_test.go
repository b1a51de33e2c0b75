package e2e

import (
	"bytes"
	"context"
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
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/demo"
)

// binary is the appliance built once for all tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "appliance-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "appliance")
	args := []string{"build", "-o", binary}
	if os.Getenv("E2E_RACE") != "" {
		// E2E_RACE=1 builds the binary with the race detector, to catch
		// races between the parts of the real, wired-up appliance.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/appliance")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build appliance:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		// The test process's own goroutines (fleets, webhook sinks, the
		// readers of the binary's output) must be gone. The harness's
		// requests use http.DefaultClient; its idle keep-alive
		// connections are closed first, as a process that exits would.
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// proc is a running appliance.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	data   string
	cfg    string
	mu     sync.Mutex
	output bytes.Buffer
	done   chan struct{}
	err    error
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.Write(b)
}

// Output is everything the process wrote so far.
func (p *proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// writeConfig writes a config file into dir and returns its path. Unless
// the body sets them, auto-detection and local readings are switched off,
// so a test sees only the targets and series it made (another test's fleet
// may be listening on vLLM's port).
func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	if !strings.Contains(body, "autodetect:") {
		body += "autodetect: {enabled: false}\n"
	}
	if !strings.Contains(body, "collectors:") {
		body += "collectors: {enabled: false}\n"
	}
	path := filepath.Join(dir, "appliance.yml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	return path
}

// launch starts the binary with args; addr is where it will listen. The
// process is killed when the test ends, and its output is logged if the
// test failed.
func launch(t *testing.T, addr string, args ...string) *proc {
	t.Helper()
	return launchCmd(t, addr, "appliance", exec.Command(binary, args...))
}

// launchCmd starts cmd (the appliance under prlimit, or an external
// program named name) as launch does: killed when the test ends, its
// output logged as name's if the test failed.
func launchCmd(t *testing.T, addr, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, addr: addr, done: make(chan struct{}), cmd: cmd}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.Output())
		}
	})
	return p
}

// startDemo runs `appliance demo` with the given number of simulated
// instances on free ports and waits until /-/ready answers 200.
func startDemo(t *testing.T, instances int) *proc {
	t.Helper()
	addr := freeAddr(t)
	p := launch(t, addr, "demo", "--base-port", "0", "--instances", strconv.Itoa(instances), "--listen", addr, "--data", filepath.Join(t.TempDir(), "data"))
	waitReady(t, p, "demo", "/-/ready")
	return p
}

// external is a process the test started (Prometheus, VictoriaMetrics).
type external struct {
	addr string
	out  *proc
}

// startExternal runs bin with args and waits until readyPath answers 200.
func startExternal(t *testing.T, bin, addr, readyPath string, args ...string) *external {
	t.Helper()
	p := launchCmd(t, addr, filepath.Base(bin), exec.Command(bin, args...))
	waitReady(t, p, filepath.Base(bin), readyPath)
	return &external{addr: addr, out: p}
}

// waitReady waits until the process p, called name, answers 200 on
// readyPath; it fails the test at once if p exits first.
func waitReady(t *testing.T, p *proc, name, readyPath string) {
	t.Helper()
	eventually(t, 60*time.Second, name+" ready", func() bool {
		select {
		case <-p.done:
			t.Fatalf("%s exited: %v\n%s", name, p.err, p.Output())
		default:
		}
		resp, err := http.Get(p.url(readyPath))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// externalBinary returns the path of pkg's command at version, built from
// the Go module proxy into the user cache on first use (bench/harness'
// GoInstall, which rebuilds when the cached binary's build info names
// another version). Without it the test fails when CI=true, and is
// skipped elsewhere.
func externalBinary(t *testing.T, pkg, version string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "appliance-e2e", filepath.Base(pkg)+"-"+version)
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	begin := time.Now()
	bin, err := harness.GoInstall(ctx, dir, pkg, version, &log)
	if err != nil {
		msg := fmt.Sprintf("cannot build %s@%s from the module proxy: %v\n%s", pkg, version, err, log.String())
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Logf("%s@%s ready in %s", filepath.Base(pkg), version, time.Since(begin).Round(time.Millisecond))
	return bin
}

// start runs `appliance run` with cfgPath (may be "") and data dir, and
// waits until /-/ready answers 200.
func start(t *testing.T, cfgPath, data string, extra ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	args := []string{"run", "--data", data, "--listen", addr}
	if cfgPath != "" {
		args = append(args, "--config", cfgPath)
	}
	p := launch(t, addr, append(args, extra...)...)
	p.data, p.cfg = data, cfgPath
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			t.Fatalf("appliance exited before it was ready: %v\n%s", p.err, p.Output())
		default:
		}
		resp, err := http.Get(p.url("/-/ready"))
		if err == nil {
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

func (p *proc) url(path string) string { return "http://" + p.addr + path }

// stop sends SIGTERM and returns the exit code and how long it took.
func (p *proc) stop() (int, time.Duration) {
	p.t.Helper()
	begin := time.Now()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("appliance did not exit within 30s of SIGTERM:\n%s", p.Output())
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(begin)
}

// kill9 kills the process without warning.
func (p *proc) kill9() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Kill())
	<-p.done
}

// apiResult is Prometheus' API envelope.
type apiResult struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// get calls an API path and decodes the envelope; it returns the HTTP code.
func (p *proc) get(path string, params url.Values) (int, apiResult) {
	p.t.Helper()
	u := p.url(path)
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	resp, err := http.Get(u)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(p.t, err)
	var r apiResult
	require.NoError(p.t, json.Unmarshal(body, &r), "body: %s", body)
	return resp.StatusCode, r
}

// vectorSample is one element of an instant vector result.
type vectorSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// instant runs an instant query at ts (zero = now) and returns the vector.
func (p *proc) instant(q string, ts time.Time) []vectorSample {
	p.t.Helper()
	params := url.Values{"query": {q}}
	if !ts.IsZero() {
		params.Set("time", fmt.Sprintf("%.3f", float64(ts.UnixMilli())/1000))
	}
	code, r := p.get("/api/v1/query", params)
	require.Equal(p.t, http.StatusOK, code, "query %q: %s", q, r.Error)
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	require.NoError(p.t, json.Unmarshal(r.Data, &data))
	require.Equal(p.t, "vector", data.ResultType, "query %q", q)
	var v []vectorSample
	require.NoError(p.t, json.Unmarshal(data.Result, &v))
	return v
}

// value parses a sample's value string.
func value(t *testing.T, s vectorSample) float64 {
	t.Helper()
	str, ok := s.Value[1].(string)
	require.True(t, ok, "value %v", s.Value)
	f, err := strconv.ParseFloat(str, 64)
	require.NoError(t, err, "value %q", str)
	return f
}

// eventually polls cond every 200ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// post sends body to path with a content type and returns code and body.
func (p *proc) post(path, contentType string, body []byte, hdr map[string]string) (int, string) {
	p.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, p.url(path), bytes.NewReader(body))
	require.NoError(p.t, err)
	req.Header.Set("Content-Type", contentType)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runFleet runs a demo vLLM fleet of n instances on free ports, at five
// requests per second per model, until the test ends.
func runFleet(t *testing.T, n int) *demo.Fleet {
	t.Helper()
	fo := demo.DefaultFleetOptions()
	fo.BasePort = 0
	fo.Instances = n
	fo.RequestRate = 5
	fleet, err := demo.NewFleet(fo)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fleet.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return fleet
}
