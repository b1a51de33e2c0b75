package histconv

import (
	"context"
	"errors"
	"math"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

// Appendable wraps next so that its appenders store native histograms in
// classic form (Appender).
func (c *Converter) Appendable(next storage.AppendableV2) storage.AppendableV2 {
	return appendable{c: c, next: next}
}

type appendable struct {
	c    *Converter
	next storage.AppendableV2
}

func (a appendable) AppenderV2(ctx context.Context) storage.AppenderV2 {
	return a.c.Appender(a.next.AppenderV2(ctx))
}

// Appender returns an appender that passes float samples to next and
// writes native histograms as classic series to it. It is, like any
// storage.AppenderV2, for one goroutine.
func (c *Converter) Appender(next storage.AppenderV2) *Appender {
	return &Appender{c: c, next: next, lb: labels.NewBuilder(labels.EmptyLabels())}
}

// Appender is a storage.AppenderV2 and storage.ExemplarAppenderV2 that
// converts native histograms; see the package doc.
type Appender struct {
	c    *Converter
	next storage.AppenderV2
	lb   *labels.Builder
	ex   []exemplar.Exemplar

	dropped   int
	firstDrop error
}

var (
	_ storage.AppenderV2         = (*Appender)(nil)
	_ storage.ExemplarAppenderV2 = (*Appender)(nil)
)

// Dropped returns how many histograms this appender dropped and the error
// of the first, naming its series.
func (a *Appender) Dropped() (int, error) { return a.dropped, a.firstDrop }

// Append implements storage.AppenderV2. A histogram is written as its
// classic series; the returned ref stands for the native series (the
// scrape loop needs one to track staleness) and is never passed to next.
// A histogram that cannot be converted is dropped without an error.
func (a *Appender) Append(ref storage.SeriesRef, ls labels.Labels, st, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, opts storage.AOptions) (storage.SeriesRef, error) {
	if h == nil && fh == nil {
		// Float samples pass untouched (no hashing on the hot path) but
		// for stale markers: the scrape loop ends a vanished native
		// series with a float stale marker under its own labels.
		if value.IsStaleNaN(v) {
			if key := ls.Hash(); a.c.Known(key) {
				return storage.SeriesRef(key), a.appendClassic(ls, st, t, a.c.stale(key), opts)
			}
		}
		return a.next.Append(ref, ls, st, t, v, nil, nil, opts)
	}
	key := ls.Hash()
	cl, err := a.c.Convert(key, h, fh)
	if err != nil {
		a.dropped++
		if a.firstDrop == nil {
			a.firstDrop = &seriesError{series: ls.String(), err: err}
		}
		return ref, nil
	}
	return storage.SeriesRef(key), a.appendClassic(ls, st, t, cl, opts)
}

func (a *Appender) appendClassic(ls labels.Labels, st, t int64, cl Classic, opts storage.AOptions) error {
	base := ls.Get(model.MetricNameLabel)
	exemplars := opts.Exemplars
	if !opts.Metadata.IsEmpty() && opts.MetricFamilyName == "" {
		opts.MetricFamilyName = base
	}
	a.lb.Reset(ls)
	a.lb.Set(model.MetricNameLabel, base+"_bucket")
	lo := math.Inf(-1)
	for i, bound := range cl.Bounds {
		a.lb.Set(model.BucketLabel, labels.FormatOpenMetricsFloat(bound))
		o := opts
		o.Exemplars = inBucket(a.ex[:0], exemplars, lo, bound)
		a.ex = o.Exemplars
		if len(o.Exemplars) == 0 {
			o.Exemplars = nil
		}
		if _, err := a.next.Append(0, a.lb.Labels(), st, t, cl.Cumulative[i], nil, nil, o); err != nil {
			return err
		}
		lo = bound
	}
	opts.Exemplars = nil
	a.lb.Del(model.BucketLabel)
	a.lb.Set(model.MetricNameLabel, base+"_count")
	if _, err := a.next.Append(0, a.lb.Labels(), st, t, cl.Count, nil, nil, opts); err != nil {
		return err
	}
	a.lb.Set(model.MetricNameLabel, base+"_sum")
	_, err := a.next.Append(0, a.lb.Labels(), st, t, cl.Sum, nil, nil, opts)
	return err
}

// inBucket appends to dst the exemplars whose value is in (lo, hi].
func inBucket(dst, es []exemplar.Exemplar, lo, hi float64) []exemplar.Exemplar {
	for _, e := range es {
		if e.Value > lo && e.Value <= hi || math.IsInf(hi, 1) && math.IsNaN(e.Value) {
			dst = append(dst, e)
		}
	}
	return dst
}

// AppendExemplars implements storage.ExemplarAppenderV2: exemplars of a
// native series go to the _bucket series that holds their value, others
// to next (dropped when next keeps no exemplars).
func (a *Appender) AppendExemplars(ref storage.SeriesRef, ls labels.Labels, es []exemplar.Exemplar) (storage.SeriesRef, error) {
	ea, ok := a.next.(storage.ExemplarAppenderV2)
	if !ok {
		return ref, nil
	}
	key := ls.Hash()
	if !a.c.Known(key) {
		return ea.AppendExemplars(ref, ls, es)
	}
	bounds := append(a.c.Bounds(key), math.Inf(1))
	base := ls.Get(model.MetricNameLabel)
	a.lb.Reset(ls)
	a.lb.Set(model.MetricNameLabel, base+"_bucket")
	lo := math.Inf(-1)
	var errs []error
	for _, bound := range bounds {
		in := inBucket(a.ex[:0], es, lo, bound)
		a.ex = in
		lo = bound
		if len(in) == 0 {
			continue
		}
		a.lb.Set(model.BucketLabel, labels.FormatOpenMetricsFloat(bound))
		if _, err := ea.AppendExemplars(0, a.lb.Labels(), in); err != nil {
			errs = append(errs, err)
		}
	}
	return ref, errors.Join(errs...)
}

// Commit implements storage.AppenderV2.
func (a *Appender) Commit() error { return a.next.Commit() }

// Rollback implements storage.AppenderV2.
func (a *Appender) Rollback() error { return a.next.Rollback() }

// seriesError names the series of a dropped histogram.
type seriesError struct {
	series string
	err    error
}

func (e *seriesError) Error() string {
	s := e.series
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return "series " + s + ": " + e.err.Error()
}

func (e *seriesError) Unwrap() error { return e.err }
