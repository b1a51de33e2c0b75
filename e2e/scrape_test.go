package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/stretchr/testify/require"
)

// fixture is one /metrics body from ../testdata.
type fixture struct {
	name        string
	contentType string
	body        []byte
}

func loadFixtures(t *testing.T) []fixture {
	t.Helper()
	files, err := filepath.Glob("../testdata/*.prom")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var fx []fixture
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		fx = append(fx, fixture{filepath.Base(f), "text/plain; version=0.0.4; charset=utf-8", b})
	}
	b, err := os.ReadFile("../testdata/fastapi.openmetrics.txt")
	require.NoError(t, err)
	fx = append(fx, fixture{"fastapi.openmetrics.txt", "application/openmetrics-text; version=1.0.0; charset=utf-8", b})
	return fx
}

// expectedSeries parses a fixture the way the scraper does and returns
// value by series (labels without job/instance).
func expectedSeries(t *testing.T, fx fixture) map[string]float64 {
	t.Helper()
	p, err := textparse.New(fx.body, fx.contentType, nil, textparse.ParserOptions{})
	require.NotNil(t, p, "%s: %v", fx.name, err)
	out := map[string]float64{}
	var lset labels.Labels
	for {
		et, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, fx.name)
		if et != textparse.EntrySeries {
			continue
		}
		_, _, v := p.Series()
		p.Labels(&lset)
		out[lset.String()] = v
	}
	return out
}

// serveFixture serves one body at /metrics.
func serveFixture(t *testing.T, fx fixture) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", fx.contentType)
		_, _ = w.Write(fx.body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestScrapeFixtures scrapes a server per fixture (vLLM, TGI, Triton,
// SGLang, DCGM exporter, FastAPI in text and OpenMetrics) and checks that
// every sample of every body comes back through the query API with its
// value, and that up and scrape_samples_scraped are right.
func TestScrapeFixtures(t *testing.T) {
	fixtures := loadFixtures(t)
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n")
	targets := map[string]fixture{}
	for _, fx := range fixtures {
		srv := serveFixture(t, fx)
		host := strings.TrimPrefix(srv.URL, "http://")
		targets[host] = fx
		job := strings.NewReplacer(".", "_", "-", "_").Replace(fx.name)
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs: [{targets: [%q]}]\n", job, host)
	}
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, cfg.String()), filepath.Join(dir, "data"))

	eventually(t, 30*time.Second, "every target up", func() bool {
		up := p.instant("up", time.Time{})
		n := 0
		for _, s := range up {
			if value(t, s) == 1 {
				n++
			}
		}
		return n == len(fixtures)
	})

	for host, fx := range targets {
		want := expectedSeries(t, fx)
		scraped := p.instant(fmt.Sprintf("scrape_samples_scraped{instance=%q}", host), time.Time{})
		require.Len(t, scraped, 1, fx.name)
		require.Equal(t, float64(len(want)), value(t, scraped[0]), "%s: scrape_samples_scraped", fx.name)

		// Every series of the target, minus the ones the scrape adds.
		got := p.instant(fmt.Sprintf(`{instance=%q, __name__!~"up|scrape_.*"}`, host), time.Time{})
		require.Len(t, got, len(want), "%s: series stored", fx.name)
		for _, s := range got {
			delete(s.Metric, "instance")
			delete(s.Metric, "job")
			key := labels.FromMap(s.Metric).String()
			w, ok := want[key]
			require.True(t, ok, "%s: unexpected series %s", fx.name, key)
			g := value(t, s)
			if math.IsNaN(w) {
				require.True(t, math.IsNaN(g), "%s: %s = %v, want NaN", fx.name, key, g)
				continue
			}
			require.InEpsilon(t, w+1e-300, g+1e-300, 1e-11, "%s: %s", fx.name, key)
		}
	}

	// Metadata of scraped families is kept and served per family.
	code, r := p.get("/api/v1/metadata", url.Values{"metric": {"vllm:e2e_request_latency_seconds"}})
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(r.Data), `"type":"histogram"`)
	require.Contains(t, string(r.Data), "Histogram of e2e request latency in seconds.")
}

// TestBrokenTargetsFailAlone: a target that returns garbage, one that hangs
// past the timeout and one whose body is over body_size_limit each fail with
// their reason in /api/v1/targets, while a good target in the same job is
// scraped.
func TestBrokenTargetsFailAlone(t *testing.T) {
	good := serveFixture(t, fixture{"ok", "text/plain; version=0.0.4", []byte("# TYPE ok gauge\nok 1\n")})
	garbage := serveFixture(t, fixture{"garbage", "text/plain; version=0.0.4", []byte("this is {{ not metrics\n")})
	huge := serveFixture(t, fixture{"huge", "text/plain; version=0.0.4", []byte("# TYPE big gauge\n" + strings.Repeat("big{pad=\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"} 1\n", 4000))})
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop); hang.Close() })

	host := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 500ms
scrape_configs:
  - job_name: mixed
    body_size_limit: 16KB
    static_configs:
      - targets: [%q, %q, %q, %q]
`, host(good), host(garbage), host(hang), host(huge))
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, cfg), filepath.Join(dir, "data"))

	type target struct {
		ScrapeURL string `json:"scrapeUrl"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
		Labels    map[string]string
	}
	var active []target
	eventually(t, 30*time.Second, "all four targets scraped", func() bool {
		code, r := p.get("/api/v1/targets", nil)
		require.Equal(t, http.StatusOK, code)
		var data struct {
			ActiveTargets []target `json:"activeTargets"`
		}
		require.NoError(t, json.Unmarshal(r.Data, &data))
		active = data.ActiveTargets
		if len(active) != 4 {
			return false
		}
		for _, tg := range active {
			if tg.Health == "unknown" {
				return false
			}
		}
		return true
	})
	byHost := map[string]target{}
	for _, tg := range active {
		byHost[tg.Labels["instance"]] = tg
	}
	require.Equal(t, "up", byHost[host(good)].Health, byHost[host(good)].LastError)
	require.Equal(t, "down", byHost[host(garbage)].Health)
	require.NotEmpty(t, byHost[host(garbage)].LastError)
	require.Equal(t, "down", byHost[host(hang)].Health)
	require.Contains(t, byHost[host(hang)].LastError, "context deadline exceeded")
	require.Equal(t, "down", byHost[host(huge)].Health)
	require.Contains(t, byHost[host(huge)].LastError, "body size limit")

	want := map[string]float64{host(good): 1, host(garbage): 0, host(hang): 0, host(huge): 0}
	ups := map[string]float64{}
	eventually(t, 20*time.Second, "up of every target stored", func() bool {
		clear(ups)
		for _, s := range p.instant(`up{job="mixed"}`, time.Time{}) {
			ups[s.Metric["instance"]] = value(t, s)
		}
		return len(ups) == len(want)
	})
	require.Equal(t, want, ups)
	require.Len(t, p.instant(`ok`, time.Time{}), 1)
}
