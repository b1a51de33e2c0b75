package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// TestRollupSeesSeriesNewToAPartition: a rollup that reads a tier right
// after a flush made a series new to that tier's partition searchable
// must roll it up, even while VictoriaMetrics' tag-filters cache still
// holds the partition's series from before (see flushLabel). This is how
// bench/tiers' 5m tier lost the backfill's last 23 hours: the 1m tier's
// December partition held only live series until the downsampling pass
// that rolled the last day up into it, and that pass's 5m rollups read
// the cached set.
//
// The cache goes stale only when VictoriaMetrics' background flusher
// (every second) makes the new index entries searchable before a
// DebugFlush does, and is reset within 10 s after that; the test waits for
// that state, observed, and tries a new series if the reset came first.
func TestRollupSeesSeriesNewToAPartition(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	ctx := context.Background()
	res := Tier5m.Resolution()
	end := time.Now().Truncate(res).Add(-2 * res)
	start := end.Add(-res)
	commit := func(name string) {
		data := map[string][]sample{}
		for k := 1; k < 20; k++ {
			data[name] = append(data[name], sample{start.Add(time.Duration(k) * 15 * time.Second).UnixMilli(), float64(k)})
		}
		appendSamples(t, db, data)
		db.Flush()
	}
	probes := 0
	// seriesIn counts the series with rows in tier's window: fresh with
	// filters no read used before (past the cache), else with the
	// rollups' plain filter, which the cache answers.
	seriesIn := func(tier Tier, fresh bool) int {
		ms := allSeries
		if fresh {
			probes++
			ms = append(ms[:1:1], labels.MustNewMatcher(labels.MatchNotEqual, "__probe__", fmt.Sprint(probes)))
		}
		tfs, err := toTagFilters(ms)
		require.NoError(t, err)
		n, err := db.scanSeries(ctx, tier, tfs, start.UnixMilli()+1, end.UnixMilli(), 1000, func([]*series) error { return nil })
		require.NoError(t, err)
		return n
	}

	// A series the 1m partition holds, and the cache with it.
	commit("live_total")
	_, err := db.Rollup(ctx, Tier1m, start, end)
	require.NoError(t, err)
	db.Flush()
	require.Equal(t, 1, seriesIn(Tier1m, false))

	for attempt := 1; ; attempt++ {
		if attempt > 10 {
			// Nothing of the rollups ran in the stale state, so there is
			// no answer to check; the fix's own part (a new filter after
			// every flush) is TestRollupFiltersChangeAtFlush's.
			t.Skip("VictoriaMetrics reset its tag-filters cache before every read in 10 attempts: the stale state was not reached")
		}
		commit(fmt.Sprintf("backfill_%d_total", attempt))
		_, err := db.Rollup(ctx, Tier1m, start, end)
		require.NoError(t, err)
		// Wait for the background flusher to make the new series
		// searchable (a fresh read finds it) ...
		deadline := time.Now().Add(30 * time.Second)
		for seriesIn(Tier1m, true) < 1+attempt {
			require.True(t, time.Now().Before(deadline), "the new series never became searchable")
			time.Sleep(50 * time.Millisecond)
		}
		// ... then flush as the downsampler does before its 5m rollups;
		// DebugFlush finds nothing pending and leaves the cache as it is.
		db.Flush()
		if seriesIn(Tier1m, false) == 1+attempt {
			continue // the cache was reset already: try another series
		}
		_, err = db.Rollup(ctx, Tier5m, start, end)
		require.NoError(t, err)
		db.Flush()
		require.Equal(t, 1+attempt, seriesIn(Tier5m, true), "5m series after a rollup that read the 1m tier while its cache was stale")
		return
	}
}

// TestRollupFiltersChangeAtFlush: every flush of a tier gives its rollup
// reads filters VictoriaMetrics' tag-filters cache has not seen, and the
// filters still match every series.
func TestRollupFiltersChangeAtFlush(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	key := func() string {
		tfs, err := db.readFilters(Tier1m, allSeries)
		require.NoError(t, err)
		require.Len(t, tfs, 1)
		return tfs[0].String()
	}
	before := key()
	require.Equal(t, before, key(), "no flush: the same filters, served from the cache")
	db.Flush()
	after := key()
	require.NotEqual(t, before, after, "a flush changes the filters")
	require.Contains(t, after, flushLabel)

	res := Tier5m.Resolution()
	end := time.Now().Truncate(res).Add(-2 * res)
	appendSamples(t, db, map[string][]sample{`x_total{a="1"}`: {{end.Add(-time.Minute).UnixMilli(), 1}}})
	db.Flush()
	tfs, err := db.readFilters(TierRaw, allSeries)
	require.NoError(t, err)
	n, err := db.scanSeries(context.Background(), TierRaw, tfs, end.Add(-res).UnixMilli(), end.UnixMilli(), 1000, func([]*series) error { return nil })
	require.NoError(t, err)
	require.Equal(t, 1, n, "the flush label matches every series")
}
