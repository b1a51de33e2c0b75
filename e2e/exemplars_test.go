package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"
)

// TestExemplarsFromOpenMetricsScrape: the appliance scrapes an
// OpenMetrics target whose counter and histogram carry exemplars; they
// appear in /api/v1/query_exemplars with Prometheus' answer shape, and a
// query that matches none answers [] (not null).
func TestExemplarsFromOpenMetricsScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	reqs := prometheus.NewCounter(prometheus.CounterOpts{Name: "demo_requests_total", Help: "Requests."})
	lat := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "demo_latency_seconds", Help: "Latency.", Buckets: []float64{0.1, 0.5, 1}})
	reg.MustRegister(reqs, lat)
	reqs.(prometheus.ExemplarAdder).AddWithExemplar(3, prometheus.Labels{"trace_id": "trace-counter"})
	lat.(prometheus.ExemplarObserver).ObserveWithExemplar(0.3, prometheus.Labels{"trace_id": "trace-histogram"})
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	t.Cleanup(target.Close)

	dir := t.TempDir()
	cfg := writeConfig(t, dir, `global:
  scrape_interval: 1s
scrape_configs:
  - job_name: om
    static_configs:
      - targets: ['`+strings.TrimPrefix(target.URL, "http://")+`']
`)
	p := start(t, cfg, dir+"/data")

	type result struct {
		SeriesLabels map[string]string `json:"seriesLabels"`
		Exemplars    []struct {
			Labels    map[string]string `json:"labels"`
			Value     string            `json:"value"`
			Timestamp float64           `json:"timestamp"`
		} `json:"exemplars"`
	}
	query := func(q string) []result {
		now := time.Now()
		code, r := p.get("/api/v1/query_exemplars", url.Values{
			"query": {q},
			"start": {strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)},
			"end":   {strconv.FormatInt(now.Add(time.Minute).Unix(), 10)},
		})
		require.Equal(t, http.StatusOK, code, r.Error)
		require.Equal(t, "success", r.Status)
		require.NotEqual(t, "null", string(r.Data), "Prometheus answers [] with no exemplars")
		var res []result
		require.NoError(t, json.Unmarshal(r.Data, &res))
		return res
	}
	var got []result
	eventually(t, 30*time.Second, "exemplars of the scraped counter", func() bool {
		got = query(`demo_requests_total`)
		return len(got) > 0
	})
	require.Equal(t, "om", got[0].SeriesLabels["job"])
	require.Equal(t, "trace-counter", got[0].Exemplars[0].Labels["trace_id"])
	require.Equal(t, "3", got[0].Exemplars[0].Value)
	t.Logf("counter exemplar: %v on %v", got[0].Exemplars[0].Labels, got[0].SeriesLabels)

	got = query(`demo_latency_seconds_bucket`)
	require.Len(t, got, 1)
	require.Equal(t, "0.5", got[0].SeriesLabels["le"])
	require.Equal(t, "trace-histogram", got[0].Exemplars[0].Labels["trace_id"])

	require.Empty(t, query(`no_such_metric`))
	t.Logf("histogram exemplar: %v on %v", got[0].Exemplars[0].Labels, got[0].SeriesLabels)
}
