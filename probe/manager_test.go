package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aiserve/appliance/config"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a storage.AppendableV2 that keeps committed samples.
type recorder struct {
	mu      sync.Mutex
	commits int
	last    map[string]float64 // series -> last value
	changed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{last: map[string]float64{}, changed: make(chan struct{}, 100)}
}

type recApp struct {
	r   *recorder
	buf map[string]float64
}

func (r *recorder) AppenderV2(context.Context) storage.AppenderV2 {
	return &recApp{r: r, buf: map[string]float64{}}
}

func (a *recApp) Append(_ storage.SeriesRef, ls labels.Labels, _, _ int64, v float64, _ *histogram.Histogram, _ *histogram.FloatHistogram, _ storage.AOptions) (storage.SeriesRef, error) {
	a.buf[ls.String()] = v
	return 0, nil
}

func (a *recApp) Commit() error {
	a.r.mu.Lock()
	defer a.r.mu.Unlock()
	for k, v := range a.buf {
		a.r.last[k] = v
	}
	a.r.commits++
	select {
	case a.r.changed <- struct{}{}:
	default:
	}
	return nil
}

func (a *recApp) Rollback() error { return nil }

func (r *recorder) get(series string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.last[series]
	return v, ok
}

func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-r.changed:
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("timed out waiting for %s; have %v", what, r.last)
		}
	}
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

	rec := newRecorder()
	opts := DefaultOptions()
	opts.Appendable = rec
	fixed := time.Unix(1_700_000_000, 0)
	opts.Now = func() time.Time { return fixed }
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
	rec.waitFor(t, "a failed run of each probe", func() bool {
		v, has := rec.get(failed)
		o, hasO := rec.get(otherFailed)
		return has && v == 0 && hasO && o == 0
	})
	v, _ := rec.get(`{__name__="probe_http_status_code", probe="web"}`)
	require.Equal(t, 503.0, v)

	// Recovery: the success series appears, the failure series goes stale.
	healthy.Store(true)
	rec.waitFor(t, "recovery", func() bool {
		v, has := rec.get(ok)
		f, _ := rec.get(failed)
		return has && v == 1 && isStale(f)
	})

	// A reload without web: every series of web goes stale; other stays.
	require.NoError(t, m.ApplyConfig(cfg.Probes[1:]))
	require.Equal(t, []string{"other"}, m.Names())
	v, _ = rec.get(ok)
	require.True(t, isStale(v), "probe_success of a removed probe is marked stale")
	v, _ = rec.get(`{__name__="probe_http_duration_seconds", phase="connect", probe="web"}`)
	require.True(t, isStale(v))
	// other ran once at start, while the server was down, and stays.
	v, has := rec.get(otherFailed)
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
	v, _ = rec.get(otherFailed)
	require.True(t, isStale(v), "shutdown marks the series stale")
	require.Empty(t, m.Names())
}
