package dashboard

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/aiserve/appliance/explain"
)

// BreakdownDef is an engine's breakdown in engines.yaml: the request's
// phases, each a metric key, and the key of the server's whole time.
type BreakdownDef struct {
	// Kind is "histogram" (mean = rate(_sum)/rate(_count), P95 from the
	// buckets) or "counter" (cumulative time: mean = rate(time) /
	// rate(Count) × Scale).
	Kind   string     `yaml:"kind"`
	Total  string     `yaml:"total"`
	Count  string     `yaml:"count"`
	Scale  float64    `yaml:"scale"`
	Phases []PhaseDef `yaml:"phases"`
}

// PhaseDef is one phase: its name and its metric key.
type PhaseDef struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
}

// SignalDef is a signal explain reads (explain.Signal), with metric keys
// and the dashboards' placeholders in Expr and Chart.
type SignalDef struct {
	ID    string  `yaml:"id"`
	Title string  `yaml:"title"`
	Unit  string  `yaml:"unit"`
	Expr  string  `yaml:"expr"`
	Chart string  `yaml:"chart"`
	Floor float64 `yaml:"floor"`
	Panel string  `yaml:"panel"`
}

// VersionLabels are the labels whose values name what is deployed.
var VersionLabels = []string{"model_version", "version"}

// ExplainSpec is what package explain reads for service s (instance ""
// for all of its instances, or one of them): the engine's phases and
// signals with the metric names storage holds, and, in Missing, the
// phases storage lacks.
func (c *Catalog) ExplainSpec(inv *Inventory, s *Service, instance string) explain.Spec {
	svc := *s
	sel := s.Selector
	if instance != "" {
		svc.Instances = []string{instance}
		if sel != "" {
			sel += ","
		}
		sel += "instance=" + strconv.Quote(instance)
	}
	spec := explain.Spec{Service: s.ID(), Engine: s.Engine}
	if instance != "" {
		spec.Service += " @ " + instance
	}
	e := c.Engines.Engines[s.Engine]
	if e == nil {
		return spec
	}
	resolve := func(expr string) (string, bool) {
		return c.expr(strings.ReplaceAll(expr, "$sel", sel), inv, s.Engine, &svc, svc.Probes, false)
	}
	if bd := e.Breakdown; bd != nil {
		measure := func(name, key string) (*explain.Measure, string) {
			k := "{{" + key + "}}"
			switch bd.Kind {
			case "counter":
				scale := ""
				if bd.Scale != 0 && bd.Scale != 1 {
					scale = " * " + strconv.FormatFloat(bd.Scale, 'g', -1, 64)
				}
				mean, ok := resolve("sum(rate(" + k + "{$sel}[$__window])) / sum(rate({{" + bd.Count + "}}{$sel}[$__window]))" + scale)
				if !ok {
					return nil, c.missing(s.Engine, key, name)
				}
				return &explain.Measure{Name: name, Mean: mean}, ""
			default:
				mean, ok := resolve("sum(rate(" + k + "_sum{$sel}[$__window])) / sum(rate(" + k + "_count{$sel}[$__window]))")
				if !ok {
					return nil, c.missing(s.Engine, key, name)
				}
				p95, _ := resolve("histogram_quantile(0.95, sum by (le) (rate(" + k + "_bucket{$sel}[$__window])))")
				return &explain.Measure{Name: name, Mean: mean, P95: p95}, ""
			}
		}
		if m, miss := measure("server", bd.Total); m != nil {
			spec.Total = m
			suffix := "_count"
			if bd.Kind == "counter" {
				suffix = ""
			}
			spec.Version, _ = resolve("last_over_time({{" + bd.Total + "}}" + suffix + "{$sel}[$__window])")
			spec.VersionLabels = VersionLabels
		} else {
			spec.Missing = append(spec.Missing, miss)
		}
		for _, ph := range bd.Phases {
			if m, miss := measure(ph.Name, ph.Key); m != nil {
				spec.Phases = append(spec.Phases, *m)
			} else {
				spec.Missing = append(spec.Missing, miss)
			}
		}
	}
	if len(svc.Probes) > 0 {
		spec.Probe, _ = c.expr(`avg(avg_over_time({{probe.duration}}{$probes}[$__window]))`, inv, s.Engine, &svc, svc.Probes, false)
	}
	for _, list := range [][]SignalDef{e.Signals, c.Engines.Signals} {
		for _, sd := range list {
			expr, ok := resolve(sd.Expr)
			if !ok {
				continue
			}
			chart, _ := resolve(sd.Chart)
			spec.Signals = append(spec.Signals, explain.Signal{ID: sd.ID, Title: sd.Title, Unit: sd.Unit,
				Expr: expr, Chart: chart, Floor: sd.Floor, Panel: sd.Panel})
		}
	}
	return spec
}

// missing names a phase's metric that storage lacks: its first name (the
// newest version's) and the phase.
func (c *Catalog) missing(engine, key, phase string) string {
	names := c.Engines.Engines[engine].Metrics[key]
	if len(names) == 0 {
		return fmt.Sprintf("%s (no metric key %q for %s)", phase, key, engine)
	}
	return names[0] + " (" + phase + ")"
}

var placeholderRe = regexp.MustCompile(`\$[a-z_]+`)

// checkBreakdowns reports breakdown and signal keys that engines.yaml does
// not define, and placeholders other than the dashboards' and $__window.
func (c *Catalog) checkBreakdowns() []error {
	var errs []error
	known := map[string]bool{"$sel": true, "$instances": true, "$job": true, "$probes": true, "$__window": true}
	checkSignals := func(where, engine string, list []SignalDef) {
		for _, sd := range list {
			for _, expr := range []string{sd.Expr, sd.Chart} {
				if strings.TrimSpace(expr) == "" {
					errs = append(errs, fmt.Errorf("%s signal %s: empty expr or chart", where, sd.ID))
				}
				for _, m := range keyRe.FindAllStringSubmatch(expr, -1) {
					scope := ScopeService
					if engine == "" {
						scope = ScopeGlobal
					}
					if err := c.checkKey(scope, engine, m[1]); err != nil {
						errs = append(errs, fmt.Errorf("%s signal %s: %w", where, sd.ID, err))
					}
				}
				for _, p := range placeholderRe.FindAllString(strings.ReplaceAll(expr, "$__window", ""), -1) {
					if !known[p] {
						errs = append(errs, fmt.Errorf("%s signal %s: unknown placeholder %s", where, sd.ID, p))
					}
				}
			}
		}
	}
	for name, e := range c.Engines.Engines {
		if bd := e.Breakdown; bd != nil {
			if bd.Kind != "histogram" && bd.Kind != "counter" {
				errs = append(errs, fmt.Errorf("engine %s breakdown: kind %q: want histogram or counter", name, bd.Kind))
			}
			keys := []string{bd.Total}
			if bd.Kind == "counter" {
				keys = append(keys, bd.Count)
			}
			for _, ph := range bd.Phases {
				keys = append(keys, ph.Key)
			}
			for _, k := range keys {
				if e.Metrics[k] == nil {
					errs = append(errs, fmt.Errorf("engine %s breakdown: metric key %q is not defined", name, k))
				}
			}
		}
		checkSignals("engine "+name, name, e.Signals)
	}
	checkSignals("box", "", c.Engines.Signals)
	return errs
}
