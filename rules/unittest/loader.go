package unittest

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	promrules "github.com/prometheus/prometheus/rules"
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/aiserve/appliance/rules/rulefile"
)

// source is a rule file (data nil: read from id) or an embedded pack.
type source struct {
	id   string
	data []byte
	// pack is set for an embedded pack, which is always compiled: the
	// appliance keeps the packs' warm-up on.
	pack bool
}

// groupLoader is the rules manager's GroupLoader: a rule file with the
// appliance's extensions is compiled as the appliance compiles it, a
// plain one is parsed as Prometheus parses it.
type groupLoader struct {
	parser  parser.Parser
	sources []source
	loaded  map[string]*rulefmt.RuleGroups
}

func newGroupLoader(p parser.Parser, sources []source) *groupLoader {
	return &groupLoader{parser: p, sources: sources, loaded: map[string]*rulefmt.RuleGroups{}}
}

func (l *groupLoader) ids() []string {
	out := make([]string, len(l.sources))
	for i, s := range l.sources {
		out[i] = s.id
	}
	return out
}

// groupKeys are the rules manager's keys of the loaded groups, in the
// order of the sources and of the groups in each.
func (l *groupLoader) groupKeys() []string {
	var out []string
	for _, s := range l.sources {
		if rgs := l.loaded[s.id]; rgs != nil {
			for _, g := range rgs.Groups {
				out = append(out, promrules.GroupKey(s.id, g.Name))
			}
		}
	}
	return out
}

// Load implements rules.GroupLoader.
func (l *groupLoader) Load(id string, ignoreUnknownFields bool, scheme model.ValidationScheme) (*rulefmt.RuleGroups, []error) {
	data, pack, err := l.read(id)
	if err != nil {
		return nil, []error{err}
	}
	var rgs *rulefmt.RuleGroups
	if pack || hasExtensions(data) {
		// As the appliance loads them: packs with their warm-up on, rule
		// files with none unless they set one (rules.warmup unset).
		opts := rulefile.PackOptions()
		if !pack {
			opts.Warmup = 0
		}
		f, errs := rulefile.ParseWith(data, opts)
		if len(errs) > 0 {
			return nil, prefixed(id, errs)
		}
		rgs, _ = f.Compile()
	} else {
		var errs []error
		rgs, errs = rulefmt.Parse(data, ignoreUnknownFields, scheme, l.parser, slog.New(slog.DiscardHandler))
		if len(errs) > 0 {
			return nil, prefixed(id, errs)
		}
	}
	l.loaded[id] = rgs
	return rgs, nil
}

// Parse implements rules.GroupLoader.
func (l *groupLoader) Parse(q string) (parser.Expr, error) { return l.parser.ParseExpr(q) }

func (l *groupLoader) read(id string) (data []byte, pack bool, err error) {
	for _, s := range l.sources {
		if s.id == id && s.data != nil {
			return s.data, s.pack, nil
		}
	}
	data, err = os.ReadFile(id)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", id, err)
	}
	return data, false, nil
}

func prefixed(id string, errs []error) []error {
	out := make([]error, len(errs))
	for i, e := range errs {
		var le *rulefile.Error
		if errors.As(e, &le) && le.Line > 0 {
			out[i] = fmt.Errorf("%s:%d: %s", id, le.Line, le.Msg)
		} else {
			out[i] = fmt.Errorf("%s: %w", id, e)
		}
	}
	return out
}

// Keys of the appliance's rule file extensions (package rulefile).
var (
	groupExtKeys = []string{"warmup"}
	ruleExtKeys  = []string{"instances", "escalate_when_all", "warmup"}
)

// hasExtensions reports whether a rule file uses any of the appliance's
// extensions. A file that does not parse counts as plain, so that
// Prometheus' parser reports its errors.
func hasExtensions(data []byte) bool {
	var doc yamlv3.Node
	if err := yamlv3.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil || len(doc.Content) == 0 {
		return false
	}
	groups := mapValue(doc.Content[0], "groups")
	if groups == nil || groups.Kind != yamlv3.SequenceNode {
		return false
	}
	for _, g := range groups.Content {
		if hasAnyKey(g, groupExtKeys) {
			return true
		}
		rs := mapValue(g, "rules")
		if rs == nil || rs.Kind != yamlv3.SequenceNode {
			continue
		}
		for _, r := range rs.Content {
			if hasAnyKey(r, ruleExtKeys) {
				return true
			}
		}
	}
	return false
}

func mapValue(n *yamlv3.Node, key string) *yamlv3.Node {
	if n == nil || n.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func hasAnyKey(n *yamlv3.Node, keys []string) bool {
	for _, k := range keys {
		if mapValue(n, k) != nil {
			return true
		}
	}
	return false
}
