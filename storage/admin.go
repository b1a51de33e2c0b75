package storage

import (
	"context"
	"fmt"
	"math"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/index"
)

// The methods in this file make DB a web/api/v1 TSDBAdminStats, so that
// Prometheus' /api/v1/status/tsdb and admin endpoints work unchanged.

const msecPerDay = 24 * 3600 * 1000

// minStatsTopN is the top-N asked from VictoriaMetrics even for a small
// limit, so that NumLabelPairs (the sum over label names) is exact for up to
// that many label names.
const minStatsTopN = 1000

// Stats returns cardinality statistics of today's (UTC) series, which is
// what VictoriaMetrics indexes per day and the closest match to Prometheus'
// head. Fields follow Prometheus' meaning (see tsdb/index.MemPostings.Stats):
// CardinalityMetricsStats counts series per value of statsByLabelName,
// CardinalityLabelStats counts values per label name, LabelValuePairsStats
// counts series per label pair. LabelValueStats (Prometheus' memory by label
// name) has no VictoriaMetrics equivalent and is left empty. MinTime and
// MaxTime are those of samples committed since Open, or today so far.
func (db *DB) Stats(statsByLabelName string, limit int) (*tsdb.Stats, error) {
	if limit <= 0 {
		limit = 10
	}
	if err := db.readLock(); err != nil {
		return nil, err
	}
	defer db.readUnlock()
	now := time.Now().UnixMilli()
	date := uint64(now / msecPerDay)
	focus := statsByLabelName
	if focus == labels.MetricName {
		focus = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := db.vm.GetTSDBStatus(nil, nil, date, focus, max(limit, minStatsTopN), db.opts.MaxSeriesPerQuery, vmDeadline(ctx))
	if err != nil {
		return nil, fmt.Errorf("collect tsdb stats: %w", err)
	}
	metrics := st.SeriesCountByMetricName
	if focus != "" {
		metrics = st.SeriesCountByFocusLabelValue
	}
	var pairs uint64
	for _, e := range st.LabelValueCountByLabelName {
		pairs += e.Count
	}
	minT, maxT := db.minT.Load(), db.maxT.Load()
	if minT == math.MaxInt64 {
		minT, maxT = int64(date)*msecPerDay, now
	}
	return &tsdb.Stats{
		NumSeries: st.TotalSeries,
		MinTime:   minT,
		MaxTime:   maxT,
		IndexPostingStats: &index.PostingsStats{
			CardinalityMetricsStats: topStats(metrics, limit),
			CardinalityLabelStats:   topStats(st.LabelValueCountByLabelName, limit),
			LabelValuePairsStats:    topStats(st.SeriesCountByLabelValuePair, limit),
			NumLabelPairs:           int(pairs),
		},
	}, nil
}

func topStats(es []vmstorage.TopHeapEntry, limit int) []index.Stat {
	es = es[:min(len(es), limit)]
	out := make([]index.Stat, len(es))
	for i, e := range es {
		out[i] = index.Stat{Name: e.Name, Count: e.Count}
	}
	return out
}

// CleanTombstones is a no-op: deletes take effect at once.
func (*DB) CleanTombstones() error { return nil }

// Delete deletes whole series matching ms from every tier. VictoriaMetrics cannot delete
// part of a series, so [mint, maxt] must cover all the data kept (the
// default of Prometheus' delete_series API when start and end are omitted);
// otherwise Delete returns ErrNotSupported and deletes nothing.
func (db *DB) Delete(_ context.Context, mint, maxt int64, ms ...*labels.Matcher) error {
	if len(ms) == 0 {
		return fmt.Errorf("delete series: no matchers")
	}
	now := db.now().UnixMilli()
	if mint > now-db.opts.Retention5m.Milliseconds() || maxt < now+futureRetention.Milliseconds() {
		return fmt.Errorf("delete part of a series' time range: %w; omit start and end to delete whole series", ErrNotSupported)
	}
	tfs, err := toTagFilters(ms)
	if err != nil {
		return fmt.Errorf("delete series: %w", err)
	}
	if err := db.readLock(); err != nil {
		return err
	}
	defer db.readUnlock()
	// The recent window is emptied whole and refills (recent_window.go).
	db.recent.reset()
	db.head.delete(ms)
	// Rollup series carry the base labels plus __rollup__, so the same
	// matchers find them in every tier.
	for _, ts := range db.tiers {
		if _, err := ts.vm.DeleteSeries(nil, tfs, db.opts.MaxSeriesPerQuery); err != nil {
			return tooManySeries(fmt.Errorf("delete series in tier %s: %w", ts.tier, err), db.opts.MaxSeriesPerQuery)
		}
	}
	return nil
}

// Snapshot is not supported: VictoriaMetrics snapshots are taken by the
// appliance's own backup path, not through Prometheus' API.
func (*DB) Snapshot(string, bool) error {
	return fmt.Errorf("tsdb snapshot: %w", ErrNotSupported)
}

// WALReplayStatus reports nothing to replay: VictoriaMetrics has no WAL.
func (*DB) WALReplayStatus() (tsdb.WALReplayStatus, error) {
	return tsdb.WALReplayStatus{}, nil
}

// BlockMetas returns no blocks: VictoriaMetrics has parts, not Prometheus blocks.
func (*DB) BlockMetas() ([]tsdb.BlockMeta, error) { return nil, nil }

// DayStatus is VictoriaMetrics' cardinality status of the series of one
// UTC day in the raw tier (its per-day index), top entries first.
type DayStatus struct {
	// Day is the day's start (UTC).
	Day time.Time
	// TotalSeries counts the series with samples that day.
	TotalSeries uint64
	// SeriesByMetric counts series per metric name.
	SeriesByMetric []NameCount
	// ValuesByLabel counts values per label name.
	ValuesByLabel []NameCount
	// SeriesByLabel counts series per label name.
	SeriesByLabel []NameCount
	// SeriesByPair counts series per label="value" pair.
	SeriesByPair []NameCount
}

// NameCount is one entry of a DayStatus list.
type NameCount struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
}

// DayStatus returns the cardinality status of the UTC day holding day,
// with at most topN entries per list. Series newer than the last Flush
// (at most about 15 s with the downsampler running) may be missing.
func (db *DB) DayStatus(ctx context.Context, day time.Time, topN int) (*DayStatus, error) {
	if topN <= 0 {
		topN = 10
	}
	if err := db.readLock(); err != nil {
		return nil, err
	}
	defer db.readUnlock()
	date := uint64(day.UnixMilli() / msecPerDay)
	st, err := db.vm.GetTSDBStatus(nil, nil, date, "", topN, db.opts.MaxSeriesPerQuery, vmDeadline(ctx))
	if err != nil {
		return nil, fmt.Errorf("collect cardinality status: %w", err)
	}
	conv := func(es []vmstorage.TopHeapEntry) []NameCount {
		out := make([]NameCount, len(es))
		for i, e := range es {
			out[i] = NameCount{Name: e.Name, Count: e.Count}
		}
		return out
	}
	return &DayStatus{
		Day:            time.UnixMilli(int64(date) * msecPerDay).UTC(),
		TotalSeries:    st.TotalSeries,
		SeriesByMetric: conv(st.SeriesCountByMetricName),
		ValuesByLabel:  conv(st.LabelValueCountByLabelName),
		SeriesByLabel:  conv(st.SeriesCountByLabelName),
		SeriesByPair:   conv(st.SeriesCountByLabelValuePair),
	}, nil
}
