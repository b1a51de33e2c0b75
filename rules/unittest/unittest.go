package unittest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	promrules "github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	yaml "go.yaml.in/yaml/v2"

	"github.com/aiserve/appliance/query"
)

// Options configure Run.
type Options struct {
	// Stdout and Stderr receive what promtool writes to its own.
	Stdout, Stderr io.Writer
	// Run, when set, runs only the test groups whose name it matches
	// (promtool's --run).
	Run *regexp.Regexp
	// Pack returns an embedded rule pack by name, for rule_packs; nil
	// refuses rule_packs.
	Pack func(name string) ([]byte, bool)
	// IgnoreUnknownFields accepts unknown fields in plain rule files
	// (promtool's --ignore-unknown-fields).
	IgnoreUnknownFields bool
}

// Run runs the tests of each file and returns promtool's exit status: 0
// when all passed, 1 when any failed or could not run.
func Run(opts Options, files ...string) int {
	failed := false
	for _, f := range files {
		fmt.Fprintf(opts.Stdout, "Processing test file: %s\n", f)
		if errs := runFile(opts, f); len(errs) > 0 {
			fmt.Fprintln(opts.Stderr, "  FAILED:")
			for _, e := range errs {
				fmt.Fprintln(opts.Stderr, e.Error())
				fmt.Fprintln(opts.Stdout)
			}
			failed = true
		} else {
			fmt.Fprintln(opts.Stdout, "  SUCCESS")
		}
		fmt.Fprintln(opts.Stdout)
	}
	if failed {
		return 1
	}
	return 0
}

// testFile is one test file.
type testFile struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval,omitempty"`
	GroupEvalOrder     []string       `yaml:"group_eval_order"`
	Tests              []testGroup    `yaml:"tests"`
	FuzzyCompare       bool           `yaml:"fuzzy_compare,omitempty"`
	// RulePacks is the appliance's extension: embedded packs by name.
	RulePacks []string `yaml:"rule_packs,omitempty"`
}

// testGroup is a set of input series and the tests run on them.
type testGroup struct {
	Interval        model.Duration `yaml:"interval"`
	InputSeries     []inputSeries  `yaml:"input_series"`
	AlertRuleTests  []alertTest    `yaml:"alert_rule_test,omitempty"`
	PromqlExprTests []exprTest     `yaml:"promql_expr_test,omitempty"`
	ExternalLabels  labels.Labels  `yaml:"external_labels,omitempty"`
	ExternalURL     string         `yaml:"external_url,omitempty"`
	Name            string         `yaml:"name,omitempty"`
	StartTimestamp  startTime      `yaml:"start_timestamp,omitempty"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTest struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []expAlert     `yaml:"exp_alerts"`
}

type expAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

type exprTest struct {
	Expr       string         `yaml:"expr"`
	EvalTime   model.Duration `yaml:"eval_time"`
	ExpSamples []expSample    `yaml:"exp_samples"`
}

type expSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
	// Histogram, when set, is a native histogram in the expanding
	// notation's {{...}} form, and Value is ignored.
	Histogram string `yaml:"histogram"`
}

// startTime is start_timestamp: RFC 3339 or Unix seconds.
type startTime struct{ time.Time }

func (t *startTime) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	parsed, err := parseTime(s)
	if err != nil {
		return err
	}
	t.Time = parsed
	return nil
}

func parseTime(s string) (time.Time, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

func runFile(opts Options, name string) []error {
	data, err := os.ReadFile(name)
	if err != nil {
		return []error{err}
	}
	var tf testFile
	if err := yaml.UnmarshalStrict(data, &tf); err != nil {
		return []error{err}
	}
	if tf.EvaluationInterval == 0 {
		tf.EvaluationInterval = model.Duration(time.Minute)
	}
	sources, err := ruleSources(opts, filepath.Dir(name), &tf)
	if err != nil {
		return []error{err}
	}
	order := map[string]int{}
	for i, g := range tf.GroupEvalOrder {
		if _, ok := order[g]; ok {
			return []error{fmt.Errorf("group name repeated in evaluation order: %s", g)}
		}
		order[g] = i
	}
	var errs []error
	for i, tg := range tf.Tests {
		if opts.Run != nil && !opts.Run.MatchString(tg.Name) {
			continue
		}
		if tg.Interval == 0 {
			tg.Interval = tf.EvaluationInterval
		}
		r := &groupRun{
			tg:       tg,
			name:     cmp.Or(tg.Name, fmt.Sprintf("unnamed#%d", i)),
			interval: time.Duration(tf.EvaluationInterval),
			order:    order,
			fuzzy:    tf.FuzzyCompare,
			sources:  sources,
			ignore:   opts.IgnoreUnknownFields,
		}
		errs = append(errs, r.run()...)
	}
	return errs
}

// ruleSources resolves rule_files against dir (with globs, as promtool
// does, warning for a pattern that matches nothing) and adds rule_packs.
func ruleSources(opts Options, dir string, tf *testFile) ([]source, error) {
	var out []source
	for _, pat := range tf.RuleFiles {
		if pat != "" && !filepath.IsAbs(pat) {
			pat = filepath.Join(dir, pat)
		}
		matches, err := filepath.Glob(pat)
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			fmt.Fprintln(opts.Stderr, "  WARNING: no file match pattern", pat)
		}
		for _, m := range matches {
			out = append(out, source{id: m})
		}
	}
	for _, p := range tf.RulePacks {
		if opts.Pack == nil {
			return nil, fmt.Errorf("rule_packs: %q: no embedded packs here", p)
		}
		data, ok := opts.Pack(p)
		if !ok {
			return nil, fmt.Errorf("rule_packs: %q is not an embedded pack", p)
		}
		out = append(out, source{id: "pack:" + p, data: data, pack: true})
	}
	return out, nil
}

// groupRun is one test group being run.
type groupRun struct {
	tg       testGroup
	name     string
	interval time.Duration
	order    map[string]int
	fuzzy    bool
	sources  []source
	ignore   bool
}

func (r *groupRun) run() (errs []error) {
	tg := r.tg
	// The appliance's engine with Prometheus' defaults; subqueries without
	// a step use the evaluation interval, as in promtool.
	engine := query.New(query.Options{SplitParallelism: 1}, nil, nil)
	defer engine.Close()
	engine.SetNoStepSubqueryInterval(r.interval)

	suite, err := promqltest.NewLazyLoader(r.loadCommand(), promqltest.LazyLoaderOpts{
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		StartTime:            tg.StartTimestamp.Time,
		Parser:               engine.Parser(),
	})
	if err != nil {
		return []error{err}
	}
	defer func() {
		if err := suite.Close(); err != nil {
			errs = append(errs, err)
		}
	}()
	suite.SubqueryInterval = r.interval

	loader := newGroupLoader(engine.Parser(), r.sources)
	m := promrules.NewManager(&promrules.ManagerOptions{
		QueryFunc:    promrules.EngineQueryFunc(engine, suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*promrules.Alert) {},
		Logger:       slog.New(slog.DiscardHandler),
		GroupLoader:  loader,
		Parser:       engine.Parser(),
	})
	groupsMap, lerrs := m.LoadGroups(time.Duration(tg.Interval), tg.ExternalLabels, tg.ExternalURL, nil, r.ignore, loader.ids()...)
	if len(lerrs) > 0 {
		return lerrs
	}
	groups := r.orderedGroups(groupsMap, loader)

	mint := time.Unix(0, 0).UTC()
	if !tg.StartTimestamp.IsZero() {
		mint = tg.StartTimestamp.Time
	}
	maxt := mint.Add(r.maxEvalTime())

	// The alert tests by eval_time, checked at the evaluation that covers
	// their time.
	byTime := map[model.Duration][]alertTest{}
	for _, a := range tg.AlertRuleTests {
		if a.Alertname == "" {
			in := ""
			if tg.Name != "" {
				in = fmt.Sprintf(" (in TestGroup %s)", tg.Name)
			}
			return []error{fmt.Errorf("an item under alert_rule_test misses required attribute alertname at eval_time %v%s", a.EvalTime, in)}
		}
		byTime[a.EvalTime] = append(byTime[a.EvalTime], a)
	}
	times := slices.Sorted(maps.Keys(byTime))
	next := 0

	for _, g := range groups {
		for _, rule := range g.Rules() {
			// As after a restore: the ALERTS series is written from the
			// first evaluation.
			if ar, ok := rule.(*promrules.AlertingRule); ok {
				ar.SetRestored(true)
			}
		}
	}

	for ts := mint; !ts.After(maxt); ts = ts.Add(r.interval) {
		var evalErrs []error
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, rule := range g.Rules() {
					if err := rule.LastError(); err != nil {
						evalErrs = append(evalErrs, fmt.Errorf("    rule: %s, time: %s, err: %w", rule.Name(), ts.Sub(time.Unix(0, 0).UTC()), err))
					}
				}
			}
		})
		errs = append(errs, evalErrs...)
		if len(evalErrs) > 0 {
			return errs
		}
		for next < len(times) && ts.Sub(mint) <= time.Duration(times[next]) && time.Duration(times[next]) < ts.Add(r.interval).Sub(mint) {
			errs = append(errs, r.checkAlerts(groups, byTime[times[next]])...)
			next++
		}
	}
	errs = append(errs, r.checkExprs(suite, engine, mint)...)
	return errs
}

// loadCommand is the input series as promqltest's load command.
func (r *groupRun) loadCommand() string {
	var b strings.Builder
	fmt.Fprintf(&b, "load %v\n", r.tg.Interval)
	for _, s := range r.tg.InputSeries {
		fmt.Fprintf(&b, "  %v %v\n", s.Series, s.Values)
	}
	return b.String()
}

// orderedGroups sorts the groups by group_eval_order (groups it does not
// name count as its first), otherwise in the order they were loaded.
func (r *groupRun) orderedGroups(m map[string]*promrules.Group, l *groupLoader) []*promrules.Group {
	var out []*promrules.Group
	for _, key := range l.groupKeys() {
		if g, ok := m[key]; ok {
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return r.order[out[i].Name()] < r.order[out[j].Name()] })
	return out
}

// maxEvalTime is the latest eval_time of any test.
func (r *groupRun) maxEvalTime() time.Duration {
	var d model.Duration
	for _, a := range r.tg.AlertRuleTests {
		d = max(d, a.EvalTime)
	}
	for _, e := range r.tg.PromqlExprTests {
		d = max(d, e.EvalTime)
	}
	return time.Duration(d)
}

// checkAlerts compares the firing alerts of the tests' alert names (across
// all groups) with the expected ones.
func (r *groupRun) checkAlerts(groups []*promrules.Group, tests []alertTest) []error {
	want := map[string]bool{}
	for _, t := range tests {
		want[t.Alertname] = true
	}
	got := map[string]alertList{}
	for _, g := range groups {
		for _, rule := range g.Rules() {
			ar, ok := rule.(*promrules.AlertingRule)
			if !ok || !want[ar.Name()] {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				if a.State == promrules.StateFiring {
					got[ar.Name()] = append(got[ar.Name()], alertItem{Labels: a.Labels.Copy(), Annotations: a.Annotations.Copy()})
				}
			}
		}
	}
	var errs []error
	for _, t := range tests {
		var exp alertList
		for _, a := range t.ExpAlerts {
			lm := map[string]string{}
			for k, v := range a.ExpLabels {
				lm[k] = v
			}
			lm[labels.AlertName] = t.Alertname
			exp = append(exp, alertItem{Labels: labels.FromMap(lm), Annotations: labels.FromMap(a.ExpAnnotations)})
		}
		g := got[t.Alertname]
		exp.sort()
		g.sort()
		if !exp.equal(g) {
			name := ""
			if r.tg.Name != "" {
				name = fmt.Sprintf("    name: %s,\n", r.tg.Name)
			}
			errs = append(errs, fmt.Errorf("%s    alertname: %s, time: %s, \n        exp:%v, \n        got:%v",
				name, t.Alertname, t.EvalTime.String(), indent(exp.String(), "            "), indent(g.String(), "            ")))
		}
	}
	return errs
}

// checkExprs runs the promql_expr_test queries on the loaded data.
func (r *groupRun) checkExprs(suite *promqltest.LazyLoader, engine *query.Engine, mint time.Time) []error {
	var errs []error
	p := engine.Parser()
tests:
	for _, t := range r.tg.PromqlExprTests {
		got, err := instant(suite.Context(), engine, suite.Queryable(), t.Expr, mint.Add(time.Duration(t.EvalTime)))
		if err != nil {
			errs = append(errs, fmt.Errorf("    expr: %q, time: %s, err: %s", t.Expr, t.EvalTime.String(), err.Error()))
			continue
		}
		var gotS sampleList
		for _, s := range got {
			gotS = append(gotS, sampleItem{Labels: s.Metric.Copy(), Value: s.F, Histogram: promqltest.HistogramTestExpression(s.H)})
		}
		var expS sampleList
		for _, s := range t.ExpSamples {
			lb, err := p.ParseMetric(s.Labels)
			hist := ""
			if err == nil && s.Histogram != "" {
				_, vals, perr := p.ParseSeriesDesc("{} " + s.Histogram)
				switch {
				case perr != nil:
					err = perr
				case len(vals) != 1:
					err = fmt.Errorf("expected 1 value, got %d", len(vals))
				case vals[0].Histogram == nil:
					err = fmt.Errorf("expected histogram, got %v", vals[0])
				default:
					hist = promqltest.HistogramTestExpression(vals[0].Histogram)
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("    expr: %q, time: %s, err: %w", t.Expr, t.EvalTime.String(), fmt.Errorf("labels %q: %w", s.Labels, err)))
				continue tests
			}
			expS = append(expS, sampleItem{Labels: lb, Value: s.Value, Histogram: hist})
		}
		expS.sort()
		gotS.sort()
		if !expS.equal(gotS, r.fuzzy) {
			errs = append(errs, fmt.Errorf("    expr: %q, time: %s,\n        exp: %v\n        got: %v", t.Expr, t.EvalTime.String(), expS, gotS))
		}
	}
	return errs
}

// instant evaluates an instant query; a scalar is a sample without labels.
func instant(ctx context.Context, engine *query.Engine, q storage.Queryable, qs string, ts time.Time) (promql.Vector, error) {
	qry, err := engine.NewInstantQuery(ctx, q, nil, qs, ts)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		// The engine reuses the result's memory once the query is closed.
		out := make(promql.Vector, len(v))
		for i, s := range v {
			out[i] = s
			out[i].Metric = s.Metric.Copy()
			if s.H != nil {
				out[i].H = s.H.Copy()
			}
		}
		return out, nil
	case promql.Scalar:
		return promql.Vector{{T: v.T, F: v.V, Metric: labels.EmptyLabels()}}, nil
	}
	return nil, errors.New("rule result is not a vector or scalar")
}

func indent(s, prefix string) string {
	return strings.ReplaceAll(s, "\n", "\n"+prefix)
}
