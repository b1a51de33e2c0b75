package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aiserve/appliance/clock"
	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/storage/storagetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, storagetest.LeakOptions()...)
}

// waitFor polls the storage until cond holds on the last values of
// the probe_* series.
func waitFor(t *testing.T, db *storage.DB, what string, cond func(last map[string]float64) bool) {
	t.Helper()
	var last map[string]float64
	require.Eventually(t, func() bool {
		last = storagetest.Last(t, db, `{__name__=~"probe_.+"}`)
		return cond(last)
	}, 10*time.Second, 10*time.Millisecond, "waiting for %s; have %v", what, &last)
}

func isStale(v float64) bool { return value.IsStaleNaN(v) }

func TestManagerWritesMarksStaleAndStops(t *testing.T) {
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	cfg, err := config.Load([]byte(fmt.Sprintf(`probes:
  - {name: web, kind: http, url: %q, interval: 50ms, timeout: 50ms}
  - {name: other, kind: http, url: %q, interval: 1h}
`, srv.URL, srv.URL)), "")
	require.NoError(t, err)

	// The probes' timestamps come from a clock that stands still unless
	// moved: every run writes at the same millisecond, and the writer must
	// still keep its staleness markers apart from the values they end.
	clk := clock.NewFake(time.Now().Truncate(time.Second))
	db := storagetest.OpenOptions(t, storage.Options{Now: clk.Now})
	opts := DefaultOptions()
	opts.Appendable = db
	opts.Now = clk.Now
	m, err := NewManager(opts)
	require.NoError(t, err)
	require.NoError(t, m.ApplyConfig(cfg.Probes))
	require.Empty(t, m.Names(), "nothing runs before Run")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	failed := `{__name__="probe_success", probe="web", reason="http_status"}`
	ok := `{__name__="probe_success", probe="web"}`
	otherFailed := `{__name__="probe_success", probe="other", reason="http_status"}`
	waitFor(t, db, "a failed run of each probe", func(last map[string]float64) bool {
		v, has := last[failed]
		o, hasO := last[otherFailed]
		return has && v == 0 && hasO && o == 0
	})
	require.Equal(t, 503.0, storagetest.Last(t, db, `probe_http_status_code{probe="web"}`)[`{__name__="probe_http_status_code", probe="web"}`])

	// Recovery: the success series appears, the failure series goes stale.
	healthy.Store(true)
	waitFor(t, db, "recovery", func(last map[string]float64) bool {
		v, has := last[ok]
		return has && v == 1 && isStale(last[failed])
	})

	// A reload without web: every series of web goes stale; other stays.
	require.NoError(t, m.ApplyConfig(cfg.Probes[1:]))
	require.Equal(t, []string{"other"}, m.Names())
	last := storagetest.Last(t, db, `{__name__=~"probe_.+"}`)
	require.True(t, isStale(last[ok]), "probe_success of a removed probe is marked stale")
	require.True(t, isStale(last[`{__name__="probe_http_duration_seconds", phase="connect", probe="web"}`]))
	// other ran once at start, while the server was down, and stays.
	v, has := last[otherFailed]
	require.True(t, has)
	require.Equal(t, 0.0, v)

	// A bad set is refused whole and the running set stays.
	require.ErrorIs(t, m.ApplyConfig([]*config.ProbeConfig{cfg.Probes[1], cfg.Probes[1]}), config.ErrDuplicateProbe)
	require.Equal(t, []string{"other"}, m.Names())

	// Detected probes run unless the config has the name.
	det := *cfg.Probes[0]
	det.Name = "other"
	m.SetDetected([]*config.ProbeConfig{&det})
	require.Equal(t, []string{"other"}, m.Names())

	cancel()
	require.NoError(t, <-done)
	require.True(t, isStale(storagetest.Last(t, db, `probe_success{probe="other"}`)[otherFailed]), "shutdown marks the series stale")
	require.Empty(t, m.Names())
}
