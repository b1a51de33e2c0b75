package rules

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/rules/rulefile"
)

const (
	// packPrefix marks an embedded pack among rule file names; the API
	// shows a pack's groups with the file "pack:vllm".
	packPrefix = "pack:"
	// generatedPrefix marks rules another part generated (Config.Generated):
	// the API shows the SLOs' groups with the file "generated:slo".
	generatedPrefix = "generated:"
	// warmupID is the built-in group that records appliance_instance_warming.
	warmupID = "appliance:warmup"
)

// loader is the rules manager's GroupLoader: it serves rule groups that
// Update parsed and compiled beforehand, so that every file is checked
// before any group is replaced.
type loader struct {
	parser parser.Parser

	mu  sync.Mutex
	cur *loaded
}

// loaded is one set of parsed and compiled sources.
type loaded struct {
	groups   map[string]*rulefmt.RuleGroups
	compiled map[string][]rulefile.Compiled
	order    []string
	// warmup is the longest warm-up of any rule: the window
	// appliance_instance_warming shows.
	warmup time.Duration
}

func newLoader() *loader {
	return &loader{parser: parser.NewParser(parser.Options{}), cur: &loaded{}}
}

// stage reads, parses and compiles every source with the defaults of an
// empty Config; it changes nothing.
func (l *loader) stage(ids []string) (*loaded, error) { return l.stageWith(ids, Config{}) }

// stageWith is stage with cfg's severity map and warm-up and the generated
// sources of cfg.Generated, by name.
func (l *loader) stageWith(ids []string, cfg Config) (*loaded, error) {
	generated := cfg.Generated
	sevs := cfg.Severities
	if sevs.Map == nil {
		sevs = config.AlertingConfig{}.Severities()
	}
	// Packs and generated rules (the SLOs') keep the default warm-up;
	// rule files get rules.warmup, none unless set, as in Prometheus.
	packOpts := rulefile.Options{Severities: sevs, Warmup: rulefile.DefaultWarmup}
	fileOpts := rulefile.Options{Severities: sevs, Warmup: cfg.Warmup}
	s := &loaded{groups: map[string]*rulefmt.RuleGroups{}, compiled: map[string][]rulefile.Compiled{}}
	var errs []error
	for _, id := range ids {
		data, err := readSource(id)
		if name, ok := strings.CutPrefix(id, generatedPrefix); ok {
			data, err = generated[name], nil
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		opts := fileOpts
		if strings.HasPrefix(id, packPrefix) || strings.HasPrefix(id, generatedPrefix) {
			opts = packOpts
		}
		f, ferrs := rulefile.ParseWith(data, opts)
		for _, e := range ferrs {
			var le *rulefile.Error
			if errors.As(e, &le) && le.Line > 0 {
				errs = append(errs, fmt.Errorf("%s:%d: %s", id, le.Line, le.Msg))
			} else {
				errs = append(errs, fmt.Errorf("%s: %w", id, e))
			}
		}
		if len(ferrs) > 0 {
			continue
		}
		rgs, info := f.Compile()
		for _, g := range rgs.Groups {
			for _, r := range g.Rules {
				if _, err := l.parser.ParseExpr(r.Expr); err != nil {
					errs = append(errs, fmt.Errorf("%s: group %q, rule %q: generated PromQL does not parse (please report this): %w", id, g.Name, r.Alert+r.Record, err))
				}
			}
		}
		for _, c := range info {
			s.warmup = max(s.warmup, c.Warmup)
		}
		s.groups[id], s.compiled[id] = rgs, info
		s.order = append(s.order, id)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if s.warmup == 0 {
		s.warmup = rulefile.DefaultWarmup
	}
	s.groups[warmupID] = warmupGroups(s.warmup)
	return s, nil
}

// swap makes s the served set and returns the previous one.
func (l *loader) swap(s *loaded) *loaded {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.cur
	l.cur = s
	return prev
}

// readSource returns the bytes of a rule file or an embedded pack.
func readSource(id string) ([]byte, error) {
	if name, ok := strings.CutPrefix(id, packPrefix); ok {
		data, err := packs.ReadFile("packs/" + name + ".yml")
		if err != nil {
			return nil, fmt.Errorf("rule pack %q is not in this build; known packs: %s", name, strings.Join(PackNames(), ", "))
		}
		return data, nil
	}
	data, err := os.ReadFile(id)
	if err != nil {
		return nil, fmt.Errorf("cannot read rule file: %w", err)
	}
	return data, nil
}

// warmupGroups is the built-in group that writes
// appliance_instance_warming{instance} = 1 while an instance warms up.
func warmupGroups(d time.Duration) *rulefmt.RuleGroups {
	return &rulefmt.RuleGroups{Groups: []rulefmt.RuleGroup{{
		Name: "appliance-warmup",
		Rules: []rulefmt.Rule{{
			Record: rulefile.WarmingMetric,
			Expr:   fmt.Sprintf("max by (instance) (%s) * 0 + 1", rulefile.WarmingExpr(d)),
		}},
	}}}
}

// Load implements rules.GroupLoader.
func (l *loader) Load(id string, _ bool, _ model.ValidationScheme) (*rulefmt.RuleGroups, []error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.cur.groups[id]
	if !ok {
		return nil, []error{fmt.Errorf("%s: rule source was not staged", id)}
	}
	return g, nil
}

// Parse implements rules.GroupLoader.
func (l *loader) Parse(q string) (parser.Expr, error) { return l.parser.ParseExpr(q) }

func (l *loader) allCompiled() []rulefile.Compiled {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []rulefile.Compiled
	for _, id := range l.cur.order {
		out = append(out, l.cur.compiled[id]...)
	}
	return out
}

// compiledFor returns the compiled rules of one source.
func (l *loader) compiledFor(id string) []rulefile.Compiled {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur.compiled[id]
}
