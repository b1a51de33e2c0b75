package downsample

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aiserve/appliance/storage"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"
)

// clock is a settable clock for Now and the wall clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func openDB(t *testing.T, dir string) *storage.DB {
	t.Helper()
	opts := storage.DefaultOptions()
	opts.Path = dir
	opts.MemoryBudget = 256 << 20
	db, err := storage.Open(opts)
	require.NoError(t, err)
	return db
}

// loadTestData writes six hours of a gauge and a counter with a reset, at 15s,
// ending at end.
func loadTestData(t *testing.T, db *storage.DB, end time.Time) (start time.Time) {
	t.Helper()
	start = end.Add(-6 * time.Hour)
	app := db.AppenderV2(context.Background())
	g := labels.FromStrings("__name__", "queue_depth", "job", "vllm")
	c := labels.FromStrings("__name__", "requests_total", "job", "vllm")
	var cv float64
	for k := 0; !start.Add(time.Duration(k) * 15 * time.Second).After(end); k++ {
		ts := start.Add(time.Duration(k) * 15 * time.Second).UnixMilli()
		_, err := app.Append(0, g, 0, ts, float64(k%17), nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
		if k == 700 {
			cv = 0
		}
		cv += float64(k % 5)
		_, err = app.Append(0, c, 0, ts, cv, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, app.Commit())
	db.Flush()
	return start
}

// requireEveryWindowOnce checks that each 1m and 5m window of the gauge
// between start and end is present exactly once in its tier, holding the
// count of raw samples of that window.
func requireEveryWindowOnce(t *testing.T, db *storage.DB, start, end time.Time) {
	t.Helper()
	for _, tier := range []storage.Tier{storage.Tier1m, storage.Tier5m} {
		res := tier.Resolution()
		ctx := storage.WithMaxSourceResolution(context.Background(), tier)
		q, err := db.Querier(start.UnixMilli(), end.UnixMilli())
		require.NoError(t, err)
		ss := q.Select(ctx, true, &promstorage.SelectHints{Start: start.UnixMilli() + 1, End: end.UnixMilli(), Step: time.Hour.Milliseconds()},
			labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "queue_depth"),
			labels.MustNewMatcher(labels.MatchEqual, storage.RollupLabel, "count"))
		require.True(t, ss.Next(), "tier %s", tier)
		seen := map[int64]int{}
		it := ss.At().Iterator(nil)
		total := 0.0
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			w := (ts - 1) / res.Milliseconds()
			seen[w]++
			total += v
			require.Equal(t, float64(res/(15*time.Second)), v, "tier %s window ending %s", tier, time.UnixMilli((w+1)*res.Milliseconds()))
		}
		require.False(t, ss.Next())
		require.NoError(t, ss.Err())
		want := int(end.Sub(start) / res)
		require.Equal(t, want, len(seen), "tier %s: windows present", tier)
		for w, n := range seen {
			require.Equal(t, 1, n, "tier %s window %d", tier, w)
		}
		require.Equal(t, float64(end.Sub(start)/(15*time.Second)), total, "tier %s samples", tier)
	}
}

// requireRollupsMatchRaw checks that max/min/avg/rate read from each tier
// over window-aligned ranges equal raw.
func requireRollupsMatchRaw(t *testing.T, db *storage.DB, start, end time.Time) {
	t.Helper()
	for _, tier := range []storage.Tier{storage.Tier1m, storage.Tier5m} {
		for _, q := range []struct {
			fn, name string
		}{{"max_over_time", "queue_depth"}, {"min_over_time", "queue_depth"}, {"sum_over_time", "queue_depth"}, {"rate", "requests_total"}} {
			read := func(tier storage.Tier) map[int64]float64 {
				// The sum of samples per 30m window through each tier.
				ctx := storage.WithMaxSourceResolution(context.Background(), tier)
				qr, err := db.Querier(start.UnixMilli(), end.UnixMilli())
				require.NoError(t, err)
				ss := qr.Select(ctx, true, &promstorage.SelectHints{Start: start.UnixMilli() + 1, End: end.UnixMilli(), Step: time.Hour.Milliseconds(), Func: q.fn},
					labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, q.name))
				require.True(t, ss.Next())
				out := map[int64]float64{}
				it := ss.At().Iterator(nil)
				const w = 30 * 60 * 1000
				for it.Next() == chunkenc.ValFloat {
					ts, v := it.At()
					k := (ts - 1) / w
					switch q.fn {
					case "max_over_time":
						if old, ok := out[k]; !ok || v > old {
							out[k] = v
						}
					case "min_over_time":
						if old, ok := out[k]; !ok || v < old {
							out[k] = v
						}
					case "sum_over_time":
						out[k] += v
					default: // counter: the last value per 30m window
						out[k] = v
					}
				}
				return out
			}
			require.Equal(t, read(storage.TierRaw), read(tier), "%s(%s) on tier %s", q.fn, q.name, tier)
		}
	}
}

func TestRestartAfterFailedRollupResumesWithoutGapsOrDuplicates(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, dir)
	defer db.Close()
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	start := loadTestData(t, db, end)

	now := &clock{t: start.Add(2 * time.Hour)}
	wall := &clock{t: time.Unix(0, 0)}
	var mu sync.Mutex
	var calls []string
	failAt := -1
	hook := func(tier storage.Tier, s, e int64) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, fmt.Sprintf("%s %s", tier, time.UnixMilli(s).Sub(start)))
		if len(calls) == failAt {
			return errors.New("injected crash after writing rows")
		}
		return nil
	}
	opts := Options{Now: now.Now, Span1m: 10 * time.Minute, Span5m: 30 * time.Minute, DurableAfter: time.Second, wall: wall.Now, afterWrite: hook}

	// First life: two hours rolled up and saved (the wall clock moves past
	// DurableAfter before the next save), then a crash in the middle of
	// the next hour, after rows were written and before any progress was
	// recorded.
	ds, err := New(db, opts)
	require.NoError(t, err)
	require.NoError(t, ds.Step(context.Background()))
	require.Equal(t, uint64(1), ds.Passes())
	saved := ds.Watermark(storage.Tier1m)
	wall.Set(wall.Now().Add(time.Minute))
	now.Set(start.Add(4 * time.Hour))
	mu.Lock()
	calls, failAt = nil, 4
	mu.Unlock()
	require.ErrorContains(t, ds.Step(context.Background()), "injected crash")
	require.Equal(t, uint64(1), ds.Passes(), "a failed pass is not counted")
	ds.Close()

	// The watermark on disk is the one of the first pass: the first pass
	// was durable by the second save, the second pass's progress was not.
	var onDisk int64
	require.NoError(t, db.State().View(func(tx *bbolt.Tx) error {
		onDisk, _ = loadWatermark(tx, storage.Tier1m)
		return nil
	}))
	require.Equal(t, floor(saved.UnixMilli(), time.Minute.Milliseconds()), onDisk)

	// Second life: resumes at the saved watermark, not earlier.
	mu.Lock()
	calls, failAt = nil, -1
	mu.Unlock()
	now.Set(end.Add(2 * time.Minute))
	ds, err = New(db, opts)
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))
	require.Equal(t, fmt.Sprintf("1m %s", time.UnixMilli(onDisk).Sub(start)), calls[0])
	require.Equal(t, end.Add(time.Minute).UnixMilli(), ds.Watermark(storage.Tier1m).UnixMilli())

	requireEveryWindowOnce(t, db, start, end)
	requireRollupsMatchRaw(t, db, start, end)
}

// TestKillMidRollup kills a real process (os.Exit, so VictoriaMetrics
// loses whatever it had not written to disk) in the middle of a rollup,
// then restarts on the same directory.
func TestKillMidRollup(t *testing.T) {
	if dir := os.Getenv("DOWNSAMPLE_CHILD_DIR"); dir != "" {
		childRollupThenDie(t, dir)
		return
	}
	dir := t.TempDir()
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	db := openDB(t, dir)
	start := loadTestData(t, db, end)
	require.NoError(t, db.Close()) // raw data on disk

	cmd := exec.Command(os.Args[0], "-test.run=^TestKillMidRollup$", "-test.v")
	cmd.Env = append(os.Environ(), "DOWNSAMPLE_CHILD_DIR="+dir, fmt.Sprintf("DOWNSAMPLE_CHILD_END=%d", end.UnixMilli()),
		"DOWNSAMPLE_CHILD_DURABLE_AFTER="+os.Getenv("DOWNSAMPLE_CHILD_DURABLE_AFTER"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 3, exit.ExitCode(), "%s", out)
	require.Contains(t, string(out), "dying mid-rollup")

	db = openDB(t, dir)
	defer db.Close()
	now := &clock{t: end.Add(2 * time.Minute)}
	ds, err := New(db, Options{Now: now.Now, Span1m: 10 * time.Minute, Span5m: 30 * time.Minute})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))
	requireEveryWindowOnce(t, db, start, end)
	requireRollupsMatchRaw(t, db, start, end)
}

// childRollupThenDie rolls the first three hours up, runs a pass that
// only saves progress, and dies in the middle of rolling up the rest. The
// rows of the first passes are in VictoriaMetrics' memory when it dies (it
// writes them to disk within about 5s): had the first pass's watermark
// been saved at once, those windows would be lost for good.
func childRollupThenDie(t *testing.T, dir string) {
	var endMs int64
	_, err := fmt.Sscan(os.Getenv("DOWNSAMPLE_CHILD_END"), &endMs)
	require.NoError(t, err)
	end := time.UnixMilli(endMs)
	db := openDB(t, dir)
	now := &clock{t: end.Add(-3 * time.Hour)}
	n, dieAt := 0, -1
	opts := Options{Now: now.Now, Span1m: 10 * time.Minute, Span5m: 30 * time.Minute,
		afterWrite: func(tier storage.Tier, _, _ int64) error {
			if n++; n == dieAt {
				fmt.Println("dying mid-rollup")
				os.Exit(3) // no Close: in-memory rows are lost
			}
			return nil
		}}
	if d := os.Getenv("DOWNSAMPLE_CHILD_DURABLE_AFTER"); d != "" {
		opts.DurableAfter, err = time.ParseDuration(d)
		require.NoError(t, err)
	}
	ds, err := New(db, opts)
	require.NoError(t, err)
	require.NoError(t, ds.Step(context.Background()))
	require.NoError(t, ds.Step(context.Background()))
	now.Set(end.Add(2 * time.Minute))
	n, dieAt = 0, 5
	_ = ds.Step(context.Background())
	t.Fatal("the child should have died")
}

func TestLateSamplesAreRolledUpAgain(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	start := loadTestData(t, db, end)
	now := &clock{t: end.Add(2 * time.Minute)}
	ds, err := New(db, Options{Now: now.Now})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))

	// A backfilled sample inside a rolled-up window, between two
	// samples: a new maximum for that minute.
	late := start.Add(2*time.Hour + 37*time.Second)
	app := db.AppenderV2(context.Background())
	_, err = app.Append(0, labels.FromStrings("__name__", "queue_depth", "job", "vllm"), 0, late.UnixMilli(), 1000, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NoError(t, app.Commit())
	require.NoError(t, ds.Step(context.Background()))

	for _, tier := range []storage.Tier{storage.Tier1m, storage.Tier5m} {
		ctx := storage.WithMaxSourceResolution(context.Background(), tier)
		q, err := db.Querier(start.UnixMilli(), end.UnixMilli())
		require.NoError(t, err)
		ss := q.Select(ctx, true, &promstorage.SelectHints{Start: late.Add(-10 * time.Minute).UnixMilli(), End: late.Add(10 * time.Minute).UnixMilli(), Step: time.Hour.Milliseconds(), Func: "max_over_time"},
			labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "queue_depth"))
		require.True(t, ss.Next())
		top := math.Inf(-1)
		points := 0
		it := ss.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			_, v := it.At()
			top = max(top, v)
			points++
		}
		require.Equal(t, 1000.0, top, "tier %s", tier)
		require.Equal(t, int(20*time.Minute/tier.Resolution()), points, "tier %s: one point per window", tier)
	}
}

func TestMetrics(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	loadTestData(t, db, end)
	reg := prometheus.NewRegistry()
	now := &clock{t: end.Add(10 * time.Minute)}
	ds, err := New(db, Options{Now: now.Now, Registerer: reg})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))
	// 1m: now-1m, floored; 5m: the 1m watermark floored to 5m.
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP appliance_downsample_lag_seconds How far the tier's watermark is behind now; in steady state between Delay and Delay plus one window (1m: 60-120s, 5m: up to 7m).
# TYPE appliance_downsample_lag_seconds gauge
appliance_downsample_lag_seconds{tier="1m"} 60
appliance_downsample_lag_seconds{tier="5m"} 300
`), "appliance_downsample_lag_seconds"))
	n, err := testutil.GatherAndCount(reg, "appliance_downsample_rollup_duration_seconds")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	ds.Close()
	ds.Close()
}

func TestState(t *testing.T) {
	f := func(in []span, add span, want []span) {
		t.Helper()
		require.Equal(t, want, addSpan(in, add))
	}
	f(nil, span{1, 2}, []span{{1, 2}})
	f([]span{{1, 3}}, span{2, 5}, []span{{1, 5}})
	f([]span{{1, 3}, {10, 12}}, span{3, 10}, []span{{1, 12}})
	f([]span{{5, 6}}, span{1, 2}, []span{{1, 2}, {5, 6}})
	f([]span{{5, 6}}, span{7, 7}, []span{{5, 6}})
	require.Equal(t, []span{{1, 2}, {4, 5}}, removeSpan([]span{{1, 5}}, span{2, 4}))
	require.Empty(t, removeSpan([]span{{1, 5}}, span{0, 9}))
}

func TestSpanHalvesWhenTooManySamples(t *testing.T) {
	opts := storage.DefaultOptions()
	opts.Path = t.TempDir()
	opts.MaxSamplesPerQuery = 50 // 10 minutes of the test data hold 80
	db, err := storage.Open(opts)
	require.NoError(t, err)
	defer db.Close()
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	start := loadTestData(t, db, end)
	ds, err := New(db, Options{Now: func() time.Time { return end.Add(2 * time.Minute) }, Span1m: 10 * time.Minute, Span5m: 5 * time.Minute})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))
	require.Equal(t, end.Add(time.Minute).UnixMilli(), ds.Watermark(storage.Tier1m).UnixMilli())
	// Read back in pieces small enough for the limit: every minute once.
	ctx := storage.WithMaxSourceResolution(context.Background(), storage.Tier1m)
	for from := start; from.Before(end); from = from.Add(10 * time.Minute) {
		q, err := db.Querier(from.UnixMilli()+1, from.Add(10*time.Minute).UnixMilli())
		require.NoError(t, err)
		ss := q.Select(ctx, true, &promstorage.SelectHints{Start: from.UnixMilli() + 1, End: from.Add(10 * time.Minute).UnixMilli(), Step: time.Hour.Milliseconds()},
			labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "queue_depth"),
			labels.MustNewMatcher(labels.MatchEqual, storage.RollupLabel, "count"))
		require.True(t, ss.Next(), "%s: %v", from, ss.Err())
		var got []float64
		it := ss.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			_, v := it.At()
			got = append(got, v)
		}
		require.Equal(t, []float64{4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, got, "%s", from)
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	now := &clock{t: time.Now()}
	ds, err := New(db, Options{Now: now.Now, Interval: time.Millisecond})
	require.NoError(t, err)
	defer ds.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ds.Run(ctx) }()
	// The first pass runs at once and moves the watermark where Delay
	// puts it.
	want := floor(now.Now().Add(-time.Minute).UnixMilli(), time.Minute.Milliseconds())
	require.Eventually(t, func() bool { return ds.Watermark(storage.Tier1m).UnixMilli() == want }, 30*time.Second, time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

// commitDuringRead is a Store that, right after the first 1m rollup read
// of a pass, commits a sample into the span that was just read: a
// backfill landing while the downsampler catches up.
type commitDuringRead struct {
	*storage.DB
	t    *testing.T
	at   time.Time
	done bool
}

func (c *commitDuringRead) Rollup(ctx context.Context, tier storage.Tier, start, end time.Time) (storage.RollupStats, error) {
	st, err := c.DB.Rollup(ctx, tier, start, end)
	if tier == storage.Tier1m && !c.done && !c.at.Before(start) && c.at.Before(end) {
		c.done = true
		app := c.DB.AppenderV2(ctx)
		_, aerr := app.Append(0, labels.FromStrings("__name__", "queue_depth", "job", "vllm"), 0, c.at.UnixMilli(), 5000, nil, nil, promstorage.AOptions{})
		require.NoError(c.t, aerr)
		require.NoError(c.t, app.Commit())
	}
	return st, err
}

// TestCommitDuringCatchUpIsRolledUp: a sample committed into a span the
// downsampler has just read, in a pass that has not yet published its
// watermark, is reported late and rolled up by the next pass.
func TestCommitDuringCatchUpIsRolledUp(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	start := loadTestData(t, db, end)
	at := start.Add(30*time.Minute + 7*time.Second)
	store := &commitDuringRead{DB: db, t: t, at: at}
	now := &clock{t: end.Add(2 * time.Minute)}
	ds, err := New(store, Options{Now: now.Now, Span1m: 10 * time.Minute})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))
	require.True(t, store.done, "the commit happened during the pass")
	require.NoError(t, ds.Step(context.Background()))

	ctx := storage.WithMaxSourceResolution(context.Background(), storage.Tier1m)
	q, err := db.Querier(start.UnixMilli(), end.UnixMilli())
	require.NoError(t, err)
	ss := q.Select(ctx, true, &promstorage.SelectHints{Start: at.Add(-5 * time.Minute).UnixMilli(), End: at.Add(5 * time.Minute).UnixMilli(), Step: time.Hour.Milliseconds(), Func: "max_over_time"},
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "queue_depth"))
	require.True(t, ss.Next(), "%v", ss.Err())
	top := math.Inf(-1)
	it := ss.At().Iterator(nil)
	for it.Next() == chunkenc.ValFloat {
		_, v := it.At()
		top = max(top, v)
	}
	require.Equal(t, 5000.0, top, "the sample committed during the pass reached the 1m tier")
}

// A month of a rollup tier that the watermark has left, and that no
// rollup has written to for CompactAfter, is merged into one part.
func TestFinishedMonthsAreCompacted(t *testing.T) {
	opts := storage.DefaultOptions()
	opts.Path = t.TempDir()
	opts.MemoryBudget = 256 << 20
	opts.RetentionRaw = 35 * 24 * time.Hour // reaches back past the month's start
	opts.Retention1m = 60 * 24 * time.Hour
	db, err := storage.Open(opts)
	require.NoError(t, err)
	defer db.Close()
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	// Four hours before the month's start, two after.
	loadTestData(t, db, month.Add(2*time.Hour))

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	clk := &clock{t: month.Add(3 * time.Hour)}
	ds, err := New(db, Options{Now: clk.Now, Span1m: 24 * time.Hour, Span5m: 24 * time.Hour, CompactAfter: time.Nanosecond, Logger: log})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))
	prev := month.AddDate(0, -1, 0).Format("2006-01")
	for _, tier := range []string{"1m", "5m"} {
		require.Contains(t, logs.String(), fmt.Sprintf("msg=\"compacted a finished month of a rollup tier\" tier=%s month=%s", tier, prev))
	}
	require.NotContains(t, logs.String(), "month="+month.Format("2006-01"), "the month being written is left alone")
	require.NotContains(t, logs.String(), "failed")
	requireEveryWindowOnce(t, db, month.Add(-2*time.Hour), month.Add(2*time.Hour))
}

// flushHook is a Store whose Flush runs after once, right after the real
// flush: a commit landing between the downsampler's flush and whatever
// follows it.
type flushHook struct {
	*storage.DB
	after func()
}

func (s *flushHook) Flush() {
	s.DB.Flush()
	if f := s.after; f != nil {
		s.after = nil
		f()
	}
}

// A late commit reported while the downsampler flushes is rolled up with
// its rows: the rows a pass rolls up again are made searchable after the
// pass takes the reports, not before.
func TestLateCommitDuringFlushIsRolledUp(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	start := loadTestData(t, db, end)
	now := &clock{t: end.Add(2 * time.Minute)}
	store := &flushHook{DB: db}
	ds, err := New(store, Options{Now: now.Now})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Step(context.Background()))

	// New samples (between the existing ones) in every minute of an hour
	// that is rolled up already, committed by "someone else" just after
	// the next pass's flush: a minute later, when the pass reads raw
	// again (a pass with nothing to roll up does not flush).
	now.Set(now.Now().Add(time.Minute))
	store.after = func() {
		app := db.AppenderV2(context.Background())
		g := labels.FromStrings("__name__", "queue_depth", "job", "vllm")
		for ts := start.Add(time.Hour + 7*time.Second); ts.Before(start.Add(2 * time.Hour)); ts = ts.Add(time.Minute) {
			_, err := app.Append(0, g, 0, ts.UnixMilli(), 3, nil, nil, promstorage.AOptions{})
			require.NoError(t, err)
		}
		require.NoError(t, app.Commit())
	}
	require.NoError(t, ds.Step(context.Background()))
	require.NoError(t, ds.Step(context.Background()))
	require.Nil(t, store.after, "the hook ran")
	// Every window of that hour counts the late sample too: 5 per minute.
	for _, tier := range []storage.Tier{storage.Tier1m, storage.Tier5m} {
		ctx := storage.WithMaxSourceResolution(context.Background(), tier)
		q, err := db.Querier(start.UnixMilli(), end.UnixMilli())
		require.NoError(t, err)
		ss := q.Select(ctx, true, &promstorage.SelectHints{Start: start.Add(time.Hour).UnixMilli() + 1, End: start.Add(2 * time.Hour).UnixMilli(), Step: time.Hour.Milliseconds()},
			labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "queue_depth"),
			labels.MustNewMatcher(labels.MatchEqual, storage.RollupLabel, "count"))
		require.True(t, ss.Next(), "tier %s", tier)
		windows := 0
		it := ss.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			require.Equal(t, 5*tier.Resolution().Minutes(), v, "tier %s window ending %s", tier, time.UnixMilli(ts))
			windows++
		}
		require.Equal(t, int(time.Hour/tier.Resolution()), windows, "tier %s", tier)
		require.NoError(t, q.Close())
	}
}

// countFlushes is a Store that counts its Flush calls.
type countFlushes struct {
	*storage.DB
	n int
}

func (s *countFlushes) Flush() {
	s.n++
	s.DB.Flush()
}

// A pass with nothing to roll up does not flush the store: each flush
// that hands VictoriaMetrics rows costs it a fresh row buffer. A pass
// that reads raw again or writes rollups does.
func TestStepFlushesOnlyWhenItRollsUp(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	end := time.Now().Add(-time.Hour).Truncate(time.Hour)
	loadTestData(t, db, end)
	now := &clock{t: end.Add(2 * time.Minute)}
	store := &countFlushes{DB: db}
	ds, err := New(store, Options{Now: now.Now})
	require.NoError(t, err)
	defer ds.Close()

	require.NoError(t, ds.Step(context.Background()))
	require.Positive(t, store.n, "the catch-up reads raw and writes both tiers")

	store.n = 0
	now.Set(now.Now().Add(15 * time.Second))
	require.NoError(t, ds.Step(context.Background()))
	require.Zero(t, store.n, "no window finished: nothing read, nothing written")

	now.Set(now.Now().Add(time.Minute))
	require.NoError(t, ds.Step(context.Background()))
	require.Positive(t, store.n, "a finished minute is read from raw")
}
