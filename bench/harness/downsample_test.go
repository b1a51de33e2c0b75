package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadDownsampler(t *testing.T) {
	tiers := `{"status":"success","data":[{"tier":"raw"},{"tier":"1m","lagSeconds":42},{"tier":"5m","lagSeconds":590}]}`
	metrics := "appliance_downsample_rows_written_total{tier=\"1m\"} 10\nappliance_downsample_rows_written_total{tier=\"5m\"} 2\n"
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/status/tiers", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(tiers)) })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(metrics)) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	d, err := ReadDownsampler(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	require.Equal(t, Downsampler{Lags: "1m lag 42s, 5m lag 590s", CaughtUp: true, Rows: 12}, d)

	tiers = `{"data":[{"tier":"1m","lagSeconds":181},{"tier":"5m","lagSeconds":10}]}`
	metrics = "go_goroutines 3\n"
	d, err = ReadDownsampler(context.Background(), srv.Client(), srv.URL)
	require.NoError(t, err)
	require.Equal(t, Downsampler{Lags: "1m lag 181s, 5m lag 10s", CaughtUp: false, Rows: 0}, d)
}
