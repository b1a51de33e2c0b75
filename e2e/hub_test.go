package e2e

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
)

// thanosVersion is the Thanos release the hub is tested over: Receive
// (a hashring of two receivers, a filesystem object store) and Query.
const thanosVersion = "v0.42.5"

// thanosBinary returns Thanos thanosVersion, built from the Go module
// proxy through the wrapper module testdata/thanos (Thanos' go.mod has
// replace directives, which `go install pkg@version` refuses), with
// Go 1.26.10 and the tags of Thanos' release build (netgo, slicelabels:
// without slicelabels receive panics on its first gRPC answer). The
// binary is cached in the user cache like externalBinary's and rebuilt
// when its build info names another Thanos or lacks the tags. $THANOS
// names a binary to use instead.
func thanosBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("THANOS"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "appliance-e2e", "thanos-"+thanosVersion, "thanos")
	if thanosBuilt(bin) {
		return bin
	}
	wrapper, err := filepath.Abs(filepath.Join("testdata", "thanos"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	begin := time.Now()
	tmp := bin + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "netgo,slicelabels", "-o", tmp, "github.com/thanos-io/thanos/cmd/thanos")
	cmd.Dir = wrapper
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=go1.26.10", "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		msg := fmt.Sprintf("cannot build thanos %s from the module proxy: %v\n%s", thanosVersion, err, log.String())
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	require.NoError(t, os.Rename(tmp, bin))
	require.True(t, thanosBuilt(bin), "the built thanos has no build info of %s with slicelabels", thanosVersion)
	t.Logf("thanos %s built in %s", thanosVersion, time.Since(begin).Round(time.Second))
	return bin
}

// thanosBuilt reports whether bin is Thanos thanosVersion built with the
// slicelabels tag.
func thanosBuilt(bin string) bool {
	info, err := buildinfo.ReadFile(bin)
	if err != nil || info.Path != "github.com/thanos-io/thanos/cmd/thanos" {
		return false
	}
	// The module of the main package is Thanos' (the wrapper's go.mod
	// only requires it).
	version := info.Main.Path == "github.com/thanos-io/thanos" && info.Main.Version == thanosVersion
	for _, d := range info.Deps {
		if d.Path == "github.com/thanos-io/thanos" && d.Version == thanosVersion {
			version = true
		}
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" && strings.Contains(s.Value, "slicelabels") {
			return version
		}
	}
	return false
}

// thanosCluster is Thanos Receive (two receivers in one hashring) and
// Thanos Query over both.
type thanosCluster struct {
	receivers []*external // their HTTP addresses: /-/ready, /api/v1/receive on rw
	rw        []string    // remote-write addresses
	query     *external
}

// writeURL is the remote-write endpoint of receiver i.
func (c *thanosCluster) writeURL(i int) string { return "http://" + c.rw[i] + "/api/v1/receive" }

// startThanos starts two receivers sharing a hashring (replication
// factor 1: each series lives on the one receiver the hashring picks;
// the other forwards it over gRPC), each with its own TSDB and a
// filesystem object store for its blocks, and Thanos Query over both.
// Every port is a free one: the default ports (10901, 19391 capnproto)
// may be taken by others.
func startThanos(t *testing.T) *thanosCluster {
	t.Helper()
	bin := thanosBinary(t)
	dir := t.TempDir()
	grpc := []string{freeAddr(t), freeAddr(t)}
	ring, err := json.Marshal([]map[string]any{{"hashring": "default", "endpoints": grpc}})
	require.NoError(t, err)
	ringFile := filepath.Join(dir, "hashring.json")
	require.NoError(t, os.WriteFile(ringFile, ring, 0o644))
	objstore := fmt.Sprintf("type: FILESYSTEM\nconfig:\n  directory: %s\n", filepath.Join(dir, "bucket"))

	c := &thanosCluster{}
	for i := range grpc {
		httpAddr, rw := freeAddr(t), freeAddr(t)
		c.rw = append(c.rw, rw)
		c.receivers = append(c.receivers, startExternal(t, bin, httpAddr, "/-/ready", "receive",
			"--tsdb.path="+filepath.Join(dir, fmt.Sprintf("receive%d", i)),
			"--grpc-address="+grpc[i],
			"--http-address="+httpAddr,
			"--remote-write.address="+rw,
			"--receive.capnproto-address="+freeAddr(t),
			"--receive.local-endpoint="+grpc[i],
			"--receive.hashrings-file="+ringFile,
			"--receive.replication-factor=1",
			fmt.Sprintf("--label=receive_replica=\"r%d\"", i),
			"--objstore.config="+objstore,
		))
	}
	queryAddr := freeAddr(t)
	c.query = startExternal(t, bin, queryAddr, "/-/ready", "query",
		"--http-address="+queryAddr,
		"--grpc-address="+freeAddr(t),
		"--endpoint="+grpc[0],
		"--endpoint="+grpc[1],
		"--query.replica-label=receive_replica",
	)
	return c
}

// pushWrite sends one remote-write 1.0 request (prompb, snappy) to url.
func pushWrite(url string, req *prompb.WriteRequest) error {
	raw, err := req.Marshal()
	if err != nil {
		return err
	}
	hr, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("remote write to %s: %s: %s", url, resp.Status, body.String())
	}
	return nil
}

// hubLatency is the fleet-wide question the hub must answer per box.
const hubLatency = `histogram_quantile(0.95, sum by (le, box) (rate(vllm:e2e_request_latency_seconds_bucket[1m])))`

// TestHubOverThanos: three appliances, each scraping its own simulated
// vLLM fleet with external_labels box: a|b|c, remote-write to Thanos
// Receive (two receivers, one hashring), and the test pushes a fourth
// box itself; an appliance in hub mode (storage.remote_query) over
// Thanos Query answers the fleet-wide P95 with one series per box
// (instant and range), lists the boxes, narrows a query to one box with
// extra_label, and evaluates a rule over all boxes that fires and
// reaches a webhook; the hub's own ALERTS, remote-written to a receiver,
// come back through Thanos Query. In Chromium the box selector lists the
// boxes and narrows the page's queries. With Thanos Query down the hub
// answers an error naming it, the rule shows it, and the hub stays up; a
// reload without remote_query is local mode again.
func TestHubOverThanos(t *testing.T) {
	begin := time.Now()
	cluster := startThanos(t)
	t.Logf("thanos cluster ready in %s", time.Since(begin).Round(time.Millisecond))

	// Three boxes, each an appliance scraping its own simulated vLLM
	// fleet and remote-writing to a receiver (a, c to one, b to the
	// other; the hashring spreads the series over both).
	boxes := []string{"a", "b", "c"}
	for i, box := range boxes {
		fleet := runFleet(t, 1)
		bdir := t.TempDir()
		start(t, writeConfig(t, bdir, fmt.Sprintf(`global: {scrape_interval: 1s, external_labels: {box: %s}}
scrape_configs:
  - job_name: vllm
    static_configs: [{targets: [%q]}]
remote_write:
  - url: %s
    queue_config: {batch_send_deadline: 200ms, min_backoff: 50ms, max_backoff: 1s}
`, box, fleet.Targets()[0], cluster.writeURL(i%len(cluster.rw)))), filepath.Join(bdir, "data"))
	}
	// One more box, pushed by the test itself in remote write 1.0
	// (prompb, snappy): the receivers take any Prometheus sender.
	pushBoxes(t, cluster, []string{"pushed"})
	boxes = append(boxes, "pushed")

	hook := newWebhookSink(t)
	dir := t.TempDir()
	rules := filepath.Join(dir, "fleet.rules.yml")
	require.NoError(t, os.WriteFile(rules, []byte(`groups:
  - name: fleet
    interval: 1s
    rules:
      - alert: FleetP95High
        expr: `+hubLatency+` > 0
        labels: {severity: P1}
        annotations: {summary: "box {{ $labels.box }}: P95 {{ $value }}s"}
`), 0o644))
	// The hub remote-writes its own series (its rules' ALERTS) to the
	// same engine, as vmalert does, so that its queries see them.
	hub := start(t, writeConfig(t, dir, fmt.Sprintf(`global: {evaluation_interval: 1s}
storage:
  remote_query:
    url: http://%s
    timeout: 20s
remote_write:
  - url: %s
    queue_config: {batch_send_deadline: 200ms, min_backoff: 50ms, max_backoff: 1s}
rule_files: [%s]
alerting:
  route:
    receiver: hook
    group_by: [alertname]
    group_wait: 1s
    group_interval: 2s
    repeat_interval: 1h
  receivers:
    - name: hook
      webhook_configs:
        - url: %s/hook
`, cluster.query.addr, cluster.writeURL(1), rules, hook.srv.URL)), filepath.Join(dir, "data"))

	// The fleet-wide P95: one series per box, through Thanos Query.
	var got []vectorSample
	eventually(t, 60*time.Second, "the hub's P95 of every box", func() bool {
		got = hub.instant(hubLatency, time.Time{})
		return slices.Equal(sampleBoxes(got), boxes)
	})
	for _, s := range got {
		require.Greater(t, value(t, s), 0.0, "box %s", s.Metric["box"])
	}
	t.Logf("every box's P95 through the hub after %s", time.Since(begin).Round(time.Millisecond))

	// A range query, series and label values read Thanos too. The range
	// ends at the instant answered above, a step of it: every box has a
	// point there.
	at := time.Now()
	got = hub.instant(hubLatency, at)
	require.Equal(t, boxes, sampleBoxes(got))
	end := fmt.Sprintf("%.3f", float64(at.UnixMilli())/1000)
	begin2 := fmt.Sprintf("%.3f", float64(at.Add(-2*time.Minute).UnixMilli())/1000)
	code, r := hub.get("/api/v1/query_range", url.Values{"query": {hubLatency}, "start": {begin2}, "end": {end}, "step": {"15"}})
	require.Equal(t, http.StatusOK, code, r.Error)
	var matrix []struct {
		Metric map[string]string `json:"metric"`
	}
	require.NoError(t, json.Unmarshal(rangeResult(t, r), &matrix))
	require.Len(t, matrix, len(boxes), "%+v", matrix)
	code, r = hub.get("/api/v1/label/box/values", nil)
	require.Equal(t, http.StatusOK, code, r.Error)
	var vals []string
	require.NoError(t, json.Unmarshal(r.Data, &vals))
	require.Equal(t, boxes, vals)
	code, r = hub.get("/api/v1/appliance/boxes", nil)
	require.Equal(t, http.StatusOK, code, r.Error)
	var bx struct {
		Labels []string            `json:"labels"`
		Values map[string][]string `json:"values"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &bx))
	require.Equal(t, []string{"box"}, bx.Labels)
	require.Equal(t, boxes, bx.Values["box"])

	// The dashboard's services are the fleet's, found through Thanos.
	code, r = hub.get("/api/v1/appliance/services", nil)
	require.Equal(t, http.StatusOK, code, r.Error)
	var services []struct {
		Job       string   `json:"job"`
		Instances []string `json:"instances"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &services))
	instances := 0
	for _, s := range services {
		if s.Job == "vllm" {
			instances += len(s.Instances)
		}
	}
	require.GreaterOrEqual(t, instances, 3, "the three boxes' vLLM instances: %+v", services)

	t.Logf("services found after %s", time.Since(begin).Round(time.Millisecond))
	// The hub's own ALERTS came back through Thanos: one per box.
	eventually(t, 60*time.Second, "the hub's ALERTS in Thanos", func() bool {
		return slices.Equal(sampleBoxes(hub.instant(`ALERTS{alertname="FleetP95High",alertstate="firing"}`, time.Time{})), boxes)
	})

	// The box selector's extra_label narrows the same query to one box.
	code, r = hub.get("/api/v1/query", url.Values{"query": {hubLatency}, "extra_label": {"box=b"}})
	require.Equal(t, http.StatusOK, code, r.Error)
	var one []vectorSample
	require.NoError(t, json.Unmarshal(vectorResult(t, r), &one))
	require.Equal(t, []string{"b"}, sampleBoxes(one))

	// The rule over all boxes fires for each and notifies.
	eventually(t, 90*time.Second, "a notification naming every box", func() bool {
		seen := map[string]bool{}
		for _, p := range hook.payloads() {
			for _, a := range p.Alerts {
				if a.Labels["alertname"] == "FleetP95High" && a.Status == "firing" {
					seen[a.Labels["box"]] = true
				}
			}
		}
		return len(seen) == len(boxes)
	})
	t.Logf("every box notified after %s", time.Since(begin).Round(time.Millisecond))

	// The dashboard's box selector lists the boxes and narrows the
	// page's queries to the one picked.
	t.Run("box selector", func(t *testing.T) { hubBoxSelector(t, hub, boxes) })

	t.Logf("box selector checked after %s", time.Since(begin).Round(time.Millisecond))

	// Thanos Query down: the hub answers an error naming it, and lives.
	require.NoError(t, cluster.query.out.cmd.Process.Kill())
	<-cluster.query.out.done
	code, r = hub.get("/api/v1/query", url.Values{"query": {hubLatency}})
	require.NotEqual(t, http.StatusOK, code)
	require.Contains(t, r.Error, "remote_query http://"+cluster.query.addr)
	t.Logf("with Thanos Query down: %d %s", code, r.Error)
	// The rule's evaluation fails the same way, shown in /api/v1/rules.
	eventually(t, 30*time.Second, "the rule's lastError naming Thanos Query", func() bool {
		code, r := hub.get("/api/v1/rules", nil)
		if code != http.StatusOK {
			return false
		}
		var d struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		}
		require.NoError(t, json.Unmarshal(r.Data, &d))
		for _, g := range d.Groups {
			for _, rl := range g.Rules {
				if rl.Name == "FleetP95High" && rl.Health == "err" && strings.Contains(rl.LastError, "remote_query http://"+cluster.query.addr) {
					return true
				}
			}
		}
		return false
	})
	t.Logf("the rule's lastError after %s", time.Since(begin).Round(time.Millisecond))
	code, _ = hub.get("/api/v1/status/buildinfo", nil)
	require.Equal(t, http.StatusOK, code, "the hub is still up")

	// A reload without remote_query is local mode again, at once: the
	// query answers 200 from the local storage, which holds no box.
	writeConfig(t, dir, "global: {evaluation_interval: 1s}\n")
	code, body := hub.post("/-/reload", "text/plain", nil, nil)
	require.Equal(t, http.StatusOK, code, body)
	require.Empty(t, hub.instant(hubLatency, time.Time{}))
	t.Logf("TestHubOverThanos took %s", time.Since(begin).Round(time.Millisecond))
}

// pushBoxes writes a latency histogram per box, box i to receiver i
// mod 2: two minutes of history at once, then a sample per series every
// second until the test ends. Box i's requests (one a second) land in
// bucket i+1, so its P95 is within that bucket.
func pushBoxes(t *testing.T, c *thanosCluster, boxes []string) {
	t.Helper()
	les := []string{"0.1", "0.25", "0.5", "1", "+Inf"}
	base := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	write := func(from, to time.Time) error {
		for i, box := range boxes {
			req := &prompb.WriteRequest{}
			for j, le := range les {
				ts := prompb.TimeSeries{Labels: []prompb.Label{
					{Name: "__name__", Value: "vllm:e2e_request_latency_seconds_bucket"},
					{Name: "box", Value: box},
					{Name: "job", Value: "vllm"},
					{Name: "le", Value: le},
				}}
				for at := from; !at.After(to); at = at.Add(time.Second) {
					v := 0.0
					if j >= i+1 {
						v = at.Sub(base).Seconds()
					}
					ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: at.UnixMilli(), Value: v})
				}
				req.Timeseries = append(req.Timeseries, ts)
			}
			if err := pushWrite(c.writeURL(i%len(c.rw)), req); err != nil {
				return err
			}
		}
		return nil
	}
	last := time.Now().Truncate(time.Second)
	require.NoError(t, write(base, last))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				now = now.Truncate(time.Second)
				if !now.After(last) {
					continue
				}
				if err := write(last.Add(time.Second), now); err != nil {
					t.Errorf("push: %v", err)
					return
				}
				last = now
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func sampleBoxes(v []vectorSample) []string {
	var out []string
	for _, s := range v {
		out = append(out, s.Metric["box"])
	}
	slices.Sort(out)
	return out
}

func vectorResult(t *testing.T, r apiResult) json.RawMessage {
	t.Helper()
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &d))
	require.Equal(t, "vector", d.ResultType)
	return d.Result
}

func rangeResult(t *testing.T, r apiResult) json.RawMessage {
	t.Helper()
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &d))
	require.Equal(t, "matrix", d.ResultType)
	return d.Result
}

// hubBoxSelector opens the hub's dashboard in headless Chromium: the box
// selector (data-testid="box", data-box-label, an option data-box per
// box) lists every box; picking one puts extra_label=box=<value> in the
// URL and in the page's PromQL requests.
func hubBoxSelector(t *testing.T, hub *proc, boxes []string) {
	chrome := chromiumPath(t)
	base := "http://" + hub.addr
	requireBundle(t, base)
	bctx, b := openBrowserFor(t, chrome, 5*time.Minute)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
		defer cancel()
		require.NoError(t, chromedp.Do(ctx, actions...), what)
	}
	eval := func(expr string, out any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
		require.NoError(t, err, "evaluate %s", expr)
		require.NoError(t, json.Unmarshal(raw, out), "evaluate %s: %s", expr, raw)
	}

	t0 := time.Now()
	do("the box selector", chromedp.Navigate(base+"/"),
		chromedp.WaitReady(chromedp.CSS(`select[data-testid="box"][data-box-label="box"] option[data-box="`+boxes[len(boxes)-1]+`"]`)))
	t.Logf("selector shown after %s", time.Since(t0).Round(time.Millisecond))
	var listed []string
	eval(`[...document.querySelectorAll('select[data-testid="box"] option[data-box]')].map(o => o.dataset.box)`, &listed)
	require.Equal(t, boxes, listed)

	b.take()
	var ok bool
	eval(`(() => { const s = document.querySelector('select[data-testid="box"]'); s.value = "b"; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, &ok)
	do("box b picked", chromedp.WaitReady(chromedp.CSS(`select[data-testid="box"][data-box-value="b"]`)))
	loc, err := chromedp.Run(bctx, chromedp.Location())
	require.NoError(t, err)
	require.Contains(t, loc, "extra_label=box%3Db")
	// Barrier: the page re-queried with the box and is ready again. From
	// the first narrowed request on, every PromQL request has the box.
	var after []string
	eventually(t, 60*time.Second, "the page's queries narrowed to box b, and ready", func() bool {
		errs, reqs := b.take()
		require.Empty(t, errs)
		for _, r := range reqs {
			if !strings.Contains(r, "/api/v1/query") {
				continue
			}
			if len(after) > 0 || strings.Contains(r, "extra_label=box%3Db") {
				after = append(after, r)
			}
		}
		var ready bool
		eval(`document.getElementById("app").dataset.ready === "true"`, &ready)

		return len(after) > 0 && ready
	})
	t.Logf("narrowed and ready after %s", time.Since(t0).Round(time.Millisecond))
	narrowed := 0
	for _, r := range after {
		require.Contains(t, r, "extra_label=box%3Db", "a PromQL request without the box: %s", r)
		narrowed++
	}
	t.Logf("%d PromQL requests narrowed to box b", narrowed)
}
