package cardinality

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/storage"
)

func TestLooksLikeID(t *testing.T) {
	for v, want := range map[string]bool{
		"4f9c2a6e-3b1d-4c8e-9a7f-0e5d6c4b3a21": true,
		"4f9c2a6e3b1d4c8e9a7f0e5d6c4b3a21":     true,  // 32 hex
		"req-5f0c9a1e2b3d4c5e":                 true,  // 16 hex inside
		"user_12345678":                        true,  // 8 digits
		"01ARZ3NDEKTSV4RRFFQ69G5FAV":           true,  // ULID
		"10.0.0.1:8080":                        false, // an address
		"GET":                                  false,
		"llama-3.1-8b-instruct":                false,
		"/v1/chat/completions":                 false,
		"user-1234":                            false,
		"deadbeef":                             false, // 8 hex: too short
		"application_controller_manager":       false,
		"4f9c2a6e-3b1d-4c8e-9a7f-0e5d6c4b3a2":  false, // 35 chars, runs of at most 12
	} {
		require.Equal(t, want, LooksLikeID(v), v)
	}
}

// openDB opens a real storage with samples: request_id (UUIDs) on one
// metric from one target, many plain user names on another, and a
// harmless method label.
func openDB(t *testing.T) *storage.DB {
	t.Helper()
	opts := storage.DefaultOptions()
	opts.Path = t.TempDir()
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	ts := time.Now().UnixMilli()
	app := db.AppenderV2(context.Background())
	add := func(ls labels.Labels) {
		_, err := app.Append(0, ls, 0, ts, 1, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	for i := range 50 {
		add(labels.FromStrings("__name__", "http_requests_total", "job", "api", "instance", "a:1", "request_id", fmt.Sprintf("%08x-3b1d-4c8e-9a7f-%012x", i, i*7919)))
	}
	for i := range 150 {
		add(labels.FromStrings("__name__", "logins_total", "job", "auth", "instance", "b:1", "user", fmt.Sprintf("user-%d", i)))
	}
	for _, m := range []string{"GET", "POST", "PUT"} {
		add(labels.FromStrings("__name__", "http_requests_total", "job", "api", "instance", "a:2", "method", m))
	}
	require.NoError(t, app.Commit())
	db.Flush() // the per-day index (DayStatus) sees them
	return db
}

func TestAnalyzerFlagsIDsAndManyValues(t *testing.T) {
	db := openDB(t)
	a := New(Options{Status: db, Queryable: db.Raw(), SeriesLimit: db.SeriesLimit, MaxLabelValues: 100,
		SampleLimit: func(string) int { return 0 }})
	r, err := a.Report(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 203, r.TotalSeries)
	require.Equal(t, "logins_total", r.TopMetrics[0].Name)
	require.EqualValues(t, 150, r.TopMetrics[0].Series)
	require.EqualValues(t, 150, r.TopMetrics[0].Growth)
	require.Equal(t, 100, r.MaxLabelValues)

	require.Len(t, r.Flagged, 2, "%+v", r.Flagged)
	user, req := r.Flagged[0], r.Flagged[1]
	require.Equal(t, Flag{Metric: "logins_total", Label: "user", Job: "auth", Instance: "b:1", Values: 150, MetricValues: 150,
		IDShare: 0, Reason: ReasonTooManyValues, Examples: user.Examples}, user)
	require.Equal(t, "http_requests_total", req.Metric)
	require.Equal(t, "request_id", req.Label)
	require.Equal(t, ReasonIDLike, req.Reason)
	require.Equal(t, "api", req.Job)
	require.Equal(t, "a:1", req.Instance, "only the instance that sends request_id")
	require.Equal(t, 50, req.Values)
	require.Equal(t, 1.0, req.IDShare)
}

func TestWriterWritesWarningsAndStaleness(t *testing.T) {
	db := openDB(t)
	now := time.Now()
	a := New(Options{Status: db, Queryable: db.Raw(), MaxLabelValues: 100, Now: func() time.Time { return now }})
	w := NewWriter(a, db, time.Minute, nil)
	flags, err := w.WriteOnce(context.Background())
	require.NoError(t, err)
	require.Len(t, flags, 2)

	read := func() map[string]float64 {
		q, err := db.Raw().Querier(now.Add(-time.Minute).UnixMilli(), now.Add(time.Minute).UnixMilli())
		require.NoError(t, err)
		defer q.Close()
		out := map[string]float64{}
		ss := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", WarningMetric))
		for ss.Next() {
			it := ss.At().Iterator(nil)
			for it.Next() != 0 {
				_, v := it.At()
				out[ss.At().Labels().Get("label")+"/"+ss.At().Labels().Get("reason")+"/"+ss.At().Labels().Get("job")+"/"+ss.At().Labels().Get("instance")] = v
			}
		}
		require.NoError(t, ss.Err())
		return out
	}
	got := read()
	require.Equal(t, map[string]float64{"request_id/id_like/api/a:1": 50, "user/too_many_values/auth/b:1": 150}, got)

	// The user label is gone (its series deleted): the next write ends
	// its warning with a staleness marker.
	require.NoError(t, db.Delete(context.Background(), math.MinInt64, math.MaxInt64, labels.MustNewMatcher(labels.MatchEqual, "__name__", "logins_total")))
	now = now.Add(time.Second)
	flags, err = w.WriteOnce(context.Background())
	require.NoError(t, err)
	require.Len(t, flags, 1)
	got = read()
	require.True(t, value.IsStaleNaN(got["user/too_many_values/auth/b:1"]), "%v", got)
	require.Equal(t, 50.0, got["request_id/id_like/api/a:1"])
}
