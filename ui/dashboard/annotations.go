package dashboard

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

// Annotation kinds.
const (
	KindWarmup  = "warmup"
	KindAlert   = "alert"
	KindRestart = "restart"
	// KindRelease marks a release: posted, or recorded by the
	// ReleaseDetector; stored in the state file.
	KindRelease = "release"
	// KindNote is any other posted annotation.
	KindNote = "note"
)

// Annotation is one overlay of the charts: a span (warm-up, firing alert)
// or a marker (restart, release, Time == End). Times are Unix seconds.
// Stored annotations (AnnotationStore) have an ID.
type Annotation struct {
	ID       string            `json:"id,omitempty"`
	Time     float64           `json:"time"`
	End      float64           `json:"end"`
	Kind     string            `json:"kind"`
	Severity string            `json:"severity,omitempty"`
	Text     string            `json:"text"`
	Tags     []string          `json:"tags,omitempty"`
	Labels   map[string]string `json:"labels"`
}

// AnnotationStep is the resolution of Annotations over [from, to]: about
// 720 points, never finer than 15 s.
func AnnotationStep(from, to time.Time) time.Duration {
	return max(to.Sub(from)/720, 15*time.Second).Truncate(time.Second)
}

// Annotations reads, over [from, to]:
//   - warm-up spans: where max by (job, instance) (appliance_instance_warming) is 1;
//   - firing alerts: ALERTS{alertstate="firing"}, one span per alert, with
//     its severity;
//   - restarts: each value of process_start_time_seconds that lies in the
//     range is a process start, marked at that time.
//
// Spans are runs of consecutive steps; a gap of more than one step ends
// one. The result is sorted by time, then kind.
func Annotations(ctx context.Context, eng promql.QueryEngine, q storage.Queryable, from, to time.Time) ([]Annotation, error) {
	step := AnnotationStep(from, to)
	rangeQ := func(expr string) (promql.Matrix, error) {
		qry, err := eng.NewRangeQuery(ctx, q, nil, expr, from, to, step)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", expr, err)
		}
		defer qry.Close()
		res := qry.Exec(ctx)
		if res.Err != nil {
			return nil, fmt.Errorf("query %s: %w", expr, res.Err)
		}
		m, err := res.Matrix()
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", expr, err)
		}
		return m, nil
	}
	out := []Annotation{}

	warm, err := rangeQ(`max by (job, instance) (appliance_instance_warming) == 1`)
	if err != nil {
		return nil, err
	}
	for _, s := range warm {
		for _, sp := range spans(s.Floats, step) {
			out = append(out, Annotation{Time: sp[0], End: sp[1], Kind: KindWarmup,
				Text: "warming up: " + s.Metric.Get("instance"), Labels: s.Metric.Map()})
		}
	}

	alerts, err := rangeQ(`ALERTS{alertstate="firing"}`)
	if err != nil {
		return nil, err
	}
	for _, s := range alerts {
		ls := s.Metric.Map()
		delete(ls, labels.MetricName)
		delete(ls, "alertstate")
		text := s.Metric.Get("alertname")
		for _, l := range []string{"instance", "probe", "model_name", "model"} {
			if v := s.Metric.Get(l); v != "" {
				text += " " + v
			}
		}
		for _, sp := range spans(s.Floats, step) {
			out = append(out, Annotation{Time: sp[0], End: sp[1], Kind: KindAlert,
				Severity: s.Metric.Get("severity"), Text: text, Labels: ls})
		}
	}

	starts, err := rangeQ(`process_start_time_seconds`)
	if err != nil {
		return nil, err
	}
	lo, hi := float64(from.Unix()), float64(to.Unix())
	for _, s := range starts {
		seen := map[float64]bool{}
		ls := s.Metric.Map()
		delete(ls, labels.MetricName)
		for _, p := range s.Floats {
			if seen[p.F] || p.F < lo || p.F > hi || math.IsNaN(p.F) {
				continue
			}
			seen[p.F] = true
			out = append(out, Annotation{Time: p.F, End: p.F, Kind: KindRestart, Tags: []string{KindRestart},
				Text: strings.TrimSpace("started: " + s.Metric.Get("job") + " " + s.Metric.Get("instance")), Labels: ls})
		}
	}
	SortAnnotations(out)
	return out, nil
}

// spans turns the points of one series into [start, end] runs in Unix
// seconds; points more than one step apart start a new run.
func spans(ps []promql.FPoint, step time.Duration) [][2]float64 {
	var out [][2]float64
	gap := step.Milliseconds()
	for i, p := range ps {
		if i == 0 || p.T-ps[i-1].T > gap {
			out = append(out, [2]float64{float64(p.T) / 1000, float64(p.T) / 1000})
			continue
		}
		out[len(out)-1][1] = float64(p.T) / 1000
	}
	return out
}
