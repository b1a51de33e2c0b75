package storage

import (
	"context"
	"strconv"
	"testing"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// TestHeadShowsCommitsAtOnce: a committed sample of a new series is found
// by every read path right after Commit, with no Flush: Select through the
// tiered and the raw querier, the series API's labels-only Select, label
// names and values. VictoriaMetrics alone shows it only after its own
// flush (seconds later; the head is what answers here).
func TestHeadShowsCommitsAtOnce(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	now := time.Now().UnixMilli()
	appendSamples(t, db, map[string][]sample{
		`fresh_metric{job="new",zone="eu"}`: {{now - 2000, 1}, {now - 1000, 2}},
	})
	name := labels.MustNewMatcher(labels.MatchEqual, "__name__", "fresh_metric")
	want := []sample{{now - 2000, 1}, {now - 1000, 2}}

	_, got := selectAll(t, db, now-60_000, now, nil, name)
	requireSamples(t, want, got[`{__name__="fresh_metric", job="new", zone="eu"}`])

	q, err := db.Raw().Querier(now-60_000, now)
	require.NoError(t, err)
	ss := q.Select(context.Background(), true, nil, name, labels.MustNewMatcher(labels.MatchRegexp, "zone", "e.*"))
	require.True(t, ss.Next(), "raw querier (rules) finds the new series")
	require.Equal(t, `{__name__="fresh_metric", job="new", zone="eu"}`, ss.At().Labels().String())
	require.False(t, ss.Next())
	require.NoError(t, ss.Err())

	order, _ := selectAll(t, db, now-60_000, now, &promstorage.SelectHints{Start: now - 60_000, End: now, Func: "series"}, name)
	require.Equal(t, []string{`{__name__="fresh_metric", job="new", zone="eu"}`}, order)

	tq, err := db.Querier(now-60_000, now)
	require.NoError(t, err)
	ctx := context.Background()
	values, _, err := tq.LabelValues(ctx, "__name__", nil)
	require.NoError(t, err)
	require.Contains(t, values, "fresh_metric")
	values, _, err = tq.LabelValues(ctx, "zone", nil, name)
	require.NoError(t, err)
	require.Equal(t, []string{"eu"}, values)
	names, _, err := tq.LabelNames(ctx, nil, name)
	require.NoError(t, err)
	require.Equal(t, []string{"__name__", "job", "zone"}, names)

	// A regexp on the name, and no name at all.
	order, _ = selectAll(t, db, now-60_000, now, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", "fresh_.*"))
	require.Equal(t, []string{`{__name__="fresh_metric", job="new", zone="eu"}`}, order)
	order, _ = selectAll(t, db, now-60_000, now, nil, labels.MustNewMatcher(labels.MatchEqual, "job", "new"))
	require.Equal(t, []string{`{__name__="fresh_metric", job="new", zone="eu"}`}, order)
	order, _ = selectAll(t, db, now-60_000, now, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", "other_.*"))
	require.Empty(t, order)
	require.Len(t, db.head.read([]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "fresh_.*")}, now-60_000, now, false), 1)
	require.Empty(t, db.head.read([]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", "other_.*")}, now-60_000, now, false))

	// Outside the range: nothing.
	_, got = selectAll(t, db, now-600_000, now-300_000, nil, name)
	require.Empty(t, got)
}

// TestHeadMergesWithVictoriaMetrics: while VictoriaMetrics and the head
// both hold a sample, it is read once; after Flush the head is empty and
// the answer is the same.
func TestHeadMergesWithVictoriaMetrics(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	now := time.Now().UnixMilli()
	appendSamples(t, db, map[string][]sample{`m{a="1"}`: {{now - 3000, 1}, {now - 2000, 2}}})
	db.vm.DebugFlush() // searchable in VM, still in the head
	appendSamples(t, db, map[string][]sample{
		`m{a="1"}`: {{now - 2000, 2}, {now - 1000, 3}}, // a retry and a new sample
		`m{a="2"}`: {{now - 1000, 10}},
	})
	name := labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")
	check := func() {
		t.Helper()
		order, got := selectAll(t, db, now-60_000, now, nil, name)
		require.Equal(t, []string{`{__name__="m", a="1"}`, `{__name__="m", a="2"}`}, order, "sorted by labels")
		requireSamples(t, []sample{{now - 3000, 1}, {now - 2000, 2}, {now - 1000, 3}}, got[`{__name__="m", a="1"}`])
		requireSamples(t, []sample{{now - 1000, 10}}, got[`{__name__="m", a="2"}`])
		// count_over_time reads each sample as 1, once.
		_, got = selectAll(t, db, now-60_000, now, nil, name, labels.MustNewMatcher(labels.MatchEqual, RollupLabel, "count"))
		require.Len(t, got[`{__name__="m", a="1"}`], 3)
	}
	check()
	series, samples := db.head.size()
	require.Equal(t, 2, series)
	require.Equal(t, 5, samples, "the retry is held twice, read once")
	require.NotEmpty(t, db.head.read([]*labels.Matcher{name}, now-60_000, now, false))
	db.Flush()
	require.Empty(t, db.head.read([]*labels.Matcher{name}, now-60_000, now, false), "flushed: VictoriaMetrics shows it")
	check()
}

// TestHeadGenerations: a flush hides the samples of the generation it
// closed, keeps the ones added while it ran, and the series left without
// samples are dropped.
func TestHeadGenerations(t *testing.T) {
	wall := time.Unix(1_000_000, 0)
	h := newHead(func() time.Time { return wall })
	raw, err := marshalRawName(nil, labels.FromStrings("__name__", "g", "i", "1"))
	require.NoError(t, err)
	other, err := marshalRawName(nil, labels.FromStrings("__name__", "g", "i", "2"))
	require.NoError(t, err)
	add := func(ref uint64, name []byte, ts int64) {
		require.Empty(t, h.add([]vmstorage.MetricRow{{MetricNameRaw: name, Timestamp: ts, Value: float64(ts)}}, []uint64{ref}, nil, nil))
	}
	times := func() map[string][]int64 {
		out := map[string][]int64{}
		for _, s := range h.read([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "g")}, 0, 1000, false) {
			out[s.lset.Get("i")] = s.ts
		}
		return out
	}
	add(1, raw, 1)
	add(2, other, 1)
	// A sample added during the flush belongs to the next generation.
	h.flush(func() { add(1, raw, 2) }, true)
	require.Equal(t, map[string][]int64{"1": {2}}, times())
	require.Len(t, h.shards[2%headShards].series, 1, "series 2 keeps its entry for one more generation")

	add(1, raw, 3)
	h.flush(func() {
		// While generation 2 is being flushed, generation 3 takes samples:
		// both are shown.
		add(1, raw, 4)
		require.Equal(t, map[string][]int64{"1": {2, 3, 4}}, times())
	}, true)
	require.Equal(t, map[string][]int64{"1": {4}}, times())
	// Series 2 got nothing for two generations: its samples are gone, its
	// entry stays (flushes come in bursts) until it has been idle for
	// headSeriesIdle (below).
	require.Len(t, h.shards[2%headShards].series, 1, "series 2 is idle for less than headSeriesIdle")
	require.Len(t, h.shards[2%headShards].byName["g"], 1)

	// A ref the head holds for another name (a hash collision the series
	// cache no longer sees): left to VictoriaMetrics.
	row := vmstorage.MetricRow{MetricNameRaw: other, Timestamp: 5, Value: 5}
	require.Equal(t, []vmstorage.MetricRow{row}, h.add([]vmstorage.MetricRow{row}, []uint64{1}, nil, nil))
	require.Equal(t, map[string][]int64{"1": {4}}, times())

	// A flush already running: a Commit's flush does not wait for it.
	h.flushMu.Lock()
	ran := false
	h.flush(func() { ran = true }, false)
	h.flushMu.Unlock()
	require.False(t, ran)

	require.False(t, h.due())
	wall = wall.Add(headFlushAfter)
	require.True(t, h.due(), "a Commit flushes when nothing did for headFlushAfter")
	h.flush(func() {}, false)
	require.False(t, h.due())
	require.Empty(t, times())

	// Idle series: series 1 had its last sample at the start, series 2
	// before it; both entries are dropped once idle for headSeriesIdle.
	add(1, raw, 7)
	wall = wall.Add(headSeriesIdle - time.Millisecond)
	h.flush(func() {}, true)
	h.flush(func() {}, true)
	require.Len(t, h.shards[1%headShards].series, 1, "series 1 is idle for less than headSeriesIdle")
	require.Len(t, h.shards[2%headShards].series, 0, "series 2 got nothing for headSeriesIdle")
	require.Len(t, h.shards[2%headShards].byName["g"], 0)
	require.Len(t, h.shards[1%headShards].byName["g"], 1)
	wall = wall.Add(time.Millisecond)
	h.flush(func() {}, true)
	require.Len(t, h.shards[1%headShards].series, 0, "series 1 got nothing for headSeriesIdle")
	require.Empty(t, h.shards[1%headShards].byName)
	// A series comes back with its next sample.
	add(2, other, 8)
	require.Equal(t, map[string][]int64{"2": {8}}, times())
}

// TestCommitFlushesAnIdleHead: with nothing calling Flush, a Commit flushes
// the raw tier once the head is headFlushAfter old, so the head stays
// bounded without a downsampler.
func TestCommitFlushesAnIdleHead(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	wall := time.Now()
	db.head.wall = func() time.Time { return wall }
	now := time.Now().UnixMilli()
	appendSamples(t, db, map[string][]sample{`idle{a="1"}`: {{now - 1000, 1}}})
	name := labels.MustNewMatcher(labels.MatchEqual, "__name__", "idle")
	require.Len(t, db.head.read([]*labels.Matcher{name}, 0, now, false), 1)

	wall = wall.Add(headFlushAfter)
	appendSamples(t, db, map[string][]sample{`idle{a="2"}`: {{now - 1000, 2}}})
	require.Empty(t, db.head.read([]*labels.Matcher{name}, 0, now, false), "the commit flushed both")
	order, _ := selectAll(t, db, now-60_000, now, nil, name)
	require.Equal(t, []string{`{__name__="idle", a="1"}`, `{__name__="idle", a="2"}`}, order, "VictoriaMetrics shows them")
}

// TestHeadBatchWrites: with Options.HeadBatchWrites, Commit leaves the
// samples in the head (queryable), the flush writes them to
// VictoriaMetrics series by series, and Close writes what is left.
func TestHeadBatchWrites(t *testing.T) {
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.Path = dir
	opts.HeadBatchWrites = true
	opts.DisableWAL = true // only the head's own write can bring them back
	db, err := Open(opts)
	require.NoError(t, err)
	now := time.Now().UnixMilli()
	for i := range 3 {
		appendSamples(t, db, map[string][]sample{
			`b{s="1"}`: {{now - 10_000 + int64(i)*1000, float64(i)}},
			`b{s="2"}`: {{now - 10_000 + int64(i)*1000, float64(10 + i)}},
		})
	}
	name := labels.MustNewMatcher(labels.MatchEqual, "__name__", "b")
	tfs, err := toTagFilters([]*labels.Matcher{name})
	require.NoError(t, err)
	inVM := func() int {
		t.Helper()
		set, err := db.readSeries(context.Background(), TierRaw, tfs, now-60_000, now)
		require.NoError(t, err)
		n := 0
		for _, s := range set {
			n += len(s.ts)
		}
		return n
	}
	db.vm.DebugFlush()
	require.Zero(t, inVM(), "Commit did not write to VictoriaMetrics")
	want := map[string][]sample{
		`{__name__="b", s="1"}`: {{now - 10_000, 0}, {now - 9000, 1}, {now - 8000, 2}},
		`{__name__="b", s="2"}`: {{now - 10_000, 10}, {now - 9000, 11}, {now - 8000, 12}},
	}
	_, got := selectAll(t, db, now-60_000, now, nil, name)
	for k, w := range want {
		requireSamples(t, w, got[k])
	}

	// The flush writes them, each series' samples next to each other.
	var written []vmstorage.MetricRow
	write := db.head.write
	db.head.write = func(rows []vmstorage.MetricRow) error {
		written = append(written, rows...)
		return write(rows)
	}
	db.Flush()
	require.Len(t, written, 6)
	for i := 0; i < 6; i += 3 {
		require.Equal(t, written[i].MetricNameRaw, written[i+1].MetricNameRaw)
		require.Equal(t, written[i].MetricNameRaw, written[i+2].MetricNameRaw)
	}
	require.Equal(t, 6, inVM())
	require.Empty(t, db.head.read([]*labels.Matcher{name}, now-60_000, now, false))
	_, got = selectAll(t, db, now-60_000, now, nil, name)
	for k, w := range want {
		requireSamples(t, w, got[k])
	}

	// Left in the head at Close: written before the tier closes.
	appendSamples(t, db, map[string][]sample{`b{s="3"}`: {{now - 5000, 30}}})
	require.NoError(t, db.Close())
	db = openTestDB(t, dir, nil)
	_, got = selectAll(t, db, now-60_000, now, nil, name)
	requireSamples(t, []sample{{now - 5000, 30}}, got[`{__name__="b", s="3"}`])
	require.Len(t, got, 3)
}

// BenchmarkHeadFlushBurst: every series gets a sample, then the head is
// flushed three times in a row, as the downsampler's flushes before its
// reads of raw come (issue 17's profile: the head was rebuilt at each
// burst). Per op: one scrape of 10,000 series and the burst.
func BenchmarkHeadFlushBurst(b *testing.B) {
	const n = 10_000
	h := newHead(nil)
	rows := make([]vmstorage.MetricRow, n)
	refs := make([]uint64, n)
	for i := range rows {
		raw, err := marshalRawName(nil, labels.FromStrings("__name__", "vllm:num_requests_running", "instance", strconv.Itoa(i)))
		require.NoError(b, err)
		rows[i] = vmstorage.MetricRow{MetricNameRaw: raw, Value: 1}
		refs[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	ts := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		ts += 5000
		for i := range rows {
			rows[i].Timestamp = ts
		}
		h.add(rows, refs, nil, nil)
		for range 3 {
			h.flush(func() {}, true)
		}
	}
}

// TestHeadMatchesOnRawNames: the head tests matchers on the raw name
// (each) as matchesAll does on the decoded labels: every kind of matcher,
// labels absent, empty matches, names that are prefixes of others.
func TestHeadMatchesOnRawNames(t *testing.T) {
	sets := []labels.Labels{
		labels.FromStrings("__name__", "up", "job", "vllm", "instance", "a:1"),
		labels.FromStrings("__name__", "up", "job", "vllm", "instance", "b:1", "version", "v2"),
		labels.FromStrings("__name__", "go_info", "job", "appliance", "version", "go1.26"),
		labels.FromStrings("__name__", "x", "A", "upper", "jo", "prefix", "job", "dcgm"),
		labels.FromStrings("__name__", "y"),
	}
	ms := []*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, "job", "vllm"),
		labels.MustNewMatcher(labels.MatchEqual, "job", ""),
		labels.MustNewMatcher(labels.MatchNotEqual, "version", ""),
		labels.MustNewMatcher(labels.MatchNotEqual, "job", "vllm"),
		labels.MustNewMatcher(labels.MatchRegexp, "instance", "a.*"),
		labels.MustNewMatcher(labels.MatchRegexp, "version", ""),
		labels.MustNewMatcher(labels.MatchNotRegexp, "job", "v.*"),
		labels.MustNewMatcher(labels.MatchEqual, "jo", "prefix"),
		labels.MustNewMatcher(labels.MatchEqual, "A", "upper"),
		labels.MustNewMatcher(labels.MatchEqual, "absent", ""),
	}
	for _, ls := range sets {
		raw, err := marshalRawName(nil, ls)
		require.NoError(t, err)
		for _, a := range ms {
			for _, b := range ms {
				pair := []*labels.Matcher{a, b}
				require.Equal(t, matchesAll(pair, ls), matchesAllRaw(pair, raw), "%s %s %s", ls, a, b)
			}
			require.Equal(t, ls.Get(a.Name), string(rawLabelValue(raw, a.Name)), "%s %s", ls, a.Name)
		}
		require.Equal(t, ls.Get("__name__"), string(rawLabelValue(raw, "__name__")))
	}

	// Through the head: a selector without a metric name, label values
	// without and with matchers (each value once).
	h := newHead(nil)
	var rows []vmstorage.MetricRow
	var refs []uint64
	for i, ls := range sets {
		raw, err := marshalRawName(nil, ls)
		require.NoError(t, err)
		rows = append(rows, vmstorage.MetricRow{MetricNameRaw: raw, Timestamp: 1000, Value: float64(i)})
		refs = append(refs, ls.Hash()&^collisionRefBit)
	}
	h.add(rows, refs, nil, nil)
	var got []string
	for _, s := range h.read([]*labels.Matcher{
		labels.MustNewMatcher(labels.MatchNotRegexp, "__name__", "(go|process)_.*"),
		labels.MustNewMatcher(labels.MatchNotEqual, "version", ""),
	}, 0, 2000, false) {
		got = append(got, s.lset.String())
		require.Equal(t, []int64{1000}, s.ts)
	}
	require.Equal(t, []string{`{__name__="up", instance="b:1", job="vllm", version="v2"}`}, got)
	require.Empty(t, h.read([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "job", "vllm")}, 2000, 3000, false), "outside the time range")
	require.ElementsMatch(t, []string{"vllm", "appliance", "dcgm"}, h.labelValues("job", nil, 0, 2000))
	require.ElementsMatch(t, []string{"v2"}, h.labelValues("version", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "up")}, 0, 2000))
	require.ElementsMatch(t, []string{"up"}, h.labelValues("__name__", []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "job", "vllm")}, 0, 2000))
}

// TestHeadSeriesByEntry: add finds a series by its series cache entry,
// and an entry whose series the head dropped (idle for headSeriesIdle)
// gets the series made again, visible to reads and written at flush.
func TestHeadSeriesByEntry(t *testing.T) {
	wall := time.Unix(1_000_000, 0)
	h := newHead(func() time.Time { return wall })
	var written []vmstorage.MetricRow
	h.write = func(rows []vmstorage.MetricRow) error {
		written = append(written, rows...)
		return nil
	}
	raw, err := marshalRawName(nil, labels.FromStrings("__name__", "e", "i", "1"))
	require.NoError(t, err)
	e := &seriesEntry{raw: raw}
	add := func(ts int64) {
		require.Empty(t, h.add([]vmstorage.MetricRow{{MetricNameRaw: raw, Timestamp: ts, Value: 1}}, []uint64{7}, []*seriesEntry{e}, nil))
	}
	sel := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "e")}
	add(1)
	first := e.head
	require.NotNil(t, first)
	add(2)
	require.Same(t, first, e.head)
	require.Len(t, h.read(sel, 0, 10, false), 1)

	// Idle past headSeriesIdle and two flushes: the head drops it.
	wall = wall.Add(headSeriesIdle)
	h.flush(func() {}, true)
	h.flush(func() {}, true)
	require.True(t, first.dropped)
	require.Empty(t, h.shards[7%headShards].series)

	written = nil
	add(3)
	require.NotSame(t, first, e.head)
	require.Same(t, e.head, h.shards[7%headShards].series[7])
	got := h.read(sel, 0, 10, false)
	require.Len(t, got, 1)
	require.Equal(t, []int64{3}, got[0].ts)
	h.flush(func() {}, true)
	require.Equal(t, []vmstorage.MetricRow{{MetricNameRaw: raw, Timestamp: 3, Value: 1}}, written)
}

// TestHeadAddKeepsOrder: each series' samples stay in the order of the
// commit, and a row whose ref the head holds for another name is handed
// back.
func TestHeadAddKeepsOrder(t *testing.T) {
	h := newHead(nil)
	var rows []vmstorage.MetricRow
	var refs []uint64
	for i := range 40 {
		raw, err := marshalRawName(nil, labels.FromStrings("__name__", "o", "i", strconv.Itoa(i%20)))
		require.NoError(t, err)
		// Each series twice, the later sample first: add keeps the
		// commit's order (read sorts).
		rows = append(rows, vmstorage.MetricRow{MetricNameRaw: raw, Timestamp: int64(100 - i), Value: float64(i)})
		refs = append(refs, uint64(i%20))
	}
	require.Empty(t, h.add(rows, refs, nil, nil))
	for i := range 20 {
		s := h.shards[i%headShards].series[uint64(i)]
		require.NotNil(t, s)
		require.Equal(t, []int64{int64(100 - i), int64(80 - i)}, s.ts)
		require.Equal(t, []float64{float64(i), float64(i + 20)}, s.vs)
	}
	other, err := marshalRawName(nil, labels.FromStrings("__name__", "collides"))
	require.NoError(t, err)
	row := vmstorage.MetricRow{MetricNameRaw: other, Timestamp: 1, Value: 1}
	require.Equal(t, []vmstorage.MetricRow{row}, h.add([]vmstorage.MetricRow{rows[0], row}, []uint64{0, 3}, nil, nil))
}
