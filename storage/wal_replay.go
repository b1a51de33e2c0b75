package storage

import (
	"errors"
	"fmt"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/record"
	"github.com/prometheus/prometheus/tsdb/wlog"
)

// replayBatch is how many replayed samples go into one Commit.
const replayBatch = 100_000

// replayWAL writes every sample of the log's segments into the store, as
// Commit would (old samples rolled up, the recent window fed, late
// windows reported), without logging them again. A torn or corrupt tail
// (a power loss in the middle of a page) is cut off with wlog's Repair:
// the samples before it are kept, the rest of that segment and any later
// one are dropped, and the number of the segment is logged.
//
// Samples VictoriaMetrics already had are written a second time; their
// duplicates carry the same value, so readers (largest value wins) answer
// the same.
func (db *DB) replayWAL(l *wal) (int, error) {
	n, err := db.replaySegments(l.w.Dir())
	var cerr *wlog.CorruptionErr
	if errors.As(err, &cerr) {
		db.logger.Warn("write-ahead log has a torn or corrupt tail; keeping the samples before it",
			"segment", cerr.Segment, "offset", cerr.Offset, "err", cerr.Err)
		if rerr := l.w.Repair(err); rerr != nil {
			return n, fmt.Errorf("repair write-ahead log: %w; move %s aside to start without it (the samples in it are lost)", rerr, l.w.Dir())
		}
		err = nil
	}
	if err != nil {
		return n, err
	}
	return n, l.startAfterReplay()
}

func (db *DB) replaySegments(dir string) (n int, err error) {
	sr, err := wlog.NewSegmentsReader(dir)
	if err != nil {
		return 0, fmt.Errorf("read write-ahead log %s: %w", dir, err)
	}
	defer sr.Close()

	r := wlog.NewReader(sr)
	dec := record.NewDecoder(labels.NewSymbolTable(), db.logger)
	names := make(map[chunks.HeadSeriesRef]labels.Labels)
	var (
		series  []record.RefSeries
		samples []record.RefSample
		app     = db.newReplayAppender()
		pending int
	)
	defer func() {
		if app != nil {
			_ = app.Rollback()
		}
	}()
	for r.Next() {
		rec := r.Record()
		switch dec.Type(rec) {
		case record.Series:
			series, err = dec.Series(rec, series[:0])
			if err != nil {
				return n, fmt.Errorf("write-ahead log: decode series: %w", err)
			}
			for _, s := range series {
				// The decoder's labels point into rec, which the
				// reader reuses.
				names[s.Ref] = s.Labels.Copy()
			}
		case record.Samples, record.SamplesV2:
			samples, err = dec.Samples(rec, samples[:0])
			if err != nil {
				return n, fmt.Errorf("write-ahead log: decode samples: %w", err)
			}
			for _, s := range samples {
				ls, ok := names[s.Ref]
				if !ok {
					// Cannot happen with generations (see wal); a
					// sample without a name cannot be stored.
					continue
				}
				if _, err := app.appendFloat(0, ls, s.T, s.V); err != nil {
					continue // out of retention by now, or refused as at Append
				}
				n++
				if pending++; pending >= replayBatch {
					err := app.Commit()
					app = db.newReplayAppender()
					if err != nil {
						return n, fmt.Errorf("replay write-ahead log: %w", err)
					}
					pending = 0
				}
			}
		}
	}
	err = app.Commit()
	app = nil
	if err != nil {
		return n, fmt.Errorf("replay write-ahead log: %w", err)
	}
	if err := r.Err(); err != nil {
		return n, fmt.Errorf("read write-ahead log: %w", err) // a *wlog.CorruptionErr
	}
	return n, nil
}

// newReplayAppender is an appender whose Commit neither logs to the WAL
// nor checks the free-disk watermark: its samples were acknowledged before
// the restart and must reach the store.
func (db *DB) newReplayAppender() *appender {
	a := db.newAppender()
	a.replay = true
	return a
}
