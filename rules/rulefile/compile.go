package rulefile

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/aiserve/appliance/config"
)

// BreachingAnnotation is the annotation that lists the breaching instances
// of an instances rule, e.g. "10.0.0.1:8000, 10.0.0.2:8000".
const BreachingAnnotation = "breaching_instances"

// WarmingMetric is the series that is 1 for an instance in its warm-up.
const WarmingMetric = "appliance_instance_warming"

// Compiled is one Prometheus rule compiled from a rule with extensions,
// for `appliance check` and the API.
type Compiled struct {
	Group string
	Alert string
	// Severity is the rule's severity label as written ("" when it has
	// none and routes as alerting.default_severity).
	Severity string
	// Priority is the priority label the rule's alerts carry (P0, P1, P2).
	Priority string
	// Line is where the source rule starts.
	Line int
	// Source is the expression as written; Expr is the generated PromQL.
	Source, Expr string
	// Instances is the source rule's instances extension, or nil.
	Instances *Instances
	// Escalated is true for the rule that escalate_when_all added.
	Escalated bool
	// Warmup is the warm-up applied (0: none).
	Warmup time.Duration
}

// Compile returns the file as plain Prometheus rule groups, the extensions
// turned into PromQL, and what it generated for each alerting rule.
func (f *File) Compile() (*rulefmt.RuleGroups, []Compiled) {
	p := parser.NewParser(parser.Options{})
	out := &rulefmt.RuleGroups{}
	var info []Compiled
	for gi, g := range f.Groups.Groups {
		ng := g
		ng.Rules = nil
		gw := f.opts.Warmup
		if w := f.GroupWarmup[gi]; w != nil {
			gw = *w
		}
		for ri, r := range g.Rules {
			if r.Record != "" {
				ng.Rules = append(ng.Rules, r)
				continue
			}
			ext := f.Ext[gi][ri]
			w := gw
			if ext.Warmup != nil {
				w = *ext.Warmup
			}
			sev, _ := ruleSeverity(f.opts.Severities, r.Labels, g.Labels)
			var prio string
			r.Labels, prio = f.withPriority(r.Labels, sev)
			c := Compiled{Group: g.Name, Alert: r.Alert, Severity: sev, Priority: prio, Line: ext.Line, Source: r.Expr, Instances: ext.Instances, Warmup: w}
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				// Parse validated the expression; keep the rule as written.
				ng.Rules = append(ng.Rules, r)
				continue
			}
			if ext.Instances == nil {
				nr := r
				nr.Expr = holdWarming(expr, w)
				c.Expr = nr.Expr
				ng.Rules = append(ng.Rules, nr)
				info = append(info, c)
				continue
			}
			in := ext.Instances
			breach, list := instancesExprs(r.Expr, w)
			cond := instancesCond(in, breach)
			nr := r
			nr.Annotations = withBreaching(r.Annotations, list, in.By)
			nr.Expr = cond
			if ext.EscalateWhenAll != "" {
				nr.Expr = fmt.Sprintf("(%s) or (%s)", cond, instancesCond(&Instances{All: true, By: in.By}, breach))
			}
			c.Expr = nr.Expr
			ng.Rules = append(ng.Rules, nr)
			info = append(info, c)
			if ext.EscalateWhenAll != "" {
				er := nr
				er.Labels = maps.Clone(r.Labels)
				if er.Labels == nil {
					er.Labels = map[string]string{}
				}
				er.Labels["severity"] = ext.EscalateWhenAll
				er.Labels[config.PriorityLabel], _ = f.opts.Severities.Priority(ext.EscalateWhenAll)
				er.Expr = instancesCond(&Instances{All: true, By: in.By}, breach)
				// Rules of a group are evaluated in order: the escalated
				// rule goes first so that a reader of the group sees P0
				// before P1.
				ng.Rules = append(ng.Rules[:len(ng.Rules)-1], er, nr)
				ec := c
				ec.Severity, ec.Priority, ec.Expr, ec.Escalated = ext.EscalateWhenAll, er.Labels[config.PriorityLabel], er.Expr, true
				info = append(info[:len(info)-1], ec, c)
			}
		}
		out.Groups = append(out.Groups, ng)
	}
	return out, info
}

// withPriority returns the labels of an alerting rule with the priority
// label that routing reads, from its severity through the severity map,
// unless the rule sets one; and that priority.
func (f *File) withPriority(ls map[string]string, sev string) (map[string]string, string) {
	if p, ok := ls[config.PriorityLabel]; ok && f.opts.Severities.KeepsPriority(p) {
		return ls, p
	}
	p, ok := f.opts.Severities.Priority(sev)
	if !ok {
		// Parse refused it; keep the rule as written.
		return ls, ""
	}
	out := maps.Clone(ls)
	if out == nil {
		out = map[string]string{}
	}
	out[config.PriorityLabel] = p
	return out, p
}

// WarmingExpr is the PromQL for "instances in their warm-up of d": those
// whose process_start_time_seconds is less than d ago, and for targets
// that do not export it, those scraped successfully now after up was 0
// within d (so the warm-up counts from the last failed scrape, one scrape
// interval before the first successful one).
func WarmingExpr(d time.Duration) string {
	secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	return fmt.Sprintf("(time() - process_start_time_seconds < %s)"+
		" or on (instance) ((up == 1 and on (instance, job) min_over_time(up[%s]) == 0) unless on (instance) process_start_time_seconds)",
		secs, model.Duration(d))
}

// holdWarming makes an alerting expression drop the instances in warm-up.
func holdWarming(expr parser.Expr, w time.Duration) string {
	if w <= 0 || expr.Type() != parser.ValueTypeVector {
		return expr.String()
	}
	return fmt.Sprintf("(%s) unless on (instance) (%s)", expr.String(), WarmingExpr(w))
}

// instancesExprs returns the per-instance breach as 1 or 0 (0 for an
// instance in warm-up, which counts toward its group but never breaches),
// and the filter that lists the breaching instances.
func instancesExprs(src string, w time.Duration) (breach, list string) {
	p := parser.NewParser(parser.Options{})
	filter, _ := p.ParseExpr(src)
	list = holdWarming(filter, w)
	expr, _ := p.ParseExpr(src)
	be, err := comparison(expr)
	if err != nil {
		return src, list
	}
	be.ReturnBool = true
	breach = be.String()
	if w > 0 {
		breach = fmt.Sprintf("((%s) unless on (instance) (%s)) or ((%s) * 0)", breach, WarmingExpr(w), breach)
	}
	return breach, list
}

// instancesCond is the group's condition; its value is the number of
// breaching instances (min) or their share (ratio, all).
func instancesCond(in *Instances, breach string) string {
	without := "without (" + strings.Join(in.By, ", ") + ")"
	switch {
	case in.Min > 0:
		return fmt.Sprintf("sum %s (%s) >= %d", without, breach, in.Min)
	case in.All:
		return fmt.Sprintf("avg %s (%s) == 1", without, breach)
	default:
		return fmt.Sprintf("avg %s (%s) >= %s", without, breach, strconv.FormatFloat(in.Ratio, 'f', -1, 64))
	}
}

// withBreaching adds the annotation that lists the breaching instances of
// the alert's group: the instances the list query returns whose other
// labels equal the alert's.
func withBreaching(ann map[string]string, list string, by []string) map[string]string {
	if _, ok := ann[BreachingAnnotation]; ok {
		return ann
	}
	out := maps.Clone(ann)
	if out == nil {
		out = map[string]string{}
	}
	var skip, show []string
	for _, l := range by {
		skip = append(skip, fmt.Sprintf("(ne $k %q)", l))
		show = append(show, fmt.Sprintf("{{ index .Labels %q }}", l))
	}
	out[BreachingAnnotation] = `{{- $g := $labels -}}{{- $sep := "" -}}` +
		`{{- range query ` + strconv.Quote(list) + ` | sortByLabel ` + strconv.Quote(by[0]) + ` -}}` +
		`{{- $ok := true -}}` +
		`{{- range $k, $v := .Labels -}}{{- if and (ne $k "__name__") ` + strings.Join(skip, " ") + ` (ne (index $g $k) $v) -}}{{- $ok = false -}}{{- end -}}{{- end -}}` +
		`{{- if $ok -}}{{ $sep }}` + strings.Join(show, "/") + `{{- $sep = ", " -}}{{- end -}}` +
		`{{- end -}}`
	return out
}
