package explain

import (
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aiserve/appliance/slo"
)

// Querier runs PromQL: an instant query at a time, a range query over
// [from, to] at step. It is the SLO report's Source, so that one adapter
// of the query engine (slo.EngineSource) serves both.
type Querier = slo.Source

// Sample is one element of an instant vector (or a scalar, without labels).
type Sample = slo.Sample

// Series is one element of a range matrix.
type Series = slo.Series

// Point is a value at a time.
type Point = slo.Point

// Spec says what to query for one service. Every template may use
// $__window (a PromQL duration); the caller has filled in everything else.
type Spec struct {
	// Service names the service in the answers ("vllm / llama-3.1-8b").
	Service string
	Engine  string
	// Total is the server's whole request time; nil when the engine
	// exports none.
	Total *Measure
	// Phases are the request's phases, in request order.
	Phases []Measure
	// Probe is a template of the mean end-to-end time the probes measure
	// ("" when the service has no probes); outside = probe - total.
	Probe string
	// Signals are the series read next to the phases, the engine's first.
	Signals []Signal
	// Version is a template of the series whose version labels
	// (VersionLabels) name what is deployed; "" for none.
	Version       string
	VersionLabels []string
	// Missing lists what the engine could export and storage lacks, in
	// words ("vllm:request_queue_time_seconds (queue)").
	Missing []string
}

// Measure is a time per request: its mean and (for histograms) its P95.
type Measure struct {
	Name string
	// Mean is a template of the mean time per request, in seconds.
	Mean string
	// P95 is a template of the 95th percentile in seconds; "" for
	// counters, which have no distribution.
	P95 string
}

// Signal is a series that may move with a phase.
type Signal struct {
	ID    string
	Title string
	// Unit: s, ratio (shown as %), percent, celsius, short, reqps.
	Unit string
	// Expr is a template of the signal's level over a window.
	Expr string
	// Chart is a plain expression of the signal for its chart link.
	Chart string
	// Floor is the smallest change that is not noise.
	Floor float64
	// Panel is the dashboard panel that charts it ("kv_cache" on the model
	// page, "hardware#gpu_temp" on another page), "" for none.
	Panel string
}

// Num is a float64 that encodes NaN and infinities as JSON null.
type Num float64

// MarshalJSON implements json.Marshaler.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// nan is the value of a measure that has no data.
var nan = math.NaN()

// fill replaces $__window by w, in whole seconds (at least 1 s).
func fill(tpl string, w time.Duration) string {
	sec := max(1, int64(w.Round(time.Second)/time.Second))
	return strings.ReplaceAll(tpl, "$__window", strconv.FormatInt(sec, 10)+"s")
}

// scalar runs an instant query whose answer is one number (the first
// sample's); NaN when it has none.
func scalar(ctx context.Context, q Querier, expr string, at time.Time) (float64, error) {
	if expr == "" {
		return nan, nil
	}
	v, err := q.Instant(ctx, expr, at)
	if err != nil {
		return nan, err
	}
	if len(v) == 0 {
		return nan, nil
	}
	return v[0].Value, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// unixSec is t in Unix seconds.
func unixSec(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }
