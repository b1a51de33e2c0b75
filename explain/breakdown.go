package explain

import (
	"context"
	"fmt"
	"math"
	"time"
)

// BreakdownNote is what the breakdown panel says under its chart.
const BreakdownNote = "Means add up, percentiles do not: the stack is of each phase's mean per request; each phase's P95 stands alone and the P95s do not sum to the total's."

// PhaseSeries is one phase over time: its mean per request and its P95,
// as [t, v] points, and both over the whole range.
type PhaseSeries struct {
	Name string   `json:"name"`
	Mean [][2]Num `json:"mean"`
	P95  [][2]Num `json:"p95"`
	// RangeMean and RangeP95 are over the whole range.
	RangeMean Num `json:"range_mean"`
	RangeP95  Num `json:"range_p95"`
}

// BreakdownReport is Breakdown's answer.
type BreakdownReport struct {
	Service string  `json:"service"`
	Engine  string  `json:"engine"`
	From    float64 `json:"from"`
	To      float64 `json:"to"`
	Step    float64 `json:"step"`
	Note    string  `json:"note"`
	// Phases in request order; Outside (the probes' time beyond the
	// server's) last when the service has probes.
	Phases  []PhaseSeries `json:"phases"`
	Outside *PhaseSeries  `json:"outside,omitempty"`
	// Total is the server's request time.
	Total   *PhaseSeries `json:"total,omitempty"`
	Missing []string     `json:"missing"`
}

// BreakdownOptions: the range, its step and the window of each point.
type BreakdownOptions struct {
	From, To time.Time
	Step     time.Duration
	// Rate is each point's window (default max(1 m, step)).
	Rate time.Duration
}

// Breakdown reads the service's phases over [From, To].
func Breakdown(ctx context.Context, q Querier, spec Spec, o BreakdownOptions) (*BreakdownReport, error) {
	if o.Step <= 0 {
		o.Step = max(15*time.Second, o.To.Sub(o.From)/240).Truncate(time.Second)
	}
	if o.Rate <= 0 {
		o.Rate = max(time.Minute, o.Step)
	}
	r := &BreakdownReport{Service: spec.Service, Engine: spec.Engine, From: unixSec(o.From), To: unixSec(o.To),
		Step: o.Step.Seconds(), Note: BreakdownNote, Phases: []PhaseSeries{}, Missing: append([]string{}, spec.Missing...)}
	if len(spec.Phases) == 0 {
		r.Missing = append(r.Missing, "phase metrics: "+spec.Engine+" exports none for this service")
	}
	whole := o.To.Sub(o.From)
	read := func(m Measure) (PhaseSeries, error) {
		ps := PhaseSeries{Name: m.Name, Mean: [][2]Num{}, P95: [][2]Num{}, RangeMean: Num(nan), RangeP95: Num(nan)}
		var err error
		if ps.Mean, err = series(ctx, q, fill(m.Mean, o.Rate), o); err != nil {
			return ps, fmt.Errorf("%s mean: %w", m.Name, err)
		}
		v, err := scalar(ctx, q, fill(m.Mean, whole), o.To)
		if err != nil {
			return ps, fmt.Errorf("%s mean: %w", m.Name, err)
		}
		ps.RangeMean = Num(v)
		if m.P95 != "" {
			if ps.P95, err = series(ctx, q, fill(m.P95, o.Rate), o); err != nil {
				return ps, fmt.Errorf("%s p95: %w", m.Name, err)
			}
			v, err := scalar(ctx, q, fill(m.P95, whole), o.To)
			if err != nil {
				return ps, fmt.Errorf("%s p95: %w", m.Name, err)
			}
			ps.RangeP95 = Num(v)
		}
		return ps, nil
	}
	for _, m := range spec.Phases {
		ps, err := read(m)
		if err != nil {
			return nil, err
		}
		r.Phases = append(r.Phases, ps)
	}
	if spec.Total != nil {
		ps, err := read(*spec.Total)
		if err != nil {
			return nil, err
		}
		r.Total = &ps
		if spec.Probe != "" {
			probe, err := read(Measure{Name: "probe", Mean: spec.Probe})
			if err != nil {
				return nil, err
			}
			out := PhaseSeries{Name: "outside the server", Mean: [][2]Num{}, P95: [][2]Num{}, RangeP95: Num(nan)}
			server := map[Num]Num{}
			for _, p := range ps.Mean {
				server[p[0]] = p[1]
			}
			for _, p := range probe.Mean {
				if s, ok := server[p[0]]; ok {
					out.Mean = append(out.Mean, [2]Num{p[0], Num(math.Max(0, float64(p[1]-s)))})
				}
			}
			out.RangeMean = Num(math.Max(0, float64(probe.RangeMean-ps.RangeMean)))
			r.Outside = &out
		}
	}
	return r, nil
}

// series runs a range query and returns its first series as [t, v].
func series(ctx context.Context, q Querier, expr string, o BreakdownOptions) ([][2]Num, error) {
	ser, err := q.Range(ctx, expr, o.From, o.To, o.Step)
	if err != nil {
		return nil, err
	}
	out := [][2]Num{}
	if len(ser) > 0 {
		for _, p := range ser[0].Points {
			out = append(out, [2]Num{Num(unixSec(p.T)), Num(p.V)})
		}
	}
	return out, nil
}
