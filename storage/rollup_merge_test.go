package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// windowAggs reads aggregate a of the series named name from tier over
// (mint, maxt] as one value per window.
func windowAggs(t *testing.T, db *DB, tier Tier, a readAgg, name string, mint, maxt int64) map[int64]float64 {
	t.Helper()
	set, err := db.readRollup(context.Background(), tier, a, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name)}, mint, maxt)
	require.NoError(t, err)
	out := map[int64]float64{}
	res := tier.Resolution().Milliseconds()
	for _, s := range set {
		for i, ts := range s.ts {
			out[window(ts, res)] = s.vs[i]
		}
	}
	return out
}

// wantAggs computes the per-window aggregate of samples.
func wantAggs(samples []sample, res int64, a readAgg) map[int64]float64 {
	type acc struct{ min, max, sum, n float64 }
	by := map[int64]*acc{}
	for _, s := range samples {
		w := window(s.t, res)
		x := by[w]
		if x == nil {
			x = &acc{min: s.v, max: s.v}
			by[w] = x
		}
		x.min, x.max, x.sum, x.n = min(x.min, s.v), max(x.max, s.v), x.sum+s.v, x.n+1
	}
	out := map[int64]float64{}
	for w, x := range by {
		switch a {
		case readMin:
			out[w] = x.min
		case readMax:
			out[w] = x.max
		case readSum:
			out[w] = x.sum
		case readCount:
			out[w] = x.n
		}
	}
	return out
}

// commitShuffled sends samples of one series in random cuts, in a random
// order, and sends one cut twice (a sender's retry).
func commitShuffled(t *testing.T, db *DB, rng *rand.Rand, series string, samples []sample) {
	t.Helper()
	var cuts [][]sample
	for rest := samples; len(rest) > 0; {
		n := min(len(rest), 1+rng.IntN(7))
		cuts = append(cuts, rest[:n])
		rest = rest[n:]
	}
	rng.Shuffle(len(cuts), func(i, j int) { cuts[i], cuts[j] = cuts[j], cuts[i] })
	retry := rng.IntN(len(cuts))
	for i, c := range cuts {
		appendSamples(t, db, map[string][]sample{series: c})
		if i == retry {
			appendSamples(t, db, map[string][]sample{series: c})
		}
	}
}

// TestRollupOldMerges: samples older than raw arrive in random cuts and
// order, one cut twice; every window of both tiers holds the aggregates of
// all its samples, each counted once, negative values included.
func TestRollupOldMerges(t *testing.T) {
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.RetentionRaw = 24 * time.Hour
	db, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	rng := rand.New(rand.NewPCG(1, 2))

	start := time.Now().Add(-3 * 24 * time.Hour).Truncate(time.Hour).UnixMilli()
	// Aligned to the window ends (15s) and not, positive and negative.
	gauge := samplesOf(240, start+15000, 15000, func(i int) float64 { return float64(i%13) - 6 + rng.Float64() })
	gauge = append(gauge, samplesOf(40, start+3_600_000+7, 7000, func(i int) float64 { return -float64(i) })...)
	commitShuffled(t, db, rng, `temp{gpu="0"}`, gauge)
	counter := samplesOf(240, start+15000, 15000, func(i int) float64 { return float64(i%100) * 3 }) // resets every 100
	commitShuffled(t, db, rng, `reqs_total{job="a"}`, counter)

	mint, maxt := start, start+2*3_600_000
	for _, tier := range []Tier{Tier1m, Tier5m} {
		res := tier.Resolution().Milliseconds()
		for _, a := range []readAgg{readMin, readMax, readSum, readCount} {
			want := wantAggs(gauge, res, a)
			got := windowAggs(t, db, tier, a, "temp", mint, maxt)
			require.Len(t, got, len(want), "%s %d", tier, a)
			for w, v := range want {
				require.InDelta(t, v, got[w], 1e-9, "tier %s agg %d window %d", tier, a, w)
			}
		}
		// The counter keeps each window's last sample and the samples
		// before resets.
		set, err := db.readRollup(context.Background(), tier, readDefault, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "reqs_total")}, mint, maxt)
		require.NoError(t, err)
		require.Len(t, set, 1)
		at := map[int64]float64{}
		for i, ts := range set[0].ts {
			at[ts] = set[0].vs[i]
		}
		for i, s := range counter {
			last := i == len(counter)-1 || window(counter[i+1].t, res) != window(s.t, res)
			if last || counter[i+1].v < s.v {
				require.Equal(t, s.v, at[s.t], "tier %s counter at %d", tier, s.t)
			}
		}
	}
}

// TestRollupLateWithinRaw: a window rolled up, then late samples (some
// negative), then the same samples again: the re-rollup writes a newer
// version with every sample, and the retry writes nothing.
func TestRollupLateWithinRaw(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	ctx := context.Background()
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	first := samplesOf(120, start.UnixMilli()+30000, 30000, func(i int) float64 { return float64(i % 5) })
	appendSamples(t, db, map[string][]sample{`q{job="a"}`: first})
	db.Flush()
	end := start.Add(time.Hour)
	st, err := db.Rollup(ctx, Tier1m, start, end)
	require.NoError(t, err)
	require.Equal(t, 60*4, st.Rows)
	db.Flush()
	db.SetRolledUpTo(Tier1m, end)

	// Late: one more sample in every window, before the last one, negative.
	late := samplesOf(60, start.UnixMilli()+10000, 60000, func(i int) float64 { return -100 - float64(i) })
	appendSamples(t, db, map[string][]sample{`q{job="a"}`: late})
	db.Flush()
	st, err = db.Rollup(ctx, Tier1m, start, end)
	require.NoError(t, err)
	require.Equal(t, 60*3, st.Rows, "negmin, sum and count change, max does not")
	db.Flush()
	all := append(append([]sample(nil), first...), late...)
	for _, a := range []readAgg{readMin, readMax, readSum, readCount} {
		want := wantAggs(all, Tier1m.Resolution().Milliseconds(), a)
		got := windowAggs(t, db, Tier1m, a, "q", start.UnixMilli(), end.UnixMilli())
		require.Equal(t, want, got, "agg %d", a)
	}

	// The sender retries: raw de-duplicates, nothing changes, nothing is
	// written.
	appendSamples(t, db, map[string][]sample{`q{job="a"}`: late})
	db.Flush()
	st, err = db.Rollup(ctx, Tier1m, start, end)
	require.NoError(t, err)
	require.Zero(t, st.Rows)
}

// TestRollupPages: 5,000 series in pages of 1,000 with a query cap of
// 1,000 series: every series is rolled up, the cap does not apply.
func TestRollupPages(t *testing.T) {
	opts := DefaultOptions()
	opts.Path = t.TempDir()
	opts.RollupPageSize = 1000
	opts.MaxSeriesPerQuery = 1000
	db, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	data := map[string][]sample{}
	for i := range 5000 {
		data[fmt.Sprintf(`busy{i="%d"}`, i)] = samplesOf(4, start.UnixMilli()+15000, 15000, func(int) float64 { return float64(i) })
	}
	appendSamples(t, db, data)
	db.Flush()
	st, err := db.Rollup(context.Background(), Tier1m, start, start.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, 5000, st.Series)
	require.Equal(t, 5000*4, st.Rows)
	db.Flush()
	n, err := db.scanSeries(context.Background(), Tier1m, mustTagFilters(t, allSeries), start.UnixMilli(), start.Add(time.Minute).UnixMilli(), 1000, func(page []*series) error {
		require.LessOrEqual(t, len(page), 1000)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 5000*4, n)
}

func mustTagFilters(t *testing.T, ms []*labels.Matcher) []*vmstorage.TagFilters {
	t.Helper()
	tfs, err := toTagFilters(ms)
	require.NoError(t, err)
	return tfs
}
