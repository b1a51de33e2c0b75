package explain

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Quantiles are the quantiles Compare reports, as their names.
var Quantiles = []struct {
	Name string
	Q    float64
}{{"p50", 0.5}, {"p95", 0.95}, {"p99", 0.99}}

// Side is one distribution of a comparison: the series of Matchers over
// [From, To].
type Side struct {
	// Name labels the side in the answer ("model_version=v2").
	Name string
	// Matchers select the series, without braces (`model_version="v2"`);
	// "" for all of the histogram's series.
	Matchers string
	From, To time.Time
}

// Distribution is one side's answer: the CDF from the buckets and the
// quantiles, which are histogram_quantile's over the same buckets.
type Distribution struct {
	Name  string  `json:"name"`
	From  float64 `json:"from"`
	To    float64 `json:"to"`
	Count Num     `json:"count"`
	// CDF is [le, fraction of requests at or below le], +Inf left out.
	CDF       [][2]Num       `json:"cdf"`
	Quantiles map[string]Num `json:"quantiles"`
	// Expr is the bucket expression the quantiles come from.
	Expr string `json:"expr"`
}

// CompareReport is Compare's answer: A, B and the deltas B - A of each
// quantile (and B / A as ratio).
type CompareReport struct {
	Metric string            `json:"metric"`
	A      Distribution      `json:"a"`
	B      Distribution      `json:"b"`
	Deltas map[string]Num    `json:"deltas"`
	Ratios map[string]Num    `json:"ratios"`
	Text   map[string]string `json:"text"`
}

var metricRe = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// ErrBadMetric is returned for a histogram name that is no metric name.
var ErrBadMetric = errors.New("metric: want a histogram's base name, e.g. vllm:e2e_request_latency_seconds")

// Compare reads the distributions of histogram metric (its base name) on
// two sides.
func Compare(ctx context.Context, q Querier, metric string, a, b Side) (*CompareReport, error) {
	metric = strings.TrimSuffix(metric, "_bucket")
	if !metricRe.MatchString(metric) {
		return nil, ErrBadMetric
	}
	r := &CompareReport{Metric: metric, Deltas: map[string]Num{}, Ratios: map[string]Num{}, Text: map[string]string{}}
	var err error
	if r.A, err = distribution(ctx, q, metric, a); err != nil {
		return nil, fmt.Errorf("side a: %w", err)
	}
	if r.B, err = distribution(ctx, q, metric, b); err != nil {
		return nil, fmt.Errorf("side b: %w", err)
	}
	for _, qq := range Quantiles {
		x, y := float64(r.A.Quantiles[qq.Name]), float64(r.B.Quantiles[qq.Name])
		r.Deltas[qq.Name] = Num(y - x)
		r.Ratios[qq.Name] = Num(y / x)
		if finite(x) && finite(y) {
			sign := "+"
			if y < x {
				sign = "−"
			}
			r.Text[qq.Name] = fmt.Sprintf("%s %s → %s (%s%s, %s%.0f%%)", strings.ToUpper(qq.Name), FormatValue(x, "s"), FormatValue(y, "s"),
				sign, FormatValue(math.Abs(y-x), "s"), sign, math.Abs(100*(y/x-1)))
		}
	}
	return r, nil
}

func distribution(ctx context.Context, q Querier, metric string, s Side) (Distribution, error) {
	w := s.To.Sub(s.From)
	if w <= 0 {
		return Distribution{}, errors.New("the window's from must be before its to")
	}
	d := Distribution{Name: s.Name, From: unixSec(s.From), To: unixSec(s.To), CDF: [][2]Num{}, Quantiles: map[string]Num{}, Count: Num(nan)}
	buckets := "sum by (le) (increase(" + metric + "_bucket{" + s.Matchers + "}[" + strconv.FormatInt(int64(w.Seconds()), 10) + "s]))"
	d.Expr = buckets
	v, err := q.Instant(ctx, buckets, s.To)
	if err != nil {
		return d, err
	}
	type bucket struct{ le, n float64 }
	var bs []bucket
	for _, smp := range v {
		le, err := strconv.ParseFloat(smp.Labels["le"], 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, smp.Value})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) > 0 && math.IsInf(bs[len(bs)-1].le, 1) {
		total := bs[len(bs)-1].n
		d.Count = Num(total)
		if total > 0 {
			run := 0.0
			for _, b := range bs[:len(bs)-1] {
				// Buckets are cumulative; extrapolated increases may dip.
				run = math.Max(run, b.n)
				d.CDF = append(d.CDF, [2]Num{Num(b.le), Num(math.Min(1, run/total))})
			}
		}
	}
	for _, qq := range Quantiles {
		x, err := scalar(ctx, q, "histogram_quantile("+strconv.FormatFloat(qq.Q, 'f', -1, 64)+", "+buckets+")", s.To)
		if err != nil {
			return d, err
		}
		d.Quantiles[qq.Name] = Num(x)
	}
	return d, nil
}
