package pipeline

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/explain"
)

// Segment kinds.
const (
	KindHistogram = "histogram"
	KindDuration  = "duration"
)

// Note is what the page says under the stacked chart.
const Note = "Means add up, percentiles do not: the stack is of each segment's mean per item, and the chain's mean is their sum; each segment's P95 stands alone and the P95s do not sum to the chain's."

// Pipeline is a chain of segments, in order.
type Pipeline struct {
	Name     string    `json:"name"`
	Segments []Segment `json:"segments"`
}

// Segment is one measured hop of a pipeline.
type Segment struct {
	Name string `json:"name"`
	// Kind is KindHistogram or KindDuration.
	Kind   string `json:"kind"`
	Metric string `json:"metric"`
	// Matchers are the selector's label matchers, without braces.
	Matchers string `json:"matchers"`
	// Transfer counters; "" for those not configured.
	Bytes    string `json:"bytes,omitempty"`
	Retries  string `json:"retries,omitempty"`
	Failures string `json:"failures,omitempty"`
}

// FromConfig turns the config's pipelines into Pipelines.
func FromConfig(pcs []*config.PipelineConfig) []Pipeline {
	out := make([]Pipeline, 0, len(pcs))
	for _, pc := range pcs {
		p := Pipeline{Name: pc.Name, Segments: make([]Segment, 0, len(pc.Segments))}
		for _, sc := range pc.Segments {
			s := Segment{Name: sc.Name, Kind: KindHistogram, Metric: sc.Metric(), Matchers: sc.Matchers()}
			if sc.Histogram == "" {
				s.Kind = KindDuration
			}
			if t := sc.Transfer; t != nil {
				s.Bytes, s.Retries, s.Failures = t.Bytes, t.Retries, t.Failures
			}
			p.Segments = append(p.Segments, s)
		}
		out = append(out, p)
	}
	return out
}

// Measure is the segment as package explain's phase: its mean and P95
// as templates of $__window.
func (s Segment) Measure() explain.Measure {
	sel := "{" + s.Matchers + "}"
	if s.Kind == KindDuration {
		return explain.Measure{Name: s.Name,
			Mean: "avg(avg_over_time(" + s.Metric + sel + "[$__window]))",
			P95:  "max(quantile_over_time(0.95, " + s.Metric + sel + "[$__window]))"}
	}
	return explain.Measure{Name: s.Name,
		Mean: "sum(rate(" + s.Metric + "_sum" + sel + "[$__window])) / sum(rate(" + s.Metric + "_count" + sel + "[$__window]))",
		P95:  "histogram_quantile(0.95, sum by (le) (rate(" + s.Metric + "_bucket" + sel + "[$__window])))"}
}

// Transfer is what a segment moved over the range: each configured
// counter's increase (null when it is not configured or has no data).
type Transfer struct {
	Bytes    explain.Num `json:"bytes"`
	Retries  explain.Num `json:"retries"`
	Failures explain.Num `json:"failures"`
	// Configured names the figures the config gives, in the order bytes,
	// retries, failures.
	Configured []string `json:"configured"`
}

// SegmentReport is one segment over the range.
type SegmentReport struct {
	Segment
	Mean [][2]explain.Num `json:"mean"`
	P95  [][2]explain.Num `json:"p95"`
	// RangeMean and RangeP95 are over the whole range.
	RangeMean explain.Num `json:"range_mean"`
	RangeP95  explain.Num `json:"range_p95"`
	// Share is RangeMean over the sum of the segments' RangeMeans.
	Share    explain.Num `json:"share"`
	Transfer *Transfer   `json:"transfer,omitempty"`
}

// Report is Read's answer.
type Report struct {
	Name     string          `json:"name"`
	From     float64         `json:"from"`
	To       float64         `json:"to"`
	Step     float64         `json:"step"`
	Note     string          `json:"note"`
	Segments []SegmentReport `json:"segments"`
	// TotalMean is the sum of the segments' means over the range.
	TotalMean explain.Num `json:"total_mean"`
	// Slowest is the segment with the largest mean ("" when none has
	// data), SlowestShare its share.
	Slowest      string      `json:"slowest"`
	SlowestShare explain.Num `json:"slowest_share"`
	Summary      string      `json:"summary"`
	// Missing names the segments without data in the range.
	Missing []string `json:"missing"`
}

// Read reads pipeline p over [o.From, o.To].
func Read(ctx context.Context, q explain.Querier, p Pipeline, o explain.BreakdownOptions) (*Report, error) {
	spec := explain.Spec{Service: p.Name, Engine: "pipeline"}
	for _, s := range p.Segments {
		spec.Phases = append(spec.Phases, s.Measure())
	}
	bd, err := explain.Breakdown(ctx, q, spec, o)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	r := &Report{Name: p.Name, From: bd.From, To: bd.To, Step: bd.Step, Note: Note, Segments: []SegmentReport{},
		TotalMean: explain.Num(math.NaN()), SlowestShare: explain.Num(math.NaN()), Missing: []string{}}
	total, have := 0.0, false
	for i, ph := range bd.Phases {
		sr := SegmentReport{Segment: p.Segments[i], Mean: ph.Mean, P95: ph.P95, RangeMean: ph.RangeMean, RangeP95: ph.RangeP95, Share: explain.Num(math.NaN())}
		if m := float64(ph.RangeMean); finite(m) {
			total += m
			have = true
		} else {
			r.Missing = append(r.Missing, fmt.Sprintf("%s: no samples of %s{%s} in the range", sr.Name, sr.Metric, sr.Matchers))
		}
		if sr.Transfer, err = transfer(ctx, q, sr.Segment, time.UnixMilli(int64(r.From*1000)), time.UnixMilli(int64(r.To*1000))); err != nil {
			return nil, fmt.Errorf("pipeline %s segment %s transfer: %w", p.Name, sr.Name, err)
		}
		r.Segments = append(r.Segments, sr)
	}
	if !have {
		r.Summary = "No data for any segment of " + p.Name + " in this range."
		return r, nil
	}
	r.TotalMean = explain.Num(total)
	best := -1
	for i := range r.Segments {
		m := float64(r.Segments[i].RangeMean)
		if !finite(m) {
			continue
		}
		if total > 0 {
			r.Segments[i].Share = explain.Num(m / total)
		}
		if best < 0 || m > float64(r.Segments[best].RangeMean) {
			best = i
		}
	}
	s := r.Segments[best]
	r.Slowest, r.SlowestShare = s.Name, s.Share
	r.Summary = fmt.Sprintf("%s is the slowest segment: mean %s of the chain's %s", s.Name,
		explain.FormatValue(float64(s.RangeMean), "s"), explain.FormatValue(total, "s"))
	if sh := float64(s.Share); finite(sh) {
		r.Summary += fmt.Sprintf(" (%.0f%%)", 100*sh)
	}
	if p95 := float64(s.RangeP95); finite(p95) {
		r.Summary += "; its P95 " + explain.FormatValue(p95, "s")
	}
	return r, nil
}

// transfer reads the segment's transfer counters' increases over
// [from, to]; nil when none is configured.
func transfer(ctx context.Context, q explain.Querier, s Segment, from, to time.Time) (*Transfer, error) {
	if s.Bytes == "" && s.Retries == "" && s.Failures == "" {
		return nil, nil
	}
	t := &Transfer{Bytes: explain.Num(math.NaN()), Retries: explain.Num(math.NaN()), Failures: explain.Num(math.NaN()), Configured: []string{}}
	w := strconv.FormatInt(max(1, int64(to.Sub(from).Round(time.Second)/time.Second)), 10) + "s"
	for _, c := range []struct {
		name, metric string
		out          *explain.Num
	}{{"bytes", s.Bytes, &t.Bytes}, {"retries", s.Retries, &t.Retries}, {"failures", s.Failures, &t.Failures}} {
		if c.metric == "" {
			continue
		}
		t.Configured = append(t.Configured, c.name)
		v, err := q.Instant(ctx, "sum(increase("+c.metric+"{"+s.Matchers+"}["+w+"]))", to)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		if len(v) > 0 {
			*c.out = explain.Num(v[0].Value)
		}
	}
	return t, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
