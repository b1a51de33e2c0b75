package rulefile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	yaml "go.yaml.in/yaml/v3"

	"github.com/aiserve/appliance/config"
)

// DefaultWarmup is the warm-up of a rule whose rule and group say none:
// long enough for a model server to load weights and fill its caches, the
// time in which its latency says nothing about its health.
const DefaultWarmup = 5 * time.Minute

// Severities are the priorities (the priority label), most urgent first.
var Severities = config.Priorities

// Options are what the configuration says about every rule file of a kind.
type Options struct {
	// Severities maps the severity label to the priority label
	// (alerting.severity_map and alerting.default_severity).
	Severities config.Severities
	// Warmup is the warm-up of the alerting rules whose rule and group
	// set none (0: none).
	Warmup time.Duration
}

// PackOptions are the options of the embedded packs and of Parse: the
// default severity map and DefaultWarmup.
func PackOptions() Options {
	return Options{Severities: config.AlertingConfig{}.Severities(), Warmup: DefaultWarmup}
}

// ruleSeverity is the severity of an alerting rule: the first of the
// severity labels its labels or, failing them, its group's have.
func ruleSeverity(s config.Severities, rule, group map[string]string) (string, bool) {
	return s.Of(func(l string) (string, bool) {
		if v, ok := rule[l]; ok {
			return v, true
		}
		v, ok := group[l]
		return v, ok
	})
}

// Error is an error in a rule file at a line (1-based; 0 when unknown).
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Instances is the `instances` extension of an alerting rule: exactly one
// of Min, Ratio and All is set.
type Instances struct {
	Min   int
	Ratio float64
	All   bool
	// By are the labels that identify an instance (default [instance]).
	By []string
}

// RuleExt are the extensions of one rule; the zero value means none.
type RuleExt struct {
	Instances       *Instances
	EscalateWhenAll string
	// Warmup is nil when the rule does not set it.
	Warmup *time.Duration
	// Line is where the rule starts.
	Line int
}

// File is a parsed rule file.
type File struct {
	// Groups are the groups as written, extension keys left out.
	Groups *rulefmt.RuleGroups
	// Ext holds the extensions of Groups.Groups[i].Rules[j] at [i][j].
	Ext [][]RuleExt
	// GroupWarmup holds each group's warmup, nil when unset.
	GroupWarmup []*time.Duration
	// Warnings are what is accepted but worth a word in `appliance
	// check`: an alerting rule without a severity.
	Warnings []*Error

	opts Options
}

var (
	groupKeys = []string{"name", "interval", "query_offset", "limit", "labels", "rules", "warmup"}
	ruleKeys  = []string{"record", "alert", "expr", "for", "keep_firing_for", "labels", "annotations", "instances", "escalate_when_all", "warmup"}
	instKeys  = []string{"min", "ratio", "all", "by"}
)

// Parse is ParseWith with PackOptions.
func Parse(data []byte) (*File, []error) { return ParseWith(data, PackOptions()) }

// ParseWith parses and validates a rule file. Errors of Prometheus' own checks
// are rulefmt's errors unchanged (a *rulefmt.Error or a YAML error) so a
// caller can place them as it places promtool's; every other error is an
// *Error with a line.
func ParseWith(data []byte, opts Options) (*File, []error) {
	p := parser.NewParser(parser.Options{})
	logger := slog.New(slog.DiscardHandler)
	root, err := parseNode(data)
	if err != nil {
		// Let rulefmt report the syntax error the way promtool does.
		_, errs := rulefmt.Parse(data, false, model.UTF8Validation, p, logger)
		if len(errs) == 0 {
			errs = []error{err}
		}
		return nil, errs
	}
	f := &File{opts: opts}
	if errs := f.walk(root); len(errs) > 0 {
		return nil, errs
	}
	rgs, errs := rulefmt.Parse(data, true, model.UTF8Validation, p, logger)
	if len(errs) > 0 {
		return nil, errs
	}
	f.Groups = rgs
	if len(f.Ext) != len(rgs.Groups) {
		return nil, []error{&Error{Msg: "internal: groups and their extensions disagree"}}
	}
	if errs := f.validate(root, p); len(errs) > 0 {
		return nil, errs
	}
	return f, nil
}

func parseNode(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func mapping(n *yaml.Node) []*yaml.Node {
	if n = deref(n); n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	return n.Content
}

func value(n *yaml.Node, key string) (k, v *yaml.Node) {
	c := mapping(n)
	for i := 0; i+1 < len(c); i += 2 {
		if c[i].Value == key {
			return c[i], deref(c[i+1])
		}
	}
	return nil, nil
}

// walk checks the keys of the file and reads the extensions.
func (f *File) walk(root *yaml.Node) []error {
	var errs []error
	errorf := func(line int, format string, args ...any) {
		errs = append(errs, &Error{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	unknown := func(n *yaml.Node, known []string) {
		c := mapping(n)
		for i := 0; i+1 < len(c); i += 2 {
			if !slices.Contains(known, c[i].Value) {
				errorf(c[i].Line, "unknown field %q", c[i].Value)
			}
		}
	}
	if root == nil {
		return nil
	}
	unknown(root, []string{"groups"})
	_, groups := value(root, "groups")
	if groups == nil || groups.Kind != yaml.SequenceNode {
		return errs
	}
	for _, g := range groups.Content {
		unknown(g, groupKeys)
		var gw *time.Duration
		if k, v := value(g, "warmup"); k != nil {
			d, err := model.ParseDuration(v.Value)
			if err != nil {
				errorf(v.Line, "warmup: %v", err)
			}
			gw = (*time.Duration)(&d)
		}
		f.GroupWarmup = append(f.GroupWarmup, gw)
		var exts []RuleExt
		_, rules := value(g, "rules")
		if rules != nil && rules.Kind == yaml.SequenceNode {
			for _, r := range rules.Content {
				r = deref(r)
				unknown(r, ruleKeys)
				ext := RuleExt{Line: r.Line}
				if k, v := value(r, "warmup"); k != nil {
					d, err := model.ParseDuration(v.Value)
					if err != nil {
						errorf(v.Line, "warmup: %v", err)
					}
					ext.Warmup = (*time.Duration)(&d)
				}
				if k, v := value(r, "escalate_when_all"); k != nil {
					ext.EscalateWhenAll = v.Value
				}
				if k, v := value(r, "instances"); k != nil {
					in, ierrs := parseInstances(k, v)
					errs = append(errs, ierrs...)
					ext.Instances = in
				}
				exts = append(exts, ext)
			}
		}
		f.Ext = append(f.Ext, exts)
	}
	return errs
}

func parseInstances(k, v *yaml.Node) (*Instances, []error) {
	var errs []error
	errorf := func(line int, format string, args ...any) {
		errs = append(errs, &Error{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	if v == nil || v.Kind != yaml.MappingNode {
		errorf(k.Line, "instances must be a mapping: {min: N}, {ratio: R} or {all: true}, with an optional by: [labels]")
		return nil, errs
	}
	in := &Instances{}
	set := 0
	c := v.Content
	for i := 0; i+1 < len(c); i += 2 {
		key, val := c[i], deref(c[i+1])
		switch key.Value {
		case "min":
			n, err := strconv.Atoi(val.Value)
			if err != nil || n < 1 {
				errorf(val.Line, "instances: min must be a whole number of at least 1, not %q", val.Value)
			}
			in.Min = n
			set++
		case "ratio":
			r, err := strconv.ParseFloat(val.Value, 64)
			if err != nil || r <= 0 || r > 1 {
				errorf(val.Line, "instances: ratio must be a number above 0 and at most 1, not %q", val.Value)
			}
			in.Ratio = r
			set++
		case "all":
			b, err := strconv.ParseBool(val.Value)
			if err != nil || !b {
				errorf(val.Line, "instances: all must be true, not %q", val.Value)
			}
			in.All = true
			set++
		case "by":
			if val.Kind != yaml.SequenceNode || len(val.Content) == 0 {
				errorf(val.Line, "instances: by must be a non-empty list of label names")
				continue
			}
			for _, l := range val.Content {
				// Legacy names only: they go into the generated PromQL's
				// grouping unquoted.
				if !model.LabelName(l.Value).IsValidLegacy() || l.Value == model.MetricNameLabel {
					errorf(l.Line, "instances: by: invalid label name %q; want letters, digits and underscores, not starting with a digit", l.Value)
				}
				in.By = append(in.By, l.Value)
			}
		default:
			errorf(key.Line, "unknown field %q in instances; want min, ratio, all or by", key.Value)
		}
	}
	if set != 1 {
		errorf(k.Line, "instances needs exactly one of min, ratio and all")
	}
	if len(in.By) == 0 {
		in.By = []string{"instance"}
	}
	return in, errs
}

// validate checks the extensions against the rules rulefmt accepted.
func (f *File) validate(root *yaml.Node, p parser.Parser) []error {
	var errs []error
	errorf := func(line int, format string, args ...any) {
		errs = append(errs, &Error{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	_, groups := value(root, "groups")
	for gi, g := range f.Groups.Groups {
		var rnodes []*yaml.Node
		if groups != nil && gi < len(groups.Content) {
			if _, rs := value(groups.Content[gi], "rules"); rs != nil {
				rnodes = rs.Content
			}
		}
		for ri, r := range g.Rules {
			ext := f.Ext[gi][ri]
			where := fmt.Sprintf("group %q, rule %d, %q", g.Name, ri+1, r.Alert+r.Record)
			line := func(key string) int {
				if ri < len(rnodes) {
					if k, _ := value(rnodes[ri], key); k != nil {
						return k.Line
					}
				}
				return ext.Line
			}
			if r.Record != "" {
				for _, key := range []string{"instances", "escalate_when_all", "warmup"} {
					if k := line(key); k != ext.Line {
						errorf(k, "%s: %s applies to alerting rules only", where, key)
					}
				}
				continue
			}
			sevs := f.opts.Severities
			sev, ok := ruleSeverity(sevs, r.Labels, g.Labels)
			prio, known := sevs.Priority(sev)
			switch {
			case !ok:
				f.Warnings = append(f.Warnings, &Error{Line: ext.Line, Msg: fmt.Sprintf("%s: the label severity is missing; the rule routes as alerting.default_severity %s", where, sevs.Default)})
			case !known:
				errorf(line("labels"), "%s: severity %q is not in alerting.severity_map; want one of %s", where, sev, strings.Join(sevs.Known(), ", "))
			}
			if p, set := r.Labels[config.PriorityLabel]; set && sevs.KeepsPriority(p) {
				if !slices.Contains(Severities, p) {
					errorf(line("labels"), "%s: priority %q: want P0, P1 or P2", where, p)
				}
				prio, known = p, true
			}
			if ext.Warmup != nil && *ext.Warmup < 0 {
				errorf(line("warmup"), "%s: warmup must not be negative", where)
			}
			if ext.EscalateWhenAll != "" {
				ep, eok := sevs.Priority(ext.EscalateWhenAll)
				switch {
				case !eok:
					errorf(line("escalate_when_all"), "%s: escalate_when_all %q is not in alerting.severity_map; want one of %s", where, ext.EscalateWhenAll, strings.Join(sevs.Known(), ", "))
				case ext.Instances == nil || ext.Instances.All:
					errorf(line("escalate_when_all"), "%s: escalate_when_all needs instances with min or ratio", where)
				case known && ep >= prio:
					errorf(line("escalate_when_all"), "%s: escalate_when_all %s must be more urgent than the rule's severity %s", where, ext.EscalateWhenAll, sev)
				}
			}
			if ext.Instances != nil {
				expr, err := p.ParseExpr(r.Expr)
				if err == nil {
					_, err = comparison(expr)
				}
				if err != nil {
					errorf(line("expr"), "%s: %v", where, err)
				}
			}
		}
	}
	return errs
}

// comparison returns the top-level comparison of an instances rule's
// expression, the per-instance condition.
func comparison(expr parser.Expr) (*parser.BinaryExpr, error) {
	for {
		pe, ok := expr.(*parser.ParenExpr)
		if !ok {
			break
		}
		expr = pe.Expr
	}
	be, ok := expr.(*parser.BinaryExpr)
	if !ok || !be.Op.IsComparisonOperator() || be.ReturnBool {
		return nil, errors.New("instances needs an expression that is a comparison without bool, such as `latency > 2`: it is evaluated per instance")
	}
	if be.LHS.Type() != parser.ValueTypeVector && be.RHS.Type() != parser.ValueTypeVector {
		return nil, errors.New("instances needs a comparison with a vector on one side")
	}
	return be, nil
}
