package slo

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	promrules "github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/stretchr/testify/require"
	yaml2 "go.yaml.in/yaml/v2"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/query"
)

// Burn-rate tests from text fixtures in testdata/burnrate/*.test, in the
// format of the rules part's fixtures (rules/testdata, itself in the style
// of Prometheus' promqltest), with the rules generated from an slos block:
//
//	slos                        the slos section (YAML, indented)
//	  - name: chat ...
//	load 1m                     series, as promqltest loads them
//	  h_count 0+1000x240
//	interval 1m                 the groups' evaluation interval (default 1m)
//	eval 2h                     evaluate every group at each step up to 2h,
//	  firing A{l="v"}           then expect exactly these firing alerts,
//	  fired A{l="v"}            and exactly these fired at some step since
//	  fired none                the previous eval
//
// The generated groups run in Prometheus' own rule group, as in the
// appliance.
func TestBurnRateFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/burnrate/*.test")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".test"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			runBurnFixture(t, string(data))
		})
	}
}

type burnCmd struct {
	line int
	head string
	body []string
}

func splitBurnFixture(text string) []burnCmd {
	var cmds []burnCmd
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if l != "" && l[0] != ' ' && l[0] != '\t' {
			cmds = append(cmds, burnCmd{line: i + 1, head: strings.TrimSpace(l)})
			continue
		}
		if len(cmds) > 0 {
			cmds[len(cmds)-1].body = append(cmds[len(cmds)-1].body, l)
		}
	}
	return cmds
}

// staticLoader serves generated groups to Prometheus' manager.
type staticLoader struct {
	groups *rulefmt.RuleGroups
	p      parser.Parser
}

func (l staticLoader) Load(string, bool, model.ValidationScheme) (*rulefmt.RuleGroups, []error) {
	return l.groups, nil
}

func (l staticLoader) Parse(q string) (parser.Expr, error) { return l.p.ParseExpr(q) }

var burnAlertRE = regexp.MustCompile(`^(firing|fired) (\S+?\{.*?\}|\S+)$`)

func runBurnFixture(t *testing.T, text string) {
	cmds := splitBurnFixture(text)
	var (
		slos     []*config.SLOConfig
		load     strings.Builder
		interval = time.Minute
	)
	for _, c := range cmds {
		switch {
		case c.head == "slos":
			require.NoError(t, yaml2.UnmarshalStrict([]byte(dedentLines(c.body)), &slos), "line %d", c.line)
		case strings.HasPrefix(c.head, "load "):
			load.WriteString(c.head + "\n" + strings.Join(c.body, "\n") + "\n")
		case strings.HasPrefix(c.head, "interval "):
			d, err := model.ParseDuration(strings.TrimPrefix(c.head, "interval "))
			require.NoError(t, err)
			interval = time.Duration(d)
		}
	}
	require.NotEmpty(t, slos, "a fixture needs an slos block")
	// The rules write at every step from time 0 into a head that holds
	// days of loaded data already. Rules discard out-of-order samples,
	// so the head's in-order window (half its block range) must reach
	// back to time 0.
	st := promqltest.LoadedStorage(t, load.String(), func(o *tsdb.Options) {
		r := (16 * 24 * time.Hour).Milliseconds()
		o.MinBlockDuration, o.MaxBlockDuration = r, r
	})
	t.Cleanup(func() { _ = st.Close() })
	engine := query.New(query.Options{}, nil, nil)
	groups := Rules(slos, nil)
	m := promrules.NewManager(&promrules.ManagerOptions{
		QueryFunc:    promrules.EngineQueryFunc(engine, st),
		NotifyFunc:   func(context.Context, string, ...*promrules.Alert) {},
		Context:      context.Background(),
		AppendableV2: st,
		Queryable:    st,
		GroupLoader:  staticLoader{groups: &rulefmt.RuleGroups{Groups: groups}, p: parser.NewParser(parser.Options{})},
	})
	loaded, errs := m.LoadGroups(interval, labels.EmptyLabels(), "", nil, false, "slo")
	require.Empty(t, errs)
	require.Len(t, loaded, len(slos))
	var gs []*promrules.Group
	for _, g := range loaded {
		require.True(t, strings.HasPrefix(g.Name(), GroupPrefix), g.Name())
		gs = append(gs, g)
	}
	slices.SortFunc(gs, func(a, b *promrules.Group) int { return strings.Compare(a.Name(), b.Name()) })

	next := time.Unix(0, 0).UTC()
	ctx := context.Background()
	for _, c := range cmds {
		if !strings.HasPrefix(c.head, "eval ") {
			continue
		}
		d, err := model.ParseDuration(strings.TrimPrefix(c.head, "eval "))
		require.NoError(t, err, "line %d", c.line)
		at := time.Unix(0, 0).UTC().Add(time.Duration(d))
		fired := map[string]bool{}
		var firing []string
		for !next.After(at) {
			firing = nil
			for _, g := range gs {
				g.Eval(ctx, next)
				for _, r := range g.AlertingRules() {
					require.NoError(t, r.LastError(), "line %d: %s at %s", c.line, r.Name(), next)
					r.ForEachActiveAlert(func(a *promrules.Alert) {
						if a.State == promrules.StateFiring {
							firing = append(firing, a.Labels.String())
							fired[a.Labels.String()] = true
						}
					})
				}
				for _, r := range g.Rules() {
					require.NoError(t, r.LastError(), "line %d: %s at %s", c.line, r.Name(), next)
				}
			}
			next = next.Add(interval)
		}
		var wantFiring, wantFired []string
		for _, l := range c.body {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") || l == "fired none" {
				continue
			}
			mm := burnAlertRE.FindStringSubmatch(l)
			require.NotNil(t, mm, "line %d: cannot parse %q", c.line, l)
			if mm[1] == "firing" {
				wantFiring = append(wantFiring, burnAlertLabels(t, mm[2]))
			} else {
				wantFired = append(wantFired, burnAlertLabels(t, mm[2]))
			}
		}
		var gotFired []string
		for k := range fired {
			gotFired = append(gotFired, k)
		}
		slices.Sort(firing)
		slices.Sort(gotFired)
		slices.Sort(wantFiring)
		slices.Sort(wantFired)
		require.Equal(t, wantFiring, firing, "line %d: eval %s: firing", c.line, d)
		require.Equal(t, wantFired, gotFired, "line %d: eval %s: fired since the previous eval", c.line, d)
	}
}

func burnAlertLabels(t *testing.T, s string) string {
	t.Helper()
	m, err := parser.NewParser(parser.Options{}).ParseMetric(s)
	require.NoError(t, err, "alert %q", s)
	b := labels.NewBuilder(m)
	b.Set(labels.AlertName, m.Get(labels.MetricName))
	b.Del(labels.MetricName)
	return b.Labels().String()
}

func dedentLines(lines []string) string {
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	var b strings.Builder
	for _, l := range lines {
		if len(l) >= indent && indent > 0 {
			l = l[indent:]
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}
