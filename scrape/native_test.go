package scrape

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/internal/histconv"
	"github.com/aiserve/appliance/storage"
)

// TestScrapeNativeHistograms: with scrape_native_histograms the scrape
// asks for protobuf and the native histogram is stored in classic form;
// the target stays up, and when it leaves its job the classic series end
// with staleness markers.
func TestScrapeNativeHistograms(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lat_seconds", Help: "x", NativeHistogramBucketFactor: 1.1})
	reg.MustRegister(h)
	for _, v := range []float64{0.01, 0.02, 0.5, 1, 3} {
		h.Observe(v)
	}
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer target.Close()

	sopts := storage.DefaultOptions()
	sopts.Path = t.TempDir()
	db, err := storage.Open(sopts)
	require.NoError(t, err)
	defer db.Close()

	conv := histconv.New(histconv.DefaultOptions())
	s, err := New(Options{Appendable: conv.Appendable(db)})
	require.NoError(t, err)
	load := func(host string) {
		cfg, err := promconfig.Load(`
global: {scrape_interval: 100ms, scrape_timeout: 100ms}
scrape_configs:
  - job_name: nh
    scrape_native_histograms: true
    static_configs: [{targets: ["`+host+`"]}]
`, nil)
		require.NoError(t, err)
		require.NoError(t, s.ApplyConfig(cfg))
	}
	load(strings.TrimPrefix(target.URL, "http://"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	last := func(ms ...*labels.Matcher) (float64, int) {
		db.Flush()
		q, err := db.Querier(0, math.MaxInt64)
		require.NoError(t, err)
		defer q.Close()
		ss := q.Select(context.Background(), true, nil, ms...)
		v, n := math.NaN(), 0
		for ss.Next() {
			n++
			it := ss.At().Iterator(nil)
			for it.Next() != 0 {
				_, v = it.At()
			}
		}
		require.NoError(t, ss.Err())
		return v, n
	}
	name := func(n string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchEqual, "__name__", n) }
	require.Eventually(t, func() bool { v, _ := last(name("lat_seconds_count")); return v == 5 }, 20*time.Second, 100*time.Millisecond)
	up, _ := last(name("up"))
	require.Equal(t, 1.0, up, "the target stays up")
	inf, _ := last(name("lat_seconds_bucket"), labels.MustNewMatcher(labels.MatchEqual, "le", "+Inf"))
	require.Equal(t, 5.0, inf)
	_, buckets := last(name("lat_seconds_bucket"))
	require.Greater(t, buckets, 5, "a bucket per populated native bucket, plus its lower bound and +Inf")

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("other 1\n")) }))
	defer other.Close()
	load(strings.TrimPrefix(other.URL, "http://"))
	require.Eventually(t, func() bool {
		v, _ := last(name("lat_seconds_count"))
		return value.IsStaleNaN(v)
	}, 20*time.Second, 100*time.Millisecond, "the classic series of a vanished native histogram end with staleness markers")
	v, _ := last(name("lat_seconds_bucket"), labels.MustNewMatcher(labels.MatchEqual, "le", "+Inf"))
	require.True(t, value.IsStaleNaN(v))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
