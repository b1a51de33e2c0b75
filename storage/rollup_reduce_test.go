package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"
)

// TestRollupReadReduced: a rollup tier's read that makes counters'
// boundary points as their rows are decoded answers what the read that
// makes them afterwards answers, for every read aggregate, with and
// without step windows, in both rollup tiers.
func TestRollupReadReduced(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	ctx := context.Background()
	res := Tier5m.Resolution()
	end := time.Now().Truncate(res).Add(-2 * res)
	start := end.Add(-3 * time.Hour)
	r := rand.New(rand.NewPCG(3, 4))
	data := map[string][]sample{}
	for i := range 6 {
		c, g := 0.0, 0.0
		for ts := start.Add(time.Second); ts.Before(end); ts = ts.Add(15 * time.Second) {
			if c += float64(r.IntN(10)); r.IntN(150) == 0 {
				c = 0 // a reset
			}
			g = float64(r.IntN(100))
			data[fmt.Sprintf(`req_total{i="%d"}`, i)] = append(data[fmt.Sprintf(`req_total{i="%d"}`, i)], sample{ts.UnixMilli(), c})
			data[fmt.Sprintf(`queue{i="%d"}`, i)] = append(data[fmt.Sprintf(`queue{i="%d"}`, i)], sample{ts.UnixMilli(), g})
		}
	}
	appendSamples(t, db, data)
	db.Flush()
	for _, tier := range []Tier{Tier1m, Tier5m} {
		st, err := db.Rollup(ctx, tier, start, end)
		require.NoError(t, err)
		require.Positive(t, st.Rows, tier)
		db.Flush()
	}

	mint, maxt := start.UnixMilli(), end.UnixMilli()
	reduced := 0
	for _, tier := range []Tier{Tier1m, Tier5m} {
		for _, name := range []string{"req_total", "queue"} {
			ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name)}
			for _, a := range []readAgg{readDefault, readMax, readMin, readSum, readCount} {
				for _, sw := range []*stepWindows{nil, {First: mint + 20*60_000, Step: 20 * 60_000, Last: maxt, Window: 5 * 60_000}} {
					want, err := db.readRollupWith(ctx, tier, a, ms, mint, maxt, sw, false)
					require.NoError(t, err)
					got, err := db.readRollupWith(ctx, tier, a, ms, mint, maxt, sw, true)
					require.NoError(t, err)
					require.Len(t, got, len(want), "%s %s %d %v", tier, name, a, sw)
					for i := range want {
						require.Equal(t, want[i].lset, got[i].lset)
						require.Equal(t, want[i].ts, got[i].ts, "%s %s %d %v", tier, name, a, sw)
						require.Equal(t, want[i].vs, got[i].vs, "%s %s %d %v", tier, name, a, sw)
						if got[i].reduced {
							reduced++
						}
					}
					if a != readCount || name == "queue" {
						require.Len(t, got, 6, "%s %s %d %v", tier, name, a, sw)
					}
				}
			}
		}
	}
	require.Positive(t, reduced, "counters were reduced as they were decoded")
}
