package storage

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/record"
	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/stretchr/testify/require"
)

// copyWAL copies a running DB's WAL directory to dst/wal: what a kill -9
// leaves behind, next to a store that has none of it.
func copyWAL(t *testing.T, src, dst string) {
	t.Helper()
	from, to := filepath.Join(src, walDirName), filepath.Join(dst, walDirName)
	require.NoError(t, os.MkdirAll(to, 0o755))
	entries, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		in, err := os.Open(filepath.Join(from, e.Name()))
		require.NoError(t, err)
		out, err := os.Create(filepath.Join(to, e.Name()))
		require.NoError(t, err)
		_, err = io.Copy(out, in)
		require.NoError(t, err)
		require.NoError(t, in.Close())
		require.NoError(t, out.Close())
	}
}

var anyName = labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")

func walSegments(t *testing.T, dir string) (first, last int) {
	t.Helper()
	first, last, err := wlog.Segments(filepath.Join(dir, walDirName))
	require.NoError(t, err)
	return first, last
}

// TestWALReplaysAfterCrash: the samples of a commit are in the WAL when
// Commit returns, and a store that lost them (here: a fresh one) gets them
// back at Open.
func TestWALReplaysAfterCrash(t *testing.T) {
	crashed, fresh := t.TempDir(), t.TempDir()
	db := openTestDB(t, crashed, nil)
	data := map[string][]sample{
		`up{job="a"}`:                     samplesOf(100, baseTime, 1000, func(i int) float64 { return float64(i) }),
		`http_requests_total{code="200"}`: samplesOf(50, baseTime, 2000, func(i int) float64 { return float64(i * 3) }),
	}
	appendSamples(t, db, data)
	// A second commit reuses the series named by the first.
	more := map[string][]sample{`up{job="a"}`: samplesOf(10, baseTime+100_000, 1000, func(i int) float64 { return -float64(i) })}
	appendSamples(t, db, more)
	copyWAL(t, crashed, fresh)

	reg := prometheus.NewRegistry()
	db2 := openTestDB(t, fresh, reg)
	_, got := selectAll(t, db2, baseTime, baseTime+200_000, nil, anyName)
	requireSamples(t, append(append([]sample{}, data[`up{job="a"}`]...), more[`up{job="a"}`]...), got[`{__name__="up", job="a"}`])
	requireSamples(t, data[`http_requests_total{code="200"}`], got[`{__name__="http_requests_total", code="200"}`])
	require.Equal(t, 160.0, testutil.ToFloat64(db2.walReplayed))
}

// TestWALCleanCloseLeavesNothingToReplay: after Close the store has
// everything, so the WAL is emptied.
func TestWALCleanCloseLeavesNothingToReplay(t *testing.T) {
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Path = dir
	db, err := Open(opts)
	require.NoError(t, err)
	appendSamples(t, db, map[string][]sample{`up{job="a"}`: samplesOf(10, baseTime, 1000, func(int) float64 { return 1 })})
	require.NoError(t, db.Close())
	entries, err := os.ReadDir(filepath.Join(dir, walDirName))
	require.NoError(t, err)
	require.Empty(t, entries)

	db = openTestDB(t, dir, nil)
	require.Zero(t, testutil.ToFloat64(db.walReplayed))
	_, got := selectAll(t, db, baseTime, baseTime+20_000, nil, anyName)
	require.Len(t, got[`{__name__="up", job="a"}`], 10)
}

// TestWALTruncatesFlushedGenerations: a generation is cut every
// walCutInterval and deleted walKeep after the next one began; what
// remains still replays every sample written since the last kept cut.
func TestWALTruncatesFlushedGenerations(t *testing.T) {
	dir := t.TempDir()
	db := openTestDB(t, dir, nil)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	db.wal.mu.Lock()
	db.wal.now = func() time.Time { return time.Unix(0, clock.Load()) }
	db.wal.genStart = db.wal.now()
	db.wal.mu.Unlock()
	advance := func(d time.Duration) { clock.Add(int64(d)) }

	write := func(i int) {
		appendSamples(t, db, map[string][]sample{`up{job="a"}`: {{t: baseTime + int64(i)*1000, v: float64(i)}}})
	}
	write(0)
	first0, last0 := walSegments(t, dir)
	advance(walCutInterval)
	write(1) // cuts: generation 0 is done
	_, last1 := walSegments(t, dir)
	require.Equal(t, last0+1, last1, "a cut starts a new segment")
	advance(walKeep - time.Second)
	write(2)
	first, _ := walSegments(t, dir)
	require.Equal(t, first0, first, "a generation is kept for walKeep")
	advance(time.Second)
	write(3) // generation 0 has been done for walKeep: deleted
	first, _ = walSegments(t, dir)
	require.Equal(t, last1, first, "segments before the kept generation are deleted")

	// The kept generation names its series itself: it replays alone.
	fresh := t.TempDir()
	copyWAL(t, dir, fresh)
	db2 := openTestDB(t, fresh, nil)
	_, got := selectAll(t, db2, baseTime, baseTime+10_000, nil, anyName)
	requireSamples(t, []sample{{baseTime + 1000, 1}, {baseTime + 2000, 2}, {baseTime + 3000, 3}}, got[`{__name__="up", job="a"}`])
}

// TestWALTornTail: a segment cut off in the middle of a record (a power
// loss while the OS wrote it) replays up to the tear, is repaired, and the
// WAL takes new commits.
func TestWALTornTail(t *testing.T) {
	crashed, fresh := t.TempDir(), t.TempDir()
	db := openTestDB(t, crashed, nil)
	for i := range 20 {
		appendSamples(t, db, map[string][]sample{
			`up{job="a"}`: samplesOf(100, baseTime+int64(i)*100_000, 1000, func(k int) float64 { return float64(i*100 + k) }),
		})
	}
	copyWAL(t, crashed, fresh)
	_, last := walSegments(t, fresh)
	seg := wlog.SegmentName(filepath.Join(fresh, walDirName), last)
	st, err := os.Stat(seg)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(200))
	require.NoError(t, os.Truncate(seg, st.Size()-100))

	db2 := openTestDB(t, fresh, nil)
	_, got := selectAll(t, db2, baseTime, baseTime+3_000_000, nil, anyName)
	s := got[`{__name__="up", job="a"}`]
	require.NotEmpty(t, s, "the samples before the tear are replayed")
	require.Less(t, len(s), 2000, "the torn record is not")
	for i, smp := range s {
		require.Equal(t, float64(i), smp.v, "replayed samples are a prefix of what was written")
	}
	// Writable after the repair, and the repaired WAL replays cleanly.
	appendSamples(t, db2, map[string][]sample{`up{job="b"}`: {{t: baseTime, v: 7}}})
	again := t.TempDir()
	copyWAL(t, fresh, again)
	db3 := openTestDB(t, again, nil)
	_, got = selectAll(t, db3, baseTime, baseTime+3_000_000, nil, anyName)
	require.Len(t, got[`{__name__="up", job="a"}`], len(s))
	requireSamples(t, []sample{{baseTime, 7}}, got[`{__name__="up", job="b"}`])
}

// TestWALSyncCommit: a commit from a WithSyncCommit context is fsynced
// (group commit: synced covers it).
func TestWALSyncCommit(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	app := db.AppenderV2(WithSyncCommit(context.Background()))
	_, err := app.Append(0, labels.FromStrings("__name__", "up"), 0, baseTime, 1, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NoError(t, app.Commit())
	db.wal.syncMu.Lock()
	defer db.wal.syncMu.Unlock()
	require.Equal(t, db.wal.seq, db.wal.synced)
}

// TestSeriesTooLargeForIndex: a label set over the index's limit is
// refused at Append with the limit in the error, and nothing of the
// commit's other samples is lost or half-stored by it.
func TestSeriesTooLargeForIndex(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	f := func(ls labels.Labels) {
		t.Helper()
		app := db.AppenderV2(context.Background())
		_, err := app.Append(0, ls, 0, baseTime, 1, nil, nil, promstorage.AOptions{})
		require.ErrorIs(t, err, ErrInvalidSeries)
		require.Contains(t, err.Error(), "bytes")
		require.Less(t, len(err.Error()), 400, "the error shows a prefix of the series, not all of it")
		require.NoError(t, app.Rollback())
	}
	// Two 40 KB values.
	f(labels.FromStrings("__name__", "big", "a", strings.Repeat("x", 40_000), "b", strings.Repeat("y", 40_000)))
	// 10,000 labels.
	b := labels.NewScratchBuilder(10_001)
	b.Add("__name__", "many")
	for i := range 10_000 {
		b.Add("label_"+itoa(i), "value")
	}
	b.Sort()
	f(b.Labels())
	// Escaped bytes count twice: 33,000 zero bytes are 66,000 in the index.
	f(labels.FromStrings("__name__", "escaped", "a", strings.Repeat("\x00", 33_000)))
	// Just below the limit is stored.
	ok := labels.FromStrings("__name__", "fits", "a", strings.Repeat("x", MaxIndexedSeriesBytes-len("fits")-len("a")-3))
	require.Equal(t, MaxIndexedSeriesBytes, indexedSize(ok))
	app := db.AppenderV2(context.Background())
	_, err := app.Append(0, ok, 0, baseTime, 1, nil, nil, promstorage.AOptions{})
	require.NoError(t, err)
	require.NoError(t, app.Commit())
	db.Flush()
	names, _ := selectAll(t, db, baseTime-1, baseTime+1, nil, anyName)
	require.Len(t, names, 1)
}

// TestDiskWatermark: below storage.min_free_disk Commit refuses with
// ErrDiskFull and counts the samples; IngestError says so; above it
// commits are taken again without anything else happening.
func TestDiskWatermark(t *testing.T) {
	var free atomic.Uint64
	free.Store(1 << 40)
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.MinFreeDisk = 50 << 20
	opts.FreeDiskBytes = func(string) (uint64, error) { return free.Load(), nil }
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	db, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	db.disk.now = func() time.Time { return time.Unix(0, clock.Load()) }

	commit := func(v float64) error {
		app := db.AppenderV2(context.Background())
		_, err := app.Append(0, labels.FromStrings("__name__", "up"), 0, baseTime+int64(v), v, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
		return app.Commit()
	}
	require.NoError(t, commit(1))
	require.NoError(t, db.IngestError())

	free.Store(40 << 20)
	clock.Add(int64(diskCheckInterval))
	err = commit(2)
	require.ErrorIs(t, err, ErrDiskFull)
	require.Contains(t, err.Error(), "41943040 bytes free (")
	require.Contains(t, err.Error(), "limit 52428800 bytes (storage.min_free_disk)")
	require.ErrorIs(t, db.IngestError(), ErrDiskFull)
	require.Equal(t, 1.0, testutil.ToFloat64(db.disk.rejected))
	metrics, err := reg.Gather()
	require.NoError(t, err)
	gauge := func(name string) float64 {
		for _, mf := range metrics {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no metric %s", name)
		return math.NaN()
	}
	require.Equal(t, 1.0, gauge("appliance_storage_read_only"))
	require.Equal(t, float64(40<<20), gauge("appliance_storage_free_disk_bytes"))

	// A commit that would cross the watermark is refused before it writes.
	free.Store(50<<20 + walBytesPerSample - 1)
	clock.Add(int64(diskCheckInterval))
	require.ErrorIs(t, commit(3), ErrDiskFull)

	// Resumes 10% above the watermark (hysteresis), by itself.
	free.Store(54 << 20)
	clock.Add(int64(diskCheckInterval))
	require.ErrorIs(t, db.IngestError(), ErrDiskFull)
	free.Store(60 << 20)
	clock.Add(int64(diskCheckInterval))
	require.NoError(t, db.IngestError())
	require.NoError(t, commit(4))
	db.Flush()
	_, got := selectAll(t, db, baseTime, baseTime+10, nil, anyName)
	requireSamples(t, []sample{{baseTime + 1, 1}, {baseTime + 4, 4}}, got[`{__name__="up"}`])

	// What commits booked in the last seconds counts until
	// VictoriaMetrics has surely written it: 1 MiB above the watermark
	// takes one commit of 40,000 samples (640 KB booked), not two.
	clock.Add(diskPendingSeconds * int64(time.Second))
	free.Store(51 << 20)
	require.NoError(t, db.IngestError())
	big := func() error {
		app := db.AppenderV2(context.Background())
		for i := range 40_000 {
			_, err := app.Append(0, labels.FromStrings("__name__", "big", "i", itoa(i%100)), 0, baseTime+int64(i), 1, nil, nil, promstorage.AOptions{})
			require.NoError(t, err)
		}
		return app.Commit()
	}
	require.NoError(t, big())
	clock.Add(int64(diskCheckInterval))
	require.ErrorIs(t, big(), ErrDiskFull, "the first commit's bytes are still pending")
}

// TestWALSeriesFromRawNames: the WAL writes a series record from the raw
// name (appendRawSeries) byte for byte as tsdb/record encodes the labels,
// and refuses a raw name out of label order (the WAL then encodes it
// through the labels).
func TestWALSeriesFromRawNames(t *testing.T) {
	var enc record.Encoder
	for _, ls := range []labels.Labels{
		labels.FromStrings("__name__", "up", "job", "vllm", "instance", "a:1"),
		labels.FromStrings("__name__", "x", "A", "before the name", "Z", "too", "a", strings.Repeat("v", 300)),
		labels.FromStrings("job", "no name"),
		labels.FromStrings("__name__", "only"),
	} {
		raw, err := marshalRawName(nil, ls)
		require.NoError(t, err)
		got, ok := appendRawSeries([]byte{byte(record.Series)}, 42, raw)
		require.True(t, ok, "%s", ls)
		require.Equal(t, enc.Series([]record.RefSeries{{Ref: 42, Labels: ls}}, nil), got, "%s", ls)
	}
	unordered := append(appendRawLabelT(t, nil, "job", "a"), appendRawLabelT(t, nil, "instance", "b")...)
	got, ok := appendRawSeries([]byte{1}, 1, unordered)
	require.False(t, ok)
	require.Equal(t, []byte{1}, got)
	got, ok = appendRawSeries([]byte{1}, 1, []byte{0, 9, 'x'})
	require.False(t, ok, "malformed")
	require.Equal(t, []byte{1}, got)
}

func appendRawLabelT(t *testing.T, dst []byte, name, value string) []byte {
	t.Helper()
	dst, err := appendRawLabel(dst, name, value)
	require.NoError(t, err)
	return dst
}

// TestWALNamesSeriesAgainAfterEviction: a series whose series cache entry
// was dropped (the cache is bounded) gets a new entry that the WAL has not
// seen: the WAL names the series again, and every sample replays.
func TestWALNamesSeriesAgainAfterEviction(t *testing.T) {
	crashed, fresh := t.TempDir(), t.TempDir()
	db := openTestDB(t, crashed, nil)
	first := samplesOf(5, baseTime, 1000, func(i int) float64 { return float64(i) })
	appendSamples(t, db, map[string][]sample{`up{job="a"}`: first})
	for i := range db.names.shards {
		sh := &db.names.shards[i]
		sh.mu.Lock()
		sh.curr, sh.prev = make(map[uint64]*seriesEntry), nil
		sh.mu.Unlock()
	}
	second := samplesOf(5, baseTime+5000, 1000, func(i int) float64 { return float64(10 + i) })
	appendSamples(t, db, map[string][]sample{`up{job="a"}`: second})
	copyWAL(t, crashed, fresh)

	db2 := openTestDB(t, fresh, nil)
	_, got := selectAll(t, db2, baseTime, baseTime+20_000, nil, anyName)
	requireSamples(t, append(append([]sample{}, first...), second...), got[`{__name__="up", job="a"}`])
}

// TestConcurrentCommitsShareEntries: appenders committing the same series
// at once share their series cache entries (the head's place and the WAL
// record ref in them); every sample is shown by the head and replays from
// the WAL. Run with -race, it checks that the entries are guarded.
func TestConcurrentCommitsShareEntries(t *testing.T) {
	const writers, commits, nSeries = 4, 10, 50
	crashed, fresh := t.TempDir(), t.TempDir()
	db := openTestDB(t, crashed, nil)
	lsets := make([]labels.Labels, nSeries)
	for i := range lsets {
		lsets[i] = labels.FromStrings("__name__", "shared", "i", strconv.Itoa(i))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			refs := make([]promstorage.SeriesRef, nSeries)
			for k := range commits {
				app := db.AppenderV2(context.Background())
				ts := baseTime + int64(k*writers+w)*1000
				for i, ls := range lsets {
					ref, err := app.Append(refs[i], ls, 0, ts, float64(w), nil, nil, promstorage.AOptions{})
					if err != nil {
						errs <- err
						return
					}
					refs[i] = ref
				}
				if err := app.Commit(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	check := func(db *DB) {
		_, got := selectAll(t, db, baseTime, baseTime+int64(writers*commits)*1000, nil, anyName)
		require.Len(t, got, nSeries)
		for k, s := range got {
			require.Len(t, s, writers*commits, k)
		}
	}
	check(db)
	copyWAL(t, crashed, fresh)
	check(openTestDB(t, fresh, nil))
}
