package cardinality

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	promstorage "github.com/prometheus/prometheus/storage"
)

// WarningMetric is the series Writer writes per flag.
const WarningMetric = "appliance_cardinality_warning"

// Writer writes the flags of an Analyzer as WarningMetric series every
// interval, and a staleness marker for each flag that is gone.
type Writer struct {
	a        *Analyzer
	app      promstorage.Appendable
	interval time.Duration
	logger   *slog.Logger

	mu      sync.Mutex
	written map[uint64]labels.Labels // series of the last write, by hash
}

// NewWriter returns a Writer; it starts nothing (Run does). app should
// be an appender the series guard never refuses (storage.DB's rule
// appender, Appendable).
func NewWriter(a *Analyzer, app promstorage.Appendable, interval time.Duration, logger *slog.Logger) *Writer {
	if interval <= 0 {
		interval = time.Minute
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{a: a, app: app, interval: interval, logger: logger, written: map[uint64]labels.Labels{}}
}

// Run checks and writes every interval until ctx is done.
func (w *Writer) Run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		if _, err := w.WriteOnce(ctx); err != nil && ctx.Err() == nil {
			w.logger.Warn("cardinality check failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// WriteOnce runs the check and writes its flags at the Analyzer's now.
func (w *Writer) WriteOnce(ctx context.Context) ([]Flag, error) {
	flags, err := w.a.Flags(ctx)
	if err != nil {
		return nil, err
	}
	ts := w.a.opts.Now().UnixMilli()
	w.mu.Lock()
	defer w.mu.Unlock()
	app := w.app.Appender(ctx)
	now := make(map[uint64]labels.Labels, len(flags))
	for _, f := range flags {
		ls := labels.FromStrings(labels.MetricName, WarningMetric,
			"metric", f.Metric, "label", f.Label, "job", f.Job, "instance", f.Instance, "reason", f.Reason)
		now[ls.Hash()] = ls
		if _, err := app.Append(0, ls, ts, float64(f.Values)); err != nil {
			_ = app.Rollback()
			return nil, fmt.Errorf("write %s: %w", WarningMetric, err)
		}
	}
	for h, ls := range w.written {
		if _, ok := now[h]; ok {
			continue
		}
		if _, err := app.Append(0, ls, ts, math.Float64frombits(value.StaleNaN)); err != nil {
			_ = app.Rollback()
			return nil, fmt.Errorf("write %s staleness marker: %w", WarningMetric, err)
		}
	}
	if err := app.Commit(); err != nil {
		return nil, fmt.Errorf("write %s: %w", WarningMetric, err)
	}
	w.written = now
	if len(flags) > 0 {
		w.logger.Info("labels flagged for cardinality", "flags", len(flags), "first", flags[0].Metric+"/"+flags[0].Label+" ("+strconv.Itoa(flags[0].Values)+" values)")
	}
	return flags, nil
}
