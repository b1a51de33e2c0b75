package cardinality

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	promstorage "github.com/prometheus/prometheus/storage"

	"github.com/aiserve/appliance/storage"
)

// Defaults and bounds of the check.
const (
	// DefaultMaxLabelValues is N when Options leave it 0
	// (storage.cardinality.max_label_values).
	DefaultMaxLabelValues = 1000
	// minIDValues is the fewest values of a label for one metric that
	// are flagged for looking like ids: one request id is not a leak.
	minIDValues = 10
	// minIDShare is the share of a label's values that must look like ids.
	minIDShare = 0.5
	// idSample is how many of a label's values are tested for ids.
	idSample = 200
	// maxCount caps the values counted for one metric and label; more
	// are reported as maxCount.
	maxCount = 100_000
	// topN is the length of the report's top lists.
	topN = 20
	// maxCandidates, maxMetrics and maxTargets bound the searches of one
	// check: the labels examined, the metrics per label, the jobs and
	// the instances per job of a flagged metric.
	maxCandidates = 25
	maxMetrics    = 25
	maxTargets    = 10
	// window is how far back label values are searched: the series
	// active in the last hour.
	window = time.Hour
	// samplesMetric is Prometheus' per-scrape count of samples kept
	// after relabelling, what sample_limit is checked against.
	samplesMetric = "scrape_samples_post_metric_relabeling"
)

// Reasons of a Flag (the reason label of appliance_cardinality_warning).
const (
	ReasonIDLike        = "id_like"
	ReasonTooManyValues = "too_many_values"
)

// Status is the storage's per-day cardinality status (storage.DB).
type Status interface {
	DayStatus(ctx context.Context, day time.Time, topN int) (*storage.DayStatus, error)
}

// Options configure an Analyzer. Status and Queryable are required.
type Options struct {
	Status Status
	// Queryable reads the raw tier (storage.DB.Raw).
	Queryable promstorage.Queryable
	// SeriesLimit reports the storage.max_series guard; nil: no guard.
	SeriesLimit func() storage.SeriesLimit
	// SampleLimit returns a scrape job's sample_limit (0: none); nil: none.
	SampleLimit func(job string) int
	// MaxLabelValues is N: more values of a label for one metric are
	// flagged (0: DefaultMaxLabelValues).
	MaxLabelValues int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Analyzer computes reports and flags. Safe for concurrent use.
type Analyzer struct {
	opts Options
}

// New returns an Analyzer.
func New(opts Options) *Analyzer {
	if opts.MaxLabelValues <= 0 {
		opts.MaxLabelValues = DefaultMaxLabelValues
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Analyzer{opts: opts}
}

// Flag is a label flagged on one metric and target.
type Flag struct {
	Metric string `json:"metric"`
	Label  string `json:"label"`
	// Job and Instance name the target that sends the series ("" when
	// the series carry no such label).
	Job      string `json:"job"`
	Instance string `json:"instance"`
	// Values is the number of distinct values of Label on Metric from
	// this target (at most 100,000 are counted).
	Values int `json:"values"`
	// MetricValues counts them over all targets.
	MetricValues int `json:"metricValues"`
	// IDShare is the share of the values tested that look like ids.
	IDShare float64 `json:"idShare"`
	Reason  string  `json:"reason"`
	// Examples are a few of the values.
	Examples []string `json:"examples"`
}

// MetricCount is a metric's series today and yesterday.
type MetricCount struct {
	Name      string `json:"name"`
	Series    uint64 `json:"series"`
	Yesterday uint64 `json:"yesterday"`
	// Growth is Series - Yesterday.
	Growth int64 `json:"growth"`
}

// TargetSeries is one target's series against its sample_limit and what
// storage.max_series refused of it.
type TargetSeries struct {
	Job      string `json:"job"`
	Instance string `json:"instance"`
	// Series is the samples of its last scrape after relabelling (one
	// per series); -1 for a target that only pushes.
	Series int `json:"series"`
	// SampleLimit is the job's sample_limit (0: none); Ratio is
	// Series/SampleLimit (0 without a limit).
	SampleLimit int     `json:"sampleLimit"`
	Ratio       float64 `json:"ratio"`
	// Refused counts samples of new series refused by storage.max_series
	// since the start; LastRefused and RefusedExample the last of them.
	Refused        int64      `json:"refused"`
	LastRefused    *time.Time `json:"lastRefused,omitempty"`
	RefusedExample string     `json:"refusedExample,omitempty"`
}

// Report is the answer of GET /api/v1/appliance/cardinality.
type Report struct {
	Time time.Time `json:"time"`
	// TotalSeries and YesterdaySeries count the series of today and of
	// yesterday (UTC days); Growth is the difference.
	TotalSeries     uint64 `json:"totalSeries"`
	YesterdaySeries uint64 `json:"yesterdaySeries"`
	Growth          int64  `json:"growth"`
	// MaxSeries is storage.max_series (0: no guard) and ActiveSeries the
	// series it counts as active.
	MaxSeries    int `json:"maxSeries"`
	ActiveSeries int `json:"activeSeries"`
	// MaxLabelValues is N.
	MaxLabelValues int                 `json:"maxLabelValues"`
	TopMetrics     []MetricCount       `json:"topMetrics"`
	TopLabels      []storage.NameCount `json:"topLabels"`
	TopPairs       []storage.NameCount `json:"topPairs"`
	Targets        []TargetSeries      `json:"targets"`
	Flagged        []Flag              `json:"flagged"`
}

// Report computes the whole report.
func (a *Analyzer) Report(ctx context.Context) (*Report, error) {
	now := a.opts.Now()
	today, err := a.opts.Status.DayStatus(ctx, now, topN)
	if err != nil {
		return nil, err
	}
	yesterday, err := a.opts.Status.DayStatus(ctx, now.Add(-24*time.Hour), 1000)
	if err != nil {
		return nil, err
	}
	r := &Report{
		Time:            now.UTC(),
		TotalSeries:     today.TotalSeries,
		YesterdaySeries: yesterday.TotalSeries,
		Growth:          int64(today.TotalSeries) - int64(yesterday.TotalSeries),
		MaxLabelValues:  a.opts.MaxLabelValues,
		TopLabels:       nonNil(today.ValuesByLabel),
		TopPairs:        nonNil(today.SeriesByPair),
		TopMetrics:      []MetricCount{},
	}
	before := make(map[string]uint64, len(yesterday.SeriesByMetric))
	for _, e := range yesterday.SeriesByMetric {
		before[e.Name] = e.Count
	}
	for _, e := range today.SeriesByMetric {
		y := before[e.Name]
		r.TopMetrics = append(r.TopMetrics, MetricCount{Name: e.Name, Series: e.Count, Yesterday: y, Growth: int64(e.Count) - int64(y)})
	}
	var lim storage.SeriesLimit
	if a.opts.SeriesLimit != nil {
		lim = a.opts.SeriesLimit()
	}
	r.MaxSeries, r.ActiveSeries = lim.Limit, lim.Active
	if r.Targets, err = a.targets(ctx, now, lim); err != nil {
		return nil, err
	}
	if r.Flagged, err = a.flags(ctx, now, today); err != nil {
		return nil, err
	}
	return r, nil
}

// Flags runs the id and value-count check alone (what Writer writes).
func (a *Analyzer) Flags(ctx context.Context) ([]Flag, error) {
	now := a.opts.Now()
	today, err := a.opts.Status.DayStatus(ctx, now, 1000)
	if err != nil {
		return nil, err
	}
	return a.flags(ctx, now, today)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// targets lists the scraped targets' series (their last
// scrape_samples_post_metric_relabeling) with the job's sample_limit,
// and the refusals of storage.max_series, pushes included.
func (a *Analyzer) targets(ctx context.Context, now time.Time, lim storage.SeriesLimit) ([]TargetSeries, error) {
	q, err := a.opts.Queryable.Querier(now.Add(-5*time.Minute).UnixMilli(), now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", samplesMetric, err)
	}
	defer q.Close()
	byKey := map[storage.TargetKey]*TargetSeries{}
	var out []*TargetSeries
	ss := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, samplesMetric))
	for ss.Next() {
		s := ss.At()
		v := math.NaN()
		it := s.Iterator(nil)
		for it.Next() != 0 {
			_, v = it.At()
		}
		if math.IsNaN(v) {
			continue
		}
		k := storage.TargetKey{Job: s.Labels().Get("job"), Instance: s.Labels().Get("instance")}
		t := &TargetSeries{Job: k.Job, Instance: k.Instance, Series: int(v)}
		if a.opts.SampleLimit != nil {
			t.SampleLimit = a.opts.SampleLimit(k.Job)
		}
		if t.SampleLimit > 0 {
			t.Ratio = float64(t.Series) / float64(t.SampleLimit)
		}
		byKey[k] = t
		out = append(out, t)
	}
	if err := ss.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", samplesMetric, err)
	}
	for _, rf := range lim.Refusals {
		t := byKey[rf.TargetKey]
		if t == nil {
			t = &TargetSeries{Job: rf.Job, Instance: rf.Instance, Series: -1}
			byKey[rf.TargetKey] = t
			out = append(out, t)
		}
		last := rf.Last.UTC()
		t.Refused, t.LastRefused, t.RefusedExample = rf.Samples, &last, rf.Example
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Refused != out[j].Refused {
			return out[i].Refused > out[j].Refused
		}
		if out[i].Ratio != out[j].Ratio {
			return out[i].Ratio > out[j].Ratio
		}
		return out[i].Series > out[j].Series
	})
	res := make([]TargetSeries, len(out))
	for i, t := range out {
		res[i] = *t
	}
	return res, nil
}

// flags examines the labels with the most values today: for each metric
// that carries one, the label is flagged when its values there look like
// ids or outnumber MaxLabelValues; each flag then names the targets that
// send the metric with that label.
func (a *Analyzer) flags(ctx context.Context, now time.Time, today *storage.DayStatus) ([]Flag, error) {
	q, err := a.opts.Queryable.Querier(now.Add(-window).UnixMilli(), now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("search label values: %w", err)
	}
	defer q.Close()
	values := func(name string, limit int, ms ...*labels.Matcher) ([]string, error) {
		vs, _, err := q.LabelValues(ctx, name, &promstorage.LabelHints{Limit: limit}, ms...)
		if err != nil {
			return nil, fmt.Errorf("search values of %s: %w", name, err)
		}
		return vs, nil
	}
	eq := func(n, v string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchEqual, n, v) }
	has := func(n string) *labels.Matcher { return labels.MustNewMatcher(labels.MatchNotEqual, n, "") }

	flags := []Flag{}
	candidates := 0
	for _, l := range today.ValuesByLabel {
		// job and instance name the targets the flags point at.
		if l.Name == labels.MetricName || l.Name == "job" || l.Name == "instance" || l.Count < minIDValues {
			continue
		}
		if candidates++; candidates > maxCandidates {
			break
		}
		metrics, err := values(labels.MetricName, maxMetrics, has(l.Name))
		if err != nil {
			return nil, err
		}
		for _, m := range metrics {
			vs, err := values(l.Name, maxCount, eq(labels.MetricName, m))
			if err != nil {
				return nil, err
			}
			share := idShare(sample(vs))
			reason := ""
			switch {
			case len(vs) >= minIDValues && share >= minIDShare:
				reason = ReasonIDLike
			case len(vs) > a.opts.MaxLabelValues:
				reason = ReasonTooManyValues
			default:
				continue
			}
			base := Flag{Metric: m, Label: l.Name, MetricValues: len(vs), IDShare: share, Reason: reason, Examples: vs[:min(3, len(vs))]}
			per, err := a.perTarget(values, base, eq, has)
			if err != nil {
				return nil, err
			}
			flags = append(flags, per...)
		}
	}
	sort.SliceStable(flags, func(i, j int) bool { return flags[i].Values > flags[j].Values })
	return flags, nil
}

type valuesFunc func(name string, limit int, ms ...*labels.Matcher) ([]string, error)

// perTarget splits a flag by the jobs and instances that send the metric
// with the label.
func (a *Analyzer) perTarget(values valuesFunc, base Flag, eq func(n, v string) *labels.Matcher, has func(string) *labels.Matcher) ([]Flag, error) {
	jobs, err := values("job", maxTargets, eq(labels.MetricName, base.Metric), has(base.Label))
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		jobs = []string{""}
	}
	var out []Flag
	for _, j := range jobs {
		sel := []*labels.Matcher{eq(labels.MetricName, base.Metric), has(base.Label), eq("job", j)}
		insts, err := values("instance", maxTargets, sel...)
		if err != nil {
			return nil, err
		}
		if len(insts) == 0 {
			insts = []string{""}
		}
		for _, i := range insts {
			vs, err := values(base.Label, maxCount, eq(labels.MetricName, base.Metric), eq("job", j), eq("instance", i))
			if err != nil {
				return nil, err
			}
			if len(vs) == 0 {
				continue
			}
			f := base
			f.Job, f.Instance, f.Values = j, i, len(vs)
			out = append(out, f)
		}
	}
	return out, nil
}

// sample takes up to idSample values spread over vs.
func sample(vs []string) []string {
	if len(vs) <= idSample {
		return vs
	}
	out := make([]string, 0, idSample)
	step := float64(len(vs)) / idSample
	for i := range idSample {
		out = append(out, vs[int(float64(i)*step)])
	}
	return out
}
