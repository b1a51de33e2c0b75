package scrape

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/storage"
)

// TestScrapeIntoStorage runs the real managers against an HTTP target and
// reads the samples, up and the end-of-run staleness markers back from the
// real storage.
func TestScrapeIntoStorage(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 3\n"))
	}))
	defer target.Close()

	sopts := storage.DefaultOptions()
	sopts.Path = t.TempDir()
	db, err := storage.Open(sopts)
	require.NoError(t, err)
	defer db.Close()

	s, err := New(Options{Appendable: db})
	require.NoError(t, err)
	host := strings.TrimPrefix(target.URL, "http://")
	cfg, err := promconfig.Load(`
global: {scrape_interval: 100ms, scrape_timeout: 100ms}
scrape_configs:
  - job_name: vllm
    static_configs: [{targets: ["`+host+`"]}]
`, nil)
	require.NoError(t, err)
	require.NoError(t, s.ApplyConfig(cfg))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	read := func(name string) []float64 {
		db.Flush()
		q, err := db.Querier(0, math.MaxInt64)
		require.NoError(t, err)
		defer q.Close()
		ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", name))
		var vals []float64
		for ss.Next() {
			it := ss.At().Iterator(nil)
			for it.Next() != 0 {
				_, v := it.At()
				vals = append(vals, v)
			}
		}
		require.NoError(t, ss.Err())
		return vals
	}
	require.Eventually(t, func() bool { return len(read("up")) >= 2 }, 20*time.Second, 100*time.Millisecond)
	require.Equal(t, 3.0, read("vllm:num_requests_running")[0])
	require.Len(t, s.Manager().TargetsActive()["vllm"], 1)

	// A target that leaves its job gets staleness markers, so its series
	// stop showing at once rather than after the 5m lookback. (As in
	// Prometheus, a job removed whole gets none.)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("other 1\n"))
	}))
	defer other.Close()
	moved, err := promconfig.Load(`
global: {scrape_interval: 100ms, scrape_timeout: 100ms}
scrape_configs:
  - job_name: vllm
    static_configs: [{targets: ["`+strings.TrimPrefix(other.URL, "http://")+`"]}]
`, nil)
	require.NoError(t, err)
	require.NoError(t, s.ApplyConfig(moved))
	require.Eventually(t, func() bool {
		vals := read("vllm:num_requests_running")
		return value.IsStaleNaN(vals[len(vals)-1])
	}, 20*time.Second, 100*time.Millisecond, "the removed target's series end with a staleness marker")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}

	require.Error(t, s.Run(context.Background()), "a Scraper runs once")
}
