package remotewrite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
	yaml2 "go.yaml.in/yaml/v2"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/storage"
)

// receiver is a real remote write endpoint: it decodes the snappy
// protobuf (1.0 or 2.0) and keeps every sample it accepted.
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	status   []int // answers to give before accepting, in order
	requests int
	samples  map[string]map[int64]float64 // series -> t -> v
	count    int                          // samples accepted, duplicates too
	versions map[string]bool
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{samples: map[string]map[int64]float64{}, versions: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) fail(codes ...int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = append(r.status, codes...)
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	if len(r.status) > 0 {
		code := r.status[0]
		if code != http.StatusBadRequest { // 400 stays until cleared
			r.status = r.status[1:]
		}
		http.Error(w, "no", code)
		return
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	add := func(ls labels.Labels, t int64, v float64) {
		k := ls.String()
		if r.samples[k] == nil {
			r.samples[k] = map[int64]float64{}
		}
		r.samples[k][t] = v
		r.count++
	}
	ver := req.Header.Get("X-Prometheus-Remote-Write-Version")
	r.versions[ver] = true
	if ver == "2.0.0" {
		var wr writev2.Request
		if err := wr.Unmarshal(raw); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b := labels.NewScratchBuilder(8)
		for _, ts := range wr.Timeseries {
			ls, err := ts.ToLabels(&b, wr.Symbols)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, s := range ts.Samples {
				add(ls, s.Timestamp, s.Value)
			}
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var wr prompb.WriteRequest
	if err := wr.Unmarshal(raw); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, ts := range wr.Timeseries {
		b := labels.NewScratchBuilder(len(ts.Labels))
		for _, l := range ts.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		ls := b.Labels()
		for _, s := range ts.Samples {
			add(ls, s.Timestamp, s.Value)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// unique is the number of distinct samples received.
func (r *receiver) unique() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.samples {
		n += len(s)
	}
	return n
}

func (r *receiver) series() map[string]map[int64]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]map[int64]float64{}
	for k, v := range r.samples {
		out[k] = map[int64]float64{}
		for t, x := range v {
			out[k][t] = x
		}
	}
	return out
}

// remoteConfig is a remote_write entry as the config loads it.
func remoteConfig(t *testing.T, yml string) config.RemoteWriteConfigs {
	t.Helper()
	var cs config.RemoteWriteConfigs
	require.NoError(t, yaml2.UnmarshalStrict([]byte(yml), &cs))
	return cs
}

type fixture struct {
	t   *testing.T
	dir string
	db  *storage.DB
	m   *Manager
	// stop ends Run and waits for it.
	stop func()
}

// start opens a real storage and a Manager over the remotes, runs it, and
// tees the storage's commits into it. dir is the data dir (reused across
// restarts).
func start(t *testing.T, dir string, cs config.RemoteWriteConfigs, ext labels.Labels) *fixture {
	t.Helper()
	opts := storage.DefaultOptions()
	opts.Path = filepath.Join(dir, "tsdb")
	db, err := storage.Open(opts)
	require.NoError(t, err)
	m := New(Options{Dir: filepath.Join(dir, "remote_write")})
	next, err := m.Prepare(cs, ext)
	require.NoError(t, err)
	require.NoError(t, m.Apply(next))
	db.SetCommitSink(m)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	f := &fixture{t: t, dir: dir, db: db, m: m}
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			db.SetCommitSink(nil)
			require.NoError(t, m.Close())
			require.NoError(t, db.Close())
		})
	}
	t.Cleanup(f.stop)
	return f
}

// push commits n samples for each of series series, at times from t0 on
// (one commit per timestamp, as a scrape does).
func (f *fixture) push(series, n int, t0 int64, sync bool) {
	f.t.Helper()
	ctx := context.Background()
	if sync {
		ctx = storage.WithSyncCommit(ctx)
	}
	for i := range n {
		app := f.db.AppenderV2(ctx)
		for s := range series {
			ls := labels.FromStrings("__name__", "rw_test", "instance", fmt.Sprintf("i%d", s), "job", "j")
			_, err := app.Append(0, ls, 0, t0+int64(i)*1000, float64(i), nil, nil, promstorage.AOptions{})
			require.NoError(f.t, err)
		}
		require.NoError(f.t, app.Commit())
	}
}

func (f *fixture) metric(name string, rq int) float64 {
	f.t.Helper()
	qs := *f.m.remotes.Load()
	qm := f.m.metrics
	lv := []string{qs[rq].name, qs[rq].url}
	switch name {
	case "samples":
		return testutil.ToFloat64(qm.samples.WithLabelValues(lv...))
	case "failed":
		return testutil.ToFloat64(qm.failed.WithLabelValues(lv...))
	case "retried":
		return testutil.ToFloat64(qm.retried.WithLabelValues(lv...))
	case "dropped":
		return testutil.ToFloat64(qm.dropped.WithLabelValues(lv...))
	case "pending":
		return testutil.ToFloat64(qm.pending.WithLabelValues(lv...))
	}
	panic(name)
}

func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, 60*time.Second, 5*time.Millisecond, fmt.Sprintf(msg, args...))
}

func baseTime() int64 { return time.Now().Add(-time.Hour).UnixMilli() }

func TestSendsEveryCommitV1AndV2(t *testing.T) {
	r1, r2 := newReceiver(t), newReceiver(t)
	cs := remoteConfig(t, fmt.Sprintf(`
- url: %s
  queue_config: {max_samples_per_send: 70, batch_send_deadline: 10ms}
  write_relabel_configs:
    - {source_labels: [instance], regex: i9, action: drop}
- url: %s
  name: v2
  protobuf_message: io.prometheus.write.v2.Request
  queue_config: {max_samples_per_send: 1000, batch_send_deadline: 10ms}
`, r1.srv.URL, r2.srv.URL))
	f := start(t, t.TempDir(), cs, labels.FromStrings("box", "b1"))
	f.push(10, 50, baseTime(), false)
	eventually(t, func() bool { return r1.unique() == 9*50 && r2.unique() == 10*50 }, "received %d and %d", r1.unique(), r2.unique())
	require.Equal(t, map[string]bool{"0.1.0": true}, r1.versions)
	require.Equal(t, map[string]bool{"2.0.0": true}, r2.versions)
	// External labels are added; relabelling dropped i9 before the queue.
	for k := range r1.series() {
		require.Contains(t, k, `box="b1"`)
		require.NotContains(t, k, `instance="i9"`)
	}
	eventually(t, func() bool { return f.metric("samples", 0) == 450 && f.metric("pending", 0) == 0 }, "samples_total %v", f.metric("samples", 0))
	require.Equal(t, 450, r1.count, "no duplicates without a restart")
	// Sent segments are deleted; the directory is named by the hash of
	// the URL and the name.
	_, err := os.Stat(filepath.Join(f.dir, "remote_write", "v2"))
	require.NoError(t, err)
}

func TestRetriesRecoverableErrorsOnly(t *testing.T) {
	r := newReceiver(t)
	r.fail(http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusTooManyRequests)
	cs := remoteConfig(t, fmt.Sprintf(`
- url: %s
  queue_config: {max_samples_per_send: 100, batch_send_deadline: 10ms, min_backoff: 1ms, max_backoff: 5ms}
`, r.srv.URL))
	f := start(t, t.TempDir(), cs, labels.EmptyLabels())
	f.push(100, 1, baseTime(), true) // one commit: one batch
	eventually(t, func() bool { return r.unique() == 100 }, "received %d", r.unique())
	require.Equal(t, float64(3*100), f.metric("retried", 0), "each of the three failures retried the whole batch")
	require.Zero(t, f.metric("failed", 0))

	// 400: not retried, counted as failed, and the queue moves on.
	r.fail(http.StatusBadRequest)
	r.mu.Lock()
	before := r.requests
	r.mu.Unlock()
	f.push(100, 1, baseTime()+100_000, false)
	eventually(t, func() bool { return f.metric("failed", 0) == 100 }, "failed %v", f.metric("failed", 0))
	r.mu.Lock()
	requests := r.requests - before
	r.status = nil
	r.mu.Unlock()
	require.Equal(t, 1, requests, "a 400 is not retried")
	f.push(1, 1, baseTime()+200_000, false)
	eventually(t, func() bool { return r.unique() == 101 }, "received %d", r.unique())
	require.Equal(t, float64(3*100), f.metric("retried", 0))
}

func TestNoRetryOn429WhenDisabled(t *testing.T) {
	r := newReceiver(t)
	r.fail(http.StatusTooManyRequests)
	cs := remoteConfig(t, fmt.Sprintf(`
- url: %s
  queue_config: {max_samples_per_send: 100, batch_send_deadline: 10ms, retry_on_http_429: false}
`, r.srv.URL))
	f := start(t, t.TempDir(), cs, labels.EmptyLabels())
	f.push(100, 1, baseTime(), false) // one commit: one batch
	eventually(t, func() bool { return f.metric("failed", 0) == 100 }, "failed %v", f.metric("failed", 0))
	require.Zero(t, r.unique())
}

// TestDiskBoundDropsOldest: the remote is down while far more than
// max_disk_bytes is queued; the queue stays within the bound, the oldest
// samples are dropped and counted, and the rest arrive once it is up.
func TestDiskBoundDropsOldest(t *testing.T) {
	r := newReceiver(t)
	down := make([]int, 1_000_000)
	for i := range down {
		down[i] = http.StatusServiceUnavailable
	}
	r.fail(down...)
	const bound = 256 << 10
	cs := remoteConfig(t, fmt.Sprintf(`
- url: %s
  name: small
  max_disk_bytes: %d
  queue_config: {max_samples_per_send: 500, batch_send_deadline: 10ms, min_backoff: 1ms, max_backoff: 2ms}
`, r.srv.URL, bound))
	f := start(t, t.TempDir(), cs, labels.EmptyLabels())
	const series, n = 100, 600
	t0 := baseTime()
	for i := range n / 50 {
		f.push(series, 50, t0+int64(i)*50_000, false)
		require.LessOrEqual(t, dirSize(t, filepath.Join(f.dir, "remote_write", "small")), int64(bound+64<<10))
	}
	dropped := f.metric("dropped", 0)
	require.Positive(t, dropped)
	r.mu.Lock()
	r.status = nil
	r.mu.Unlock()
	eventually(t, func() bool { return f.metric("pending", 0) == 0 }, "pending %v", f.metric("pending", 0))
	dropped = f.metric("dropped", 0)
	require.Equal(t, series*n, r.unique()+int(dropped), "every sample is received or counted as dropped")
	// The oldest were dropped: what arrived is the newest.
	for _, s := range r.series() {
		newest := t0 + int64(n-1)*1000
		_, ok := s[newest]
		require.True(t, ok)
		_, ok = s[t0]
		require.False(t, ok, "the oldest sample was dropped")
	}
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range es {
		if info, err := e.Info(); err == nil && !e.IsDir() {
			n += info.Size()
		}
	}
	return n
}

// TestRestartResumes: what was queued while the remote was down is sent
// after a restart of the appliance's parts.
func TestRestartResumes(t *testing.T) {
	r := newReceiver(t)
	down := make([]int, 1_000_000)
	for i := range down {
		down[i] = http.StatusBadGateway
	}
	r.fail(down...)
	yml := fmt.Sprintf(`
- url: %s
  queue_config: {max_samples_per_send: 300, batch_send_deadline: 10ms, min_backoff: 1ms, max_backoff: 2ms}
`, r.srv.URL)
	dir := t.TempDir()
	f := start(t, dir, remoteConfig(t, yml), labels.EmptyLabels())
	t0 := baseTime()
	f.push(20, 100, t0, true)
	eventually(t, func() bool { return f.metric("retried", 0) > 0 }, "the sender tried")
	require.Equal(t, float64(2000), f.metric("pending", 0))
	f.stop()

	r.mu.Lock()
	r.status = nil
	r.mu.Unlock()
	f = start(t, dir, remoteConfig(t, yml), labels.EmptyLabels())
	eventually(t, func() bool { return r.unique() == 2000 }, "received %d", r.unique())
	eventually(t, func() bool { return f.metric("pending", 0) == 0 }, "pending %v", f.metric("pending", 0))
	// A third start sends nothing again.
	f.stop()
	before := r.count
	f = start(t, dir, remoteConfig(t, yml), labels.EmptyLabels())
	f.push(1, 1, t0+1_000_000, false)
	eventually(t, func() bool { return r.unique() == 2001 }, "received %d", r.unique())
	require.Equal(t, before+1, r.count, "no resend of what was acknowledged")
}

// TestReloadRemovesRemote: a remote removed by Apply stops; one whose
// entry did not change keeps its queue.
func TestReloadRemovesRemote(t *testing.T) {
	r1, r2 := newReceiver(t), newReceiver(t)
	entry := func(u, name string) string {
		return fmt.Sprintf("- {url: %s, name: %s, queue_config: {batch_send_deadline: 10ms}}\n", u, name)
	}
	f := start(t, t.TempDir(), remoteConfig(t, entry(r1.srv.URL, "a")+entry(r2.srv.URL, "b")), labels.EmptyLabels())
	f.push(5, 5, baseTime(), false)
	eventually(t, func() bool { return r1.unique() == 25 && r2.unique() == 25 }, "received")
	keep := (*f.m.remotes.Load())[0]
	next, err := f.m.Prepare(remoteConfig(t, entry(r1.srv.URL, "a")), labels.EmptyLabels())
	require.NoError(t, err)
	require.NoError(t, f.m.Apply(next))
	require.Same(t, keep, (*f.m.remotes.Load())[0])
	f.push(5, 5, baseTime()+100_000, false)
	eventually(t, func() bool { return r1.unique() == 50 }, "received %d", r1.unique())
	require.Equal(t, 25, r2.unique())
}
