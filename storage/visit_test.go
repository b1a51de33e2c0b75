package storage

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// visitedSeries is one series a visit or a Select gave, in a comparable form.
type visitedSeries struct {
	lset string
	ts   []int64
	vs   []uint64 // bits: a staleness marker is one NaN
}

func selectVisited(t *testing.T, q promstorage.Querier, hints *promstorage.SelectHints, ms ...*labels.Matcher) []visitedSeries {
	t.Helper()
	return collectVisited(t, q.Select(context.Background(), true, hints, ms...))
}

// collectVisited reads set as visitedSeries, sorted.
func collectVisited(t *testing.T, set promstorage.SeriesSet) []visitedSeries {
	t.Helper()
	var out []visitedSeries
	for set.Next() {
		s := set.At()
		v := visitedSeries{lset: s.Labels().String()}
		it := s.Iterator(nil)
		for it.Next() != 0 {
			ts, f := it.At()
			v.ts, v.vs = append(v.ts, ts), append(v.vs, math.Float64bits(f))
		}
		out = append(out, v)
	}
	require.NoError(t, set.Err())
	sortVisited(out)
	return out
}

func sortVisited(s []visitedSeries) {
	slices.SortFunc(s, func(a, b visitedSeries) int { return strings.Compare(a.lset, b.lset) })
}

func visitAll(t *testing.T, q promstorage.Querier, hints *promstorage.SelectHints, sw *stepWindows, ms ...*labels.Matcher) ([]visitedSeries, bool, error) {
	t.Helper()
	var mu sync.Mutex
	var out []visitedSeries
	handled, err := q.(*tieredQuerier).VisitSeries(context.Background(), hints, sw, func(lset labels.Labels, ts []int64, vs []float64) error {
		v := visitedSeries{lset: lset.String(), ts: slices.Clone(ts)}
		for _, f := range vs {
			v.vs = append(v.vs, math.Float64bits(f))
		}
		mu.Lock()
		defer mu.Unlock()
		out = append(out, v)
		return nil
	}, ms...)
	sortVisited(out)
	return out, handled, err
}

// TestVisitSeriesIsSelect: a visit of the raw tier hands over what Select
// returns: the same series and samples, whether they are in
// VictoriaMetrics, in the head, or both (one series with samples in each),
// staleness markers and step windows included; a read of more samples
// than allowed fails; a read of a rollup tier is not visited.
func TestVisitSeriesIsSelect(t *testing.T) {
	db := openTestDB(t, t.TempDir(), nil)
	stale := math.Float64frombits(value.StaleNaN)
	var older, newer []sample
	for i := range 40 {
		older = append(older, sample{baseTime + int64(i)*15_000, float64(i)})
		newer = append(newer, sample{baseTime + int64(40+i)*15_000, float64(40 + i)})
	}
	appendSamples(t, db, map[string][]sample{
		`req_total{job="a"}`:   older,
		`req_total{job="b"}`:   older[:20],
		`other_total{job="a"}`: older,
	})
	db.Flush() // in VictoriaMetrics
	appendSamples(t, db, map[string][]sample{
		`req_total{job="a"}`: append(slices.Clone(newer), sample{newer[len(newer)-1].t + 15_000, stale}),
		`req_total{job="c"}`: newer, // the head only
	})
	mint, maxt := baseTime, baseTime+100*15_000
	q, err := db.Querier(mint, maxt)
	require.NoError(t, err)
	m := labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "req_total")

	want := selectVisited(t, q, &promstorage.SelectHints{Start: mint, End: maxt}, m)
	require.Len(t, want, 3)
	got, handled, err := visitAll(t, q, &promstorage.SelectHints{Start: mint, End: maxt}, nil, m)
	require.NoError(t, err)
	require.True(t, handled)
	require.Equal(t, want, got)
	require.Len(t, got[0].ts, 81, "VictoriaMetrics' and the head's samples, the marker included")

	// Step windows: 2 steps of 5 minutes, windows of a minute.
	sw := &stepWindows{First: baseTime + 5*60_000, Step: 5 * 60_000, Last: baseTime + 15*60_000, Window: 60_000}
	wantSteps := collectVisited(t, q.(*tieredQuerier).SelectAtSteps(context.Background(), true, &promstorage.SelectHints{Start: mint, End: maxt}, sw.First, sw.Step, sw.Last, sw.Window, m))
	gotSteps, handled, err := visitAll(t, q, &promstorage.SelectHints{Start: mint, End: maxt}, sw, m)
	require.NoError(t, err)
	require.True(t, handled)
	require.Equal(t, wantSteps, gotSteps)
	require.Less(t, len(gotSteps[0].ts), 81)

	// Limits: the visit fails as Select does.
	db.opts.MaxSamplesPerQuery = 50
	_, handled, err = visitAll(t, q, &promstorage.SelectHints{Start: mint, End: maxt}, nil, m)
	require.True(t, handled)
	require.ErrorIs(t, err, ErrQueryTooLarge)
	db.opts.MaxSamplesPerQuery = DefaultOptions().MaxSamplesPerQuery

	// A tier marker (AdaptForTiers') is planned as sel plans it: with no
	// rollups written yet, raw.
	tierM := labels.MustNewMatcher(labels.MatchEqual, RollupLabel, Tier1m.String())
	got, handled, err = visitAll(t, q, &promstorage.SelectHints{Start: mint, End: maxt}, nil, m, tierM)
	require.NoError(t, err)
	require.True(t, handled)
	require.Equal(t, selectVisited(t, q, &promstorage.SelectHints{Start: mint, End: maxt}, m, tierM), got)

	// A rollup tier's read is Select's.
	_, handled, err = visitAll(t, q, &promstorage.SelectHints{Start: mint, End: maxt}, nil, m, labels.MustNewMatcher(labels.MatchEqual, RollupLabel, "counter"))
	require.NoError(t, err)
	require.False(t, handled)
}
