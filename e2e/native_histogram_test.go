package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/bench/harness"
)

// nativeHistogramTarget serves, in protobuf when asked (as Prometheus
// with scrape_native_histograms asks), a native histogram with two series
// whose observations are fixed before the first scrape, a counter and a
// gauge.
func nativeHistogramTarget(t *testing.T) *httptest.Server {
	t.Helper()
	reg := prometheus.NewRegistry()
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:                        "req_duration_seconds",
		Help:                        "Request latency.",
		NativeHistogramBucketFactor: 1.1, // schema 3
	}, []string{"path"})
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "req_total", Help: "Requests."}, []string{"path"})
	inflight := prometheus.NewGauge(prometheus.GaugeOpts{Name: "req_in_flight", Help: "Requests in flight."})
	reg.MustRegister(lat, reqs, inflight)
	// 1000 observations spread log-uniformly over 1 ms..10 s (/a) and
	// 3 ms..30 s (/b): about 110 populated buckets each at schema 3.
	for i := range 1000 {
		v := 0.001 * math.Pow(10, 4*float64(i)/999)
		lat.WithLabelValues("/a").Observe(v)
		lat.WithLabelValues("/b").Observe(3 * v)
	}
	reqs.WithLabelValues("/a").Add(1000)
	reqs.WithLabelValues("/b").Add(1000)
	inflight.Set(4)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return srv
}

// startPrometheus runs Prometheus with the config body until the test
// ends, and waits until it is ready.
func startPrometheus(t *testing.T, bin, config string) *proc {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(config), 0o644))
	addr := freeAddr(t)
	return startExternal(t, bin, addr, "/-/ready", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr).out
}

// metricSums reads a /metrics page and sums the values of each metric
// name over its label sets.
func metricSums(t *testing.T, u string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 && i < len(name) {
			name = line[:i]
			rest = line[strings.LastIndexByte(line, '}')+2:]
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err == nil {
			out[name] += v
		}
	}
	require.NoError(t, sc.Err())
	_, _ = io.Copy(io.Discard, resp.Body)
	return out
}

// series lists the label sets matching match.
func (p *proc) series(match string) []map[string]string {
	p.t.Helper()
	code, r := p.get("/api/v1/series", url.Values{"match[]": {match}, "start": {strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)}})
	require.Equal(p.t, http.StatusOK, code, r.Error)
	var out []map[string]string
	require.NoError(p.t, json.Unmarshal(r.Data, &out))
	return out
}

func seriesKey(ls map[string]string) string {
	keys := make([]string, 0, len(ls))
	for k, v := range ls {
		keys = append(keys, k+"="+strconv.Quote(v))
	}
	sort.Strings(keys)
	return "{" + strings.Join(keys, ",") + "}"
}

// TestNativeHistogramsFromPrometheus: a real Prometheus scrapes a target
// with native histograms (scrape_native_histograms) and remote-writes to
// the appliance with remote write 1.0 and 2.0. Every series arrives, the
// senders never retry or fail a sample, and histogram_quantile on the
// stored classic form matches Prometheus' on the native histogram within
// the width of the native bucket the quantile is in. The appliance's own
// scrape of the same target with scrape_native_histograms agrees.
func TestNativeHistogramsFromPrometheus(t *testing.T) {
	bin := externalBinary(t, "github.com/prometheus/prometheus/cmd/prometheus", harness.PrometheusVersion)
	target := nativeHistogramTarget(t)
	host := strings.TrimPrefix(target.URL, "http://")

	dir := t.TempDir()
	app := start(t, writeConfig(t, dir, `global:
  scrape_interval: 1s
scrape_configs:
  - job_name: nh_self
    scrape_native_histograms: true
    static_configs:
      - targets: ['`+host+`']
`), filepath.Join(dir, "data"))
	prom := startPrometheus(t, bin, fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
  - job_name: nh
    scrape_native_histograms: true
    static_configs:
      - targets: ['%[1]s']
remote_write:
  - name: v1
    url: %[2]s
    send_native_histograms: true
    queue_config: {batch_send_deadline: 1s}
  - name: v2
    url: %[2]s
    protobuf_message: io.prometheus.write.v2.Request
    send_native_histograms: true
    queue_config: {batch_send_deadline: 1s}
`, host, app.url("/api/v1/write")))

	// Both queues have sent histograms, and the appliance stores them.
	var state string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last state: %s", state)
		}
	})
	eventually(t, 90*time.Second, "histograms sent by both remote-write queues and stored", func() bool {
		m := metricSums(t, prom.url("/metrics"))
		pushed := len(app.instant(`req_duration_seconds_count{job="nh"}`, time.Time{}))
		scraped := len(app.instant(`req_duration_seconds_count{job="nh_self"}`, time.Time{}))
		state = fmt.Sprintf("histograms sent %v, failed %v, retried %v; appliance has %d pushed, %d scraped",
			m["prometheus_remote_storage_histograms_total"], m["prometheus_remote_storage_histograms_failed_total"],
			m["prometheus_remote_storage_histograms_retried_total"], pushed, scraped)
		return m["prometheus_remote_storage_histograms_total"] >= 8 && pushed == 2 && scraped == 2
	})

	// Every series Prometheus has arrived: native histograms as their
	// classic series, the rest as they are.
	promSeries := prom.series(`{job="nh"}`)
	have := map[string]bool{}
	for _, ls := range app.series(`{job="nh"}`) {
		have[seriesKey(ls)] = true
	}
	natives := 0
	for _, ls := range promSeries {
		if ls["__name__"] == "req_duration_seconds" {
			natives++
			for _, suffix := range []string{"_count", "_sum"} {
				c := map[string]string{}
				for k, v := range ls {
					c[k] = v
				}
				c["__name__"] += suffix
				require.True(t, have[seriesKey(c)], "missing %s", seriesKey(c))
			}
			continue
		}
		require.True(t, have[seriesKey(ls)], "missing %s", seriesKey(ls))
	}
	require.Equal(t, 2, natives)
	buckets := len(app.series(`req_duration_seconds_bucket{job="nh",path="/a"}`))
	t.Logf("Prometheus series of the job: %d (2 native histograms); appliance _bucket series for path=/a: %d", len(promSeries), buckets)
	require.Greater(t, buckets, 50, "schema 3 over four decades populates ~110 buckets")

	// Quantiles: Prometheus on the native histogram, the appliance on
	// the classic form (pushed, and its own scrape).
	const bucketRatio = 1.0905077326652577 // 2^(2^-3): a schema-3 bucket's width
	worst := 0.0
	for _, q := range []float64{0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99} {
		for _, path := range []string{"/a", "/b"} {
			want := prom.instant(fmt.Sprintf(`histogram_quantile(%g, req_duration_seconds{job="nh",path=%q})`, q, path), time.Time{})
			got := app.instant(fmt.Sprintf(`histogram_quantile(%g, req_duration_seconds_bucket{job="nh",path=%q})`, q, path), time.Time{})
			self := app.instant(fmt.Sprintf(`histogram_quantile(%g, req_duration_seconds_bucket{job="nh_self",path=%q})`, q, path), time.Time{})
			require.Len(t, want, 1)
			require.Len(t, got, 1)
			require.Len(t, self, 1)
			w, g, s := value(t, want[0]), value(t, got[0]), value(t, self[0])
			require.True(t, g >= w/bucketRatio && g <= w*bucketRatio, "q=%g path=%s: appliance %g, Prometheus %g: more than a bucket apart", q, path, g, w)
			require.InEpsilon(t, g, s, 1e-9, "q=%g path=%s: own scrape %g, pushed %g", q, path, s, g)
			worst = max(worst, math.Abs(g-w)/w)
		}
	}
	t.Logf("histogram_quantile: worst relative difference appliance vs Prometheus %.4f (bucket width %.4f)", worst, bucketRatio-1)

	// The senders never retried nor failed anything.
	m := metricSums(t, prom.url("/metrics"))
	for _, name := range []string{
		"prometheus_remote_storage_samples_retried_total", "prometheus_remote_storage_samples_failed_total",
		"prometheus_remote_storage_histograms_retried_total", "prometheus_remote_storage_histograms_failed_total",
	} {
		v, ok := m[name]
		require.True(t, ok, "%s not on Prometheus' /metrics", name)
		require.Zero(t, v, name)
	}
	t.Logf("Prometheus sent %v samples and %v histograms, retried 0, failed 0",
		m["prometheus_remote_storage_samples_total"], m["prometheus_remote_storage_histograms_total"])

	am := metricSums(t, app.url("/metrics"))
	require.Positive(t, am["appliance_native_histograms_converted_total"])
	require.Zero(t, am["appliance_native_histograms_dropped_total"])
	t.Logf("appliance converted %v native histograms, dropped 0", am["appliance_native_histograms_converted_total"])

	// The appliance's own scrape is healthy.
	up := app.instant(`up{job="nh_self"}`, time.Time{})
	require.Len(t, up, 1)
	require.Equal(t, 1.0, value(t, up[0]))
}
