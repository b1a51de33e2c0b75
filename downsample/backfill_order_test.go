package downsample

import (
	"context"
	"testing"
	"time"

	"github.com/aiserve/appliance/storage"
	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"
)

// windowCounts returns, per window of tier, the count aggregate of the
// gauge name read from tier alone.
func windowCounts(t *testing.T, db *storage.DB, tier storage.Tier, name string, start, end time.Time) map[int64]float64 {
	t.Helper()
	res := tier.Resolution().Milliseconds()
	ctx := storage.WithMaxSourceResolution(context.Background(), tier)
	q, err := db.Querier(start.UnixMilli(), end.UnixMilli())
	require.NoError(t, err)
	ss := q.Select(ctx, true, &promstorage.SelectHints{Start: start.UnixMilli() + 1, End: end.UnixMilli(), Step: time.Hour.Milliseconds()},
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name),
		labels.MustNewMatcher(labels.MatchEqual, storage.RollupLabel, "count"))
	out := map[int64]float64{}
	for ss.Next() {
		it := ss.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			out[(ts-1)/res] += v
		}
	}
	require.NoError(t, ss.Err())
	return out
}

// TestTimeOrderedBackfillFillsEveryTier backfills nine days in time order,
// oldest first, while the downsampler runs passes and a live series is
// written at the clock's time, as bench/tiers does through
// /api/v1/import/prometheus: the oldest two days go straight into the
// rollup tiers (older than raw), the last seven through raw, below the
// watermark (late). Every 5m window must then hold what the 1m windows
// under it hold.
//
// It passed before the fix of the 5m gap bench/tiers found too: the
// downsampler marks and redoes the 5m windows over late 1m windows; the
// gap came from VictoriaMetrics' tag-filters cache, which a run this small
// and fast does not leave stale (storage's
// TestRollupSeesSeriesNewToAPartition reaches that state).
func TestTimeOrderedBackfillFillsEveryTier(t *testing.T) {
	db := openDB(t, t.TempDir())
	defer db.Close()
	now := &clock{t: time.Now().Truncate(time.Minute)}
	ds, err := New(db, Options{Now: now.Now, wall: now.Now})
	require.NoError(t, err)
	defer ds.Close()
	ctx := context.Background()

	live := labels.FromStrings("__name__", "node_load1", "job", "local")
	liveSample := func() {
		app := db.AppenderV2(ctx)
		_, err := app.Append(0, live, 0, now.Now().UnixMilli(), 1, nil, nil, promstorage.AOptions{})
		require.NoError(t, err)
		require.NoError(t, app.Commit())
	}
	for range 8 {
		liveSample()
		require.NoError(t, ds.Step(ctx))
		now.Set(now.Now().Add(15 * time.Second))
	}

	end := now.Now().Add(-time.Hour).Truncate(5 * time.Minute)
	start := end.Add(-9 * 24 * time.Hour)
	const step = 15 * time.Second
	const batch = 40 * time.Minute
	var series []labels.Labels
	for i := range 4 {
		series = append(series, labels.FromStrings("__name__", "vllm:num_requests_waiting", "instance", string(rune('a'+i))))
	}
	k := 0
	for from := start; from.Before(end); from = from.Add(batch) {
		app := db.AppenderV2(ctx)
		for ts := from.Add(step); !ts.After(from.Add(batch)) && !ts.After(end); ts = ts.Add(step) {
			for i, ls := range series {
				_, err := app.Append(0, ls, 0, ts.UnixMilli(), float64((ts.Unix()/15+int64(i))%23), nil, nil, promstorage.AOptions{})
				require.NoError(t, err)
			}
		}
		require.NoError(t, app.Commit())
		if k++; k%6 == 0 {
			liveSample()
			require.NoError(t, ds.Step(ctx))
			now.Set(now.Now().Add(15 * time.Second))
		}
	}
	for range 8 {
		liveSample()
		require.NoError(t, ds.Step(ctx))
		now.Set(now.Now().Add(15 * time.Second))
	}

	from := now.Now().Add(-7*24*time.Hour + time.Hour).Truncate(time.Hour)
	c1 := windowCounts(t, db, storage.Tier1m, "vllm:num_requests_waiting", from, end)
	c5 := windowCounts(t, db, storage.Tier5m, "vllm:num_requests_waiting", from, end)
	var missing []string
	for w := from.UnixMilli() / 300000; w < end.UnixMilli()/300000; w++ {
		var sum1 float64
		for m := w * 5; m < w*5+5; m++ {
			sum1 += c1[m]
		}
		require.Equal(t, float64(len(series)*20), sum1, "1m windows under 5m window ending %s", time.UnixMilli((w+1)*300000).UTC())
		if c5[w] != sum1 {
			missing = append(missing, time.UnixMilli((w+1)*300000).UTC().Format(time.RFC3339))
		}
	}
	require.Empty(t, missing, "5m windows that differ from their 1m windows (%d)", len(missing))
}
