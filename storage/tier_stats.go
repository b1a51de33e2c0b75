package storage

import (
	"context"
	"fmt"
	"math"
	"time"

	vmstorage "github.com/VictoriaMetrics/VictoriaMetrics/lib/storage"
)

// TierStats describe one tier for GET /api/v1/status/tiers.
type TierStats struct {
	Tier string `json:"tier"`
	// Resolution is the rollup window ("0s" for raw).
	Resolution string `json:"resolution"`
	Retention  string `json:"retention"`
	// CoveredFrom and CoveredTo bound the time queries may read from
	// this tier: from the retention horizon to the newest sample written
	// since Open (raw; now if none) or to the watermark (rollup tiers).
	// The oldest sample actually kept is not tracked across restarts, so
	// CoveredFrom is the horizon even where the tier holds nothing that
	// old. A rollup tier with nothing rolled up yet covers nothing (both
	// null).
	CoveredFrom *time.Time `json:"coveredFrom"`
	CoveredTo   *time.Time `json:"coveredTo"`
	// Watermark is the time up to which the tier is rolled up (rollup
	// tiers only), and LagSeconds how far it is behind now.
	Watermark  *time.Time `json:"watermark,omitempty"`
	LagSeconds *float64   `json:"lagSeconds,omitempty"`
	// Series counts the series stored: in a rollup tier one per stored
	// aggregate (a gauge has four, a counter one).
	Series uint64 `json:"series"`
	// Samples counts the rows stored, including duplicates VictoriaMetrics
	// has not merged yet.
	Samples uint64 `json:"samples"`
	// DiskBytes is data plus index on disk.
	DiskBytes uint64 `json:"diskBytes"`
	// MinTimeWritten and MaxTimeWritten bound the samples written since
	// Open (null if none).
	MinTimeWritten *time.Time `json:"minTimeWritten"`
	MaxTimeWritten *time.Time `json:"maxTimeWritten"`
}

// TierStats returns the figures of every tier, finest first.
func (db *DB) TierStats(ctx context.Context) ([]TierStats, error) {
	if err := db.readLock(); err != nil {
		return nil, err
	}
	defer db.readUnlock()
	now := db.now()
	out := make([]TierStats, 0, NumTiers)
	ptr := func(ms int64) *time.Time {
		t := time.UnixMilli(ms).UTC()
		return &t
	}
	for _, ts := range db.tiers {
		var m vmstorage.Metrics
		ts.vm.UpdateMetrics(&m)
		series, err := ts.vm.GetSeriesCount(vmDeadline(ctx))
		if err != nil {
			return nil, fmt.Errorf("count series of tier %s: %w", ts.tier, err)
		}
		tm := &m.TableMetrics
		st := TierStats{
			Tier:       ts.tier.String(),
			Resolution: ts.tier.Resolution().String(),
			Retention:  ts.retention.String(),
			Series:     series,
			Samples:    tm.TotalRowsCount(),
			DiskBytes:  tm.SmallSizeBytes + tm.BigSizeBytes + tm.IndexDBMetrics.FileSizeBytes,
		}
		minT, maxT := ts.minT.Load(), ts.maxT.Load()
		if ts.tier == TierRaw {
			minT, maxT = db.minT.Load(), db.maxT.Load()
		}
		if minT != math.MaxInt64 {
			st.MinTimeWritten, st.MaxTimeWritten = ptr(minT), ptr(maxT)
		}
		lo, hi := db.coverage(ts.tier, now.UnixMilli())
		if ts.tier == TierRaw {
			st.CoveredFrom = ptr(lo)
			if maxT != math.MinInt64 {
				st.CoveredTo = ptr(maxT)
			} else {
				st.CoveredTo = ptr(now.UnixMilli())
			}
		} else {
			if wm := ts.rolledUpTo.Load(); wm != 0 {
				st.Watermark = ptr(wm)
				lag := max(0, now.Sub(time.UnixMilli(wm)).Seconds())
				st.LagSeconds = &lag
			}
			if hi > lo {
				st.CoveredFrom, st.CoveredTo = ptr(lo), ptr(hi-1)
			}
		}
		out = append(out, st)
	}
	return out, nil
}
