package autodetect

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/scrape"
	"github.com/aiserve/appliance/storage/storagetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, storagetest.LeakOptions()...)
}

// fakeServer serves path -> (content type, body) on a random port and
// returns the port.
func fakeServer(t *testing.T, pages map[string][2]string) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", p[0])
		_, _ = io.WriteString(w, p[1])
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return n
}

const promText = "text/plain; version=0.0.4; charset=utf-8"

func fixture(t *testing.T, name string) [2]string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return [2]string{promText, string(b)}
}

// fleet starts one fake server per kind plus ports that answer something
// else, and returns kind -> port and the ports to leave alone.
func fleet(t *testing.T) (map[string]int, []int) {
	t.Helper()
	models := [2]string{"application/json", `{"object":"list","data":[{"id":"llama-3.1-8b-q4","object":"model"}]}`}
	kinds := map[string]int{
		KindVLLM:   fakeServer(t, map[string][2]string{"/metrics": fixture(t, "vllm.prom"), "/v1/models": models}),
		KindSGLang: fakeServer(t, map[string][2]string{"/metrics": fixture(t, "sglang.prom")}),
		KindTGI:    fakeServer(t, map[string][2]string{"/metrics": fixture(t, "tgi.prom")}),
		KindTriton: fakeServer(t, map[string][2]string{"/metrics": fixture(t, "triton.prom")}),
		KindDCGM:   fakeServer(t, map[string][2]string{"/metrics": fixture(t, "dcgm-exporter.prom")}),
		KindNode: fakeServer(t, map[string][2]string{"/metrics": {promText,
			"# TYPE node_cpu_seconds_total counter\nnode_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 5\nnode_exporter_build_info{version=\"1.9.1\"} 1\n"}}),
		KindOllama: fakeServer(t, map[string][2]string{"/api/version": {"application/json", `{"version":"0.33.0"}`}}),
	}
	other := []int{
		// Grafana's own /metrics: Prometheus text, but not a server we know.
		fakeServer(t, map[string][2]string{"/metrics": {promText, "# TYPE grafana_build_info gauge\ngrafana_build_info{version=\"11\"} 1\n"}}),
		// A web app: HTML everywhere.
		fakeServer(t, map[string][2]string{"/metrics": {"text/html", "<html>vllm:</html>"}, "/api/version": {"text/html", "<html></html>"}}),
	}
	return kinds, other
}

func TestDetectRecognisesEachKind(t *testing.T) {
	kinds, other := fleet(t)
	var ports []int
	for _, p := range kinds {
		ports = append(ports, p)
	}
	ports = append(ports, other...)
	closed := freePort(t)
	ports = append(ports, closed)

	var got []*config.ProbeConfig
	d, err := New(Options{Host: "127.0.0.1", Ports: ports, Interval: time.Minute, Probes: true,
		OnProbes: func(p []*config.ProbeConfig) { got = p }})
	require.NoError(t, err)
	d.Detect(context.Background())

	byPort := map[int]Found{}
	for _, f := range d.Found() {
		byPort[f.Port] = f
	}
	require.Len(t, byPort, len(kinds), "found %v", byPort)
	for kind, port := range kinds {
		require.Equal(t, kind, byPort[port].Kind, "port %d", port)
		require.Equal(t, kind != KindOllama, byPort[port].Scrape, kind)
	}
	require.Equal(t, "llama-3.1-8b-q4", byPort[kinds[KindVLLM]].Model)

	// An llm probe per OpenAI-compatible server, an http probe for Ollama.
	names := map[string]*config.ProbeConfig{}
	for _, p := range got {
		names[p.Name] = p
	}
	require.Len(t, names, 4)
	vllm := names["vllm-"+strconv.Itoa(kinds[KindVLLM])]
	require.NotNil(t, vllm)
	require.Equal(t, config.ProbeKindLLM, vllm.Kind)
	require.Equal(t, "llama-3.1-8b-q4", vllm.Model)
	require.Equal(t, "http://127.0.0.1:"+strconv.Itoa(kinds[KindVLLM])+"/v1/completions", vllm.URL)
	require.Equal(t, config.DefaultLLMProbeMaxTokens, vllm.MaxTokens)
	require.Equal(t, config.ProbeKindHTTP, names["ollama-"+strconv.Itoa(kinds[KindOllama])].Kind)

	// A server the config file scrapes already gets its probe, not a
	// second scrape job.
	d2, err := New(Options{Host: "127.0.0.1", Ports: []int{kinds[KindVLLM]}, Interval: time.Minute, Probes: true,
		Scraped: func(int) bool { return true }})
	require.NoError(t, err)
	d2.Detect(context.Background())
	require.Len(t, d2.Found(), 1)
	require.False(t, d2.Found()[0].Scrape)
	require.Len(t, d2.Probes(), 1)
	targets, _ := d2.targets(KindVLLM)
	require.Empty(t, targets)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// TestFoundServersStayWhileDown: a server that stops answering stays a
// target (its up goes to 0); one whose port answers something else is
// dropped.
func TestFoundServersStayWhileDown(t *testing.T) {
	var mu sync.Mutex
	body := fixture(t, "vllm.prom")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", body[0])
		_, _ = io.WriteString(w, body[1])
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	d, err := New(Options{Host: "127.0.0.1", Ports: []int{port}, Interval: time.Minute})
	require.NoError(t, err)
	d.Detect(context.Background())
	require.Len(t, d.Found(), 1)

	mu.Lock()
	body = [2]string{promText, "grafana_build_info 1\n"}
	mu.Unlock()
	d.Detect(context.Background())
	require.Empty(t, d.Found())
}

// TestDetectedServersAreScraped runs Prometheus' discovery and scrape
// managers with the Detector as a job source: every found server is
// scraped under the job of its kind, with discovered labels that say it was
// detected; Ollama (no /metrics) and the other ports are not targets.
func TestDetectedServersAreScraped(t *testing.T) {
	kinds, other := fleet(t)
	ports := append([]int{}, other...)
	for _, p := range kinds {
		ports = append(ports, p)
	}
	d, err := New(Options{Host: "127.0.0.1", Ports: ports, Interval: time.Minute})
	require.NoError(t, err)

	db := storagetest.Open(t)
	s, err := scrape.New(scrape.Options{Appendable: db})
	require.NoError(t, err)
	s.AddJobSource(d)
	cfg := config.Default("127.0.0.1:1")
	cfg.Global.ScrapeInterval = model.Duration(time.Second)
	cfg.Global.ScrapeTimeout = model.Duration(time.Second)
	// A job of the file named vllm: the detected one becomes
	// autodetect-vllm with job label vllm.
	pc := cfg.PrometheusConfig()
	vllmJob := *pc.ScrapeConfigs[0]
	vllmJob.JobName = "vllm"
	pc.ScrapeConfigs = []*promconfig.ScrapeConfig{&vllmJob}
	require.NoError(t, s.ApplyConfig(pc))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx) })
	wg.Go(func() { _ = d.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	scraped := []string{KindVLLM, KindSGLang, KindTGI, KindTriton, KindDCGM, KindNode}
	// Two scrapes of each: up{job} has two samples at two timestamps.
	require.Eventually(t, func() bool {
		ups := storagetest.Select(t, db, `up`)
		for _, k := range scraped {
			n := 0
			for series, ss := range ups {
				if strings.Contains(series, `job="`+k+`"`) {
					n += len(ss)
				}
			}
			if n < 2 {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "every detected server scraped")
	for _, k := range scraped {
		require.NotEmpty(t, storagetest.Select(t, db, `{job="`+k+`", __name__!="up", __name__!~"scrape_.+"}`), "samples of %s beyond up", k)
	}

	active := s.Manager().TargetsActive()
	byPool := map[string][]int{}
	lb := labels.NewBuilder(labels.EmptyLabels())
	for pool, ts := range active {
		for _, tg := range ts {
			dl := tg.DiscoveredLabels(lb)
			if dl.Get("__meta_autodetect_detected") != "true" {
				continue
			}
			port, _ := strconv.Atoi(dl.Get("__meta_autodetect_port"))
			byPool[pool] = append(byPool[pool], port)
			require.Equal(t, dl.Get("__meta_autodetect_kind"), tg.Labels(lb).Get("job"), pool)
		}
	}
	require.Equal(t, map[string][]int{
		"autodetect-vllm": {kinds[KindVLLM]},
		KindSGLang:        {kinds[KindSGLang]},
		KindTGI:           {kinds[KindTGI]},
		KindTriton:        {kinds[KindTriton]},
		KindDCGM:          {kinds[KindDCGM]},
		KindNode:          {kinds[KindNode]},
	}, byPool)
}
