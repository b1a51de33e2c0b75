package thermal

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aiserve/appliance/explain"
)

// Thresholds of the hardware the overlay knows.
const (
	// PiThrottleCelsius: a Raspberry Pi's cpu-thermal throttles here.
	PiThrottleCelsius = 80
	// GPUThresholdCelsius: the hardware page's GPU temperature line.
	GPUThresholdCelsius = 85
)

// MaxTemperatures caps the temperature series drawn: the hottest ones.
const MaxTemperatures = 8

// Spec says what to read besides the temperatures.
type Spec struct {
	// Latency is the model's inference P95: Name for the legend, P95 a
	// template of $__window; nil for none.
	Latency *Latency
	// Frames is the per-frame histogram of a detection-style workload;
	// nil for none.
	Frames *Frames
}

// Latency is a P95 to overlay.
type Latency struct {
	Name string
	P95  string
}

// Frames is a histogram with one observation per frame.
type Frames struct {
	// Metric is the histogram's base name, Matchers its label matchers
	// without braces ("" for all of its series).
	Metric   string
	Matchers string
}

// Options: the range, its step and the window of each point.
type Options struct {
	From, To time.Time
	Step     time.Duration
	// Rate is each point's window (default max(1 m, step)).
	Rate time.Duration
}

// Series is one line: a name and [t, v] points.
type Series struct {
	Name   string           `json:"name"`
	Source string           `json:"source,omitempty"`
	Points [][2]explain.Num `json:"points"`
	// Max is the highest value in the range.
	Max explain.Num `json:"max"`
}

// Threshold is a temperature line.
type Threshold struct {
	Value float64 `json:"value"`
	Text  string  `json:"text"`
}

// Span is a time the hardware throttled, [From, To) in Unix seconds.
type Span struct {
	From   float64 `json:"from"`
	To     float64 `json:"to"`
	Source string  `json:"source"`
	Reason string  `json:"reason"`
}

// FramesReport is the detection-style panels' data.
type FramesReport struct {
	Metric string `json:"metric"`
	// Rate is frames per second; Jitter is P99 − P50 of the frame time
	// (seconds), with P50 and P99 themselves.
	Rate   Series `json:"rate"`
	Jitter Series `json:"jitter"`
	P50    Series `json:"p50"`
	P99    Series `json:"p99"`
}

// Report is Overlay's answer.
type Report struct {
	From         float64       `json:"from"`
	To           float64       `json:"to"`
	Step         float64       `json:"step"`
	Temperatures []Series      `json:"temperatures"`
	Thresholds   []Threshold   `json:"thresholds"`
	Throttle     []Span        `json:"throttle"`
	Latency      *Series       `json:"latency,omitempty"`
	Frames       *FramesReport `json:"frames,omitempty"`
	// Missing says what the box does not report, in words.
	Missing []string `json:"missing"`
}

// temperature sources: the query, the source's name and how a series is
// named from its labels.
var temperatures = []struct {
	source, expr string
	name         func(l map[string]string) string
}{
	{"gpu", "max by (instance, gpu) (DCGM_FI_DEV_GPU_TEMP)", func(l map[string]string) string { return "GPU " + l["gpu"] }},
	{"thermal_zone", "max by (instance, type) (node_thermal_zone_temp)", func(l map[string]string) string { return l["type"] }},
	{"hwmon", "max by (instance, chip) (node_hwmon_temp_celsius)", func(l map[string]string) string { return "hwmon " + l["chip"] }},
}

// throttles are the throttle flags read as spans: the reason is the
// label by, or the fixed reason. The DCGM exporter's clock-reasons
// bitmask (0x20 sw thermal, 0x40 hw thermal) counts only where the
// appliance's own readings name no reasons (they write the bitmask too).
var throttles = []struct{ source, expr, by, reason string }{
	{"vcgencmd", `max by (flag) (appliance_throttled{flag=~"throttled|soft_temp_limit|arm_frequency_capped"})`, "flag", ""},
	{"nvidia-smi", `max by (reason) (nvidia_smi_clocks_event_reason_active{reason=~"hw_thermal_slowdown|sw_thermal_slowdown|hw_slowdown"})`, "reason", ""},
	{"dcgm", `(max(floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 32) % 4) > bool 0) unless on () count(nvidia_smi_clocks_event_reason_active)`, "", "thermal_slowdown"},
}

// Overlay reads the temperatures, thresholds, throttle spans, the
// latency and the frames over [o.From, o.To].
func Overlay(ctx context.Context, q explain.Querier, spec Spec, o Options) (*Report, error) {
	if o.Step <= 0 {
		o.Step = max(15*time.Second, o.To.Sub(o.From)/240).Truncate(time.Second)
	}
	if o.Rate <= 0 {
		o.Rate = max(time.Minute, o.Step)
	}
	r := &Report{From: unixSec(o.From), To: unixSec(o.To), Step: o.Step.Seconds(), Temperatures: []Series{}, Thresholds: []Threshold{}, Throttle: []Span{}, Missing: []string{}}
	rng := func(expr string) ([]explain.Series, error) { return q.Range(ctx, expr, o.From, o.To, o.Step) }
	instances := map[string]bool{}
	var temps []Series
	var insts []string
	pi, gpu := false, false
	for _, src := range temperatures {
		ser, err := rng(src.expr)
		if err != nil {
			return nil, fmt.Errorf("temperature %s: %w", src.source, err)
		}
		for _, s := range ser {
			instances[s.Labels["instance"]] = true
			pi = pi || (src.source == "thermal_zone" && s.Labels["type"] == "cpu-thermal")
			gpu = gpu || src.source == "gpu"
			temps = append(temps, series(src.name(s.Labels), src.source, s.Points))
			insts = append(insts, s.Labels["instance"])
		}
	}
	if len(instances) > 1 {
		// Several boxes: each line says whose it is.
		for i := range temps {
			temps[i].Name = insts[i] + " " + temps[i].Name
		}
	}
	sort.SliceStable(temps, func(i, j int) bool { return temps[i].Max > temps[j].Max })
	if len(temps) > MaxTemperatures {
		temps = temps[:MaxTemperatures]
	}
	r.Temperatures = append(r.Temperatures, temps...)
	if len(temps) == 0 {
		r.Missing = append(r.Missing, "temperatures: no GPU (DCGM_FI_DEV_GPU_TEMP), thermal zone (node_thermal_zone_temp) or hwmon (node_hwmon_temp_celsius) readings in this range")
	}
	if pi {
		r.Thresholds = append(r.Thresholds, Threshold{PiThrottleCelsius, "cpu-thermal (Raspberry Pi) throttles at 80 °C"})
	}
	if gpu {
		r.Thresholds = append(r.Thresholds, Threshold{GPUThresholdCelsius, "GPU: 85 °C, near where data-centre GPUs slow down"})
	}

	step := o.Step.Seconds()
	for _, th := range throttles {
		ser, err := rng(th.expr)
		if err != nil {
			return nil, fmt.Errorf("throttle %s: %w", th.source, err)
		}
		for _, s := range ser {
			reason := th.reason
			if th.by != "" {
				reason = s.Labels[th.by]
			}
			r.Throttle = append(r.Throttle, spans(s.Points, step, th.source, reason)...)
		}
	}
	sort.SliceStable(r.Throttle, func(i, j int) bool { return r.Throttle[i].From < r.Throttle[j].From })

	win := strconv.FormatInt(max(1, int64(o.Rate/time.Second)), 10) + "s"
	fill := func(tpl string) string { return strings.ReplaceAll(tpl, "$__window", win) }
	if l := spec.Latency; l != nil && l.P95 != "" {
		ser, err := rng(fill(l.P95))
		if err != nil {
			return nil, fmt.Errorf("latency: %w", err)
		}
		s := Series{Name: l.Name, Points: [][2]explain.Num{}, Max: explain.Num(math.NaN())}
		if len(ser) > 0 {
			s = series(l.Name, "", ser[0].Points)
		}
		r.Latency = &s
	} else {
		r.Missing = append(r.Missing, "latency: no model service with a request-time histogram in this range (give metric=<histogram>)")
	}
	if f := spec.Frames; f != nil {
		fr, err := frames(ctx, q, f, o, win)
		if err != nil {
			return nil, err
		}
		r.Frames = fr
	}
	return r, nil
}

func frames(ctx context.Context, q explain.Querier, f *Frames, o Options, win string) (*FramesReport, error) {
	bucket := "sum by (le) (rate(" + f.Metric + "_bucket{" + f.Matchers + "}[" + win + "]))"
	read := func(name, expr string) (Series, error) {
		ser, err := q.Range(ctx, expr, o.From, o.To, o.Step)
		if err != nil {
			return Series{}, fmt.Errorf("frames %s: %w", name, err)
		}
		if len(ser) == 0 {
			return Series{Name: name, Points: [][2]explain.Num{}, Max: explain.Num(math.NaN())}, nil
		}
		return series(name, "", ser[0].Points), nil
	}
	fr := &FramesReport{Metric: f.Metric}
	var err error
	if fr.Rate, err = read("frames/s", "sum(rate("+f.Metric+"_count{"+f.Matchers+"}["+win+"]))"); err != nil {
		return nil, err
	}
	if fr.P50, err = read("P50", "histogram_quantile(0.5, "+bucket+")"); err != nil {
		return nil, err
	}
	if fr.P99, err = read("P99", "histogram_quantile(0.99, "+bucket+")"); err != nil {
		return nil, err
	}
	if fr.Jitter, err = read("jitter (P99 − P50)", "histogram_quantile(0.99, "+bucket+") - histogram_quantile(0.5, "+bucket+")"); err != nil {
		return nil, err
	}
	return fr, nil
}

// series turns points into a Series with their maximum.
func series(name, source string, pts []explain.Point) Series {
	s := Series{Name: name, Source: source, Points: make([][2]explain.Num, 0, len(pts)), Max: explain.Num(math.NaN())}
	hi := math.Inf(-1)
	for _, p := range pts {
		s.Points = append(s.Points, [2]explain.Num{explain.Num(unixSec(p.T)), explain.Num(p.V)})
		if !math.IsNaN(p.V) && p.V > hi {
			hi = p.V
		}
	}
	if !math.IsInf(hi, -1) {
		s.Max = explain.Num(hi)
	}
	return s
}

// spans turns a 0/1 series into [from, to) spans where it is above 0;
// a point stands for the step after it.
func spans(pts []explain.Point, step float64, source, reason string) []Span {
	var out []Span
	var cur *Span
	for i, p := range pts {
		t := unixSec(p.T)
		on := p.V > 0
		if on && cur != nil && i > 0 && t-unixSec(pts[i-1].T) > step*1.5 {
			out = append(out, *cur)
			cur = nil
		}
		switch {
		case on && cur == nil:
			cur = &Span{From: t, To: t + step, Source: source, Reason: reason}
		case on:
			cur.To = t + step
		case cur != nil:
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

func unixSec(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }
