package rules

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	promrules "github.com/prometheus/prometheus/rules"
	promstorage "github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/storage"
)

// Rule tests from text fixtures in testdata/*.test, in the style of
// Prometheus' promqltest:
//
//	load 1m                     series loaded before anything runs
//	  metric{a="b"} 0+1x10
//	rules                       the rule file (YAML, indented)
//	  groups: ...
//	packs vllm gpu              embedded packs to load too
//	eval 5m                     evaluate every group at each of its steps up
//	  pending A{l="v"}          to 5m, then expect exactly these pending and
//	  firing A{l="v"} k="text"  firing alerts (with these annotations), these
//	  resolved A{l="v"}         resolved ones among the kept resolved alerts,
//	  sent firing A{l="v"}      and, when any "sent" line is given, exactly
//	  sent none                 these notifications since the last eval
//	restart [down 3m]           a new manager over the same storage, as after
//	                            a restart; the next step is 3m after the last
//
// As in Prometheus' group loop, a (re)started group restores its 'for'
// state from ALERTS_FOR_STATE after its second evaluation. Values of
// process_start_time_seconds (loaded) and ALERTS_FOR_STATE (expected) are
// seconds since the fixture's time 0, which is the epoch in Prometheus'
// TSDB and an hour ago in the raw tier.

func TestRuleFixtures(t *testing.T) {
	forEachFixture(t, promTSDB)
}

// TestRuleFixturesOnRawStorage runs the same fixtures over the
// appliance's raw tier (VictoriaMetrics), the storage rules read and write
// in the appliance, starting an hour ago as its retention requires.
func TestRuleFixturesOnRawStorage(t *testing.T) {
	forEachFixture(t, rawTier)
}

func forEachFixture(t *testing.T, backend func(*testing.T, []fixtureCmd) fixtureStore) {
	files, err := filepath.Glob("testdata/*.test")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".test"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			runFixture(t, string(data), backend)
		})
	}
}

// fixtureStore is where a fixture's series live and its rules write.
type fixtureStore struct {
	q   promstorage.Queryable
	app promstorage.AppendableV2
	// flush makes what was appended visible to queries.
	flush func()
	// base is the fixture's time 0. process_start_time_seconds loaded and
	// ALERTS_FOR_STATE expected are seconds since base.
	base time.Time
}

// promTSDB loads the fixture with promqltest into Prometheus' TSDB, at
// time 0 as promqltest does.
func promTSDB(t *testing.T, cmds []fixtureCmd) fixtureStore {
	var load strings.Builder
	for _, c := range cmds {
		if strings.HasPrefix(c.head, "load ") {
			load.WriteString(c.head + "\n" + strings.Join(c.body, "\n") + "\n")
		}
	}
	st := promqltest.LoadedStorage(t, load.String())
	t.Cleanup(func() { _ = st.Close() })
	return fixtureStore{q: st, app: st, flush: func() {}, base: time.Unix(0, 0).UTC()}
}

// rawTier loads the fixture into the appliance's storage.
func rawTier(t *testing.T, cmds []fixtureCmd) fixtureStore {
	opts := storage.DefaultOptions()
	opts.Path = t.TempDir()
	db, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	base := time.Now().Add(-time.Hour).Truncate(time.Minute).UTC()
	p := parser.NewParser(parser.Options{})
	app := db.AppenderV2(context.Background())
	for _, c := range cmds {
		step, ok := strings.CutPrefix(c.head, "load ")
		if !ok {
			continue
		}
		d, err := model.ParseDuration(step)
		require.NoError(t, err, "line %d", c.line)
		for _, l := range c.body {
			if strings.TrimSpace(l) == "" {
				continue
			}
			ls, vals, err := p.ParseSeriesDesc(l)
			require.NoError(t, err, "line %d: %s", c.line, l)
			shift := 0.0
			if ls.Get(labels.MetricName) == "process_start_time_seconds" {
				shift = float64(base.Unix())
			}
			for i, v := range vals {
				if v.Omitted {
					continue
				}
				ts := base.Add(time.Duration(i) * time.Duration(d)).UnixMilli()
				val := v.Value
				if shift != 0 {
					// Only then: arithmetic on the staleness marker, a
					// signalling NaN, would turn it into a plain NaN.
					val += shift
				}
				_, err := app.Append(0, ls, 0, ts, val, nil, nil, promstorage.AOptions{})
				require.NoError(t, err)
			}
		}
	}
	require.NoError(t, app.Commit())
	db.Flush()
	return fixtureStore{q: db.Raw(), app: db, flush: db.Flush, base: base}
}

type fixtureCmd struct {
	line int
	head string
	body []string
}

func splitFixture(text string) []fixtureCmd {
	var cmds []fixtureCmd
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if l != "" && l[0] != ' ' && l[0] != '\t' {
			cmds = append(cmds, fixtureCmd{line: i + 1, head: strings.TrimSpace(l)})
			continue
		}
		if len(cmds) > 0 {
			cmds[len(cmds)-1].body = append(cmds[len(cmds)-1].body, l)
		}
	}
	return cmds
}

// recorder is a Notifier that keeps what it was sent.
type recorder struct {
	mu   sync.Mutex
	now  time.Time // the evaluation time, for EndsAt
	sent []string
}

func (r *recorder) Send(alerts ...*notifier.Alert) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range alerts {
		state := "firing"
		if a.ResolvedAt(r.now) {
			state = "resolved"
		}
		r.sent = append(r.sent, state+" "+a.Labels.String())
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sent
	r.sent = nil
	slices.Sort(s)
	return s
}

// fixtureGroup is a group stepped by the test instead of its own loop.
type fixtureGroup struct {
	g     *promrules.Group
	next  time.Time
	evals int
}

type fixture struct {
	t        *testing.T
	store    fixtureStore
	engine   *query.Engine
	rec      *recorder
	ruleFile string
	packs    []string
	groups   []*fixtureGroup
	last     time.Time
}

func runFixture(t *testing.T, text string, backend func(*testing.T, []fixtureCmd) fixtureStore) {
	cmds := splitFixture(text)
	f := &fixture{t: t, rec: &recorder{}, engine: query.New(query.Options{}, nil, nil)}
	for _, c := range cmds {
		switch {
		case strings.HasPrefix(c.head, "packs "):
			f.packs = strings.Fields(strings.TrimPrefix(c.head, "packs "))
		case c.head == "rules":
			f.ruleFile = filepath.Join(t.TempDir(), "rules.yml")
			require.NoError(t, os.WriteFile(f.ruleFile, []byte(dedent(c.body)), 0o644))
		}
	}
	f.store = backend(t, cmds)
	require.True(t, f.ruleFile != "" || len(f.packs) > 0, "a fixture needs a rules block or packs")
	f.start(0)
	for _, c := range cmds {
		switch {
		case strings.HasPrefix(c.head, "eval "):
			f.eval(c)
		case strings.HasPrefix(c.head, "restart"):
			down := time.Duration(0)
			if rest, ok := strings.CutPrefix(c.head, "restart down "); ok {
				d, err := model.ParseDuration(rest)
				require.NoError(t, err, "line %d", c.line)
				down = time.Duration(d)
			}
			f.start(down)
		}
	}
}

func dedent(lines []string) string {
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

// start builds a new manager over the storage, as the appliance does when
// it starts; down is how long it was stopped.
func (f *fixture) start(down time.Duration) {
	t := f.t
	m := New(Options{
		Queryable:  f.store.q,
		Appendable: f.store.app,
		Engine:     f.engine,
		Notifier:   f.rec,
		// Only transitions are sent within a fixture.
		ResendDelay: 24 * time.Hour,
	})
	var files []string
	if f.ruleFile != "" {
		files = append(files, f.ruleFile)
	}
	ids, err := sources(files, f.packs)
	require.NoError(t, err)
	staged, err := m.loader.stage(ids)
	require.NoError(t, err)
	m.loader.swap(staged)
	groups, errs := m.m.LoadGroups(time.Minute, labels.EmptyLabels(), "", nil, false, append(ids, warmupID)...)
	require.Empty(t, errs)
	var prev []*fixtureGroup
	prev, f.groups = f.groups, nil
	for _, g := range groups {
		fg := &fixtureGroup{g: g}
		if len(prev) == 0 {
			fg.next = f.store.base
		} else {
			fg.next = f.last.Add(max(down, g.Interval()))
		}
		f.groups = append(f.groups, fg)
	}
	slices.SortFunc(f.groups, func(a, b *fixtureGroup) int { return strings.Compare(a.g.Name(), b.g.Name()) })
}

var (
	alertLineRE = regexp.MustCompile(`^(sent )?(pending|firing|resolved) (\S+?\{.*?\}|\S+)\s*(.*)$`)
	annRE       = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
)

func (f *fixture) eval(c fixtureCmd) {
	t := f.t
	d, err := model.ParseDuration(strings.TrimPrefix(c.head, "eval "))
	require.NoError(t, err, "line %d", c.line)
	at := f.store.base.Add(time.Duration(d))
	ctx := context.Background()
	for _, fg := range f.groups {
		for !fg.next.After(at) {
			f.rec.mu.Lock()
			f.rec.now = fg.next
			f.rec.mu.Unlock()
			fg.g.Eval(ctx, fg.next)
			f.store.flush()
			fg.evals++
			if fg.evals == 2 {
				fg.g.RestoreForState(fg.next)
			}
			f.last = fg.next
			fg.next = fg.next.Add(fg.g.Interval())
		}
	}
	f.last = at

	var wantActive, wantResolved, wantSent []string
	wantAnn := map[string]map[string]string{}
	checkSent := false
	for _, l := range c.body {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if l == "sent none" {
			checkSent = true
			continue
		}
		if q, ok := strings.CutPrefix(l, "series "); ok {
			f.expectSeries(c, at, q)
			continue
		}
		m := alertLineRE.FindStringSubmatch(l)
		require.NotNil(t, m, "line %d: cannot parse %q", c.line, l)
		lbls := alertLabels(t, m[3])
		key := m[2] + " " + lbls
		switch {
		case m[1] != "":
			checkSent = true
			wantSent = append(wantSent, key)
		case m[2] == "resolved":
			wantResolved = append(wantResolved, lbls)
		default:
			wantActive = append(wantActive, key)
		}
		if m[4] != "" {
			ann := map[string]string{}
			for _, a := range annRE.FindAllStringSubmatch(m[4], -1) {
				ann[a[1]] = strings.ReplaceAll(a[2], `\"`, `"`)
			}
			wantAnn[lbls] = ann
		}
	}
	var gotActive []string
	gotResolved := map[string]bool{}
	gotAnn := map[string]labels.Labels{}
	for _, fg := range f.groups {
		for _, r := range fg.g.AlertingRules() {
			r.ForEachActiveAlert(func(a *promrules.Alert) {
				switch a.State {
				case promrules.StatePending, promrules.StateFiring:
					gotActive = append(gotActive, a.State.String()+" "+a.Labels.String())
				default:
					gotResolved[a.Labels.String()] = true
				}
				gotAnn[a.Labels.String()] = a.Annotations
			})
			require.NoError(t, r.LastError(), "line %d: rule %s", c.line, r.Name())
		}
	}
	slices.Sort(gotActive)
	slices.Sort(wantActive)
	require.Equal(t, wantActive, gotActive, "line %d: eval %s: pending and firing alerts", c.line, d)
	for _, r := range wantResolved {
		require.True(t, gotResolved[r], "line %d: eval %s: want %s resolved", c.line, d, r)
	}
	for lbls, want := range wantAnn {
		got, ok := gotAnn[lbls]
		require.True(t, ok, "line %d: no alert %s", c.line, lbls)
		for k, v := range want {
			require.Equal(t, v, got.Get(k), "line %d: eval %s: annotation %s of %s", c.line, d, k, lbls)
		}
	}
	sent := f.rec.take()
	if checkSent {
		slices.Sort(wantSent)
		require.Equal(t, wantSent, sent, "line %d: eval %s: notifications", c.line, d)
	}
}

// expectSeries checks `series sel [value]`: the instant query sel at ts
// returns one sample of that value, or nothing when no value is given.
func (f *fixture) expectSeries(c fixtureCmd, ts time.Time, spec string) {
	t := f.t
	sel, want := strings.TrimSpace(spec), ""
	if i := strings.LastIndex(sel, "}"); i >= 0 {
		sel, want = sel[:i+1], strings.TrimSpace(sel[i+1:])
	} else if i := strings.IndexByte(sel, ' '); i >= 0 {
		sel, want = sel[:i], strings.TrimSpace(sel[i+1:])
	}
	vec, err := promrules.EngineQueryFunc(f.engine, f.store.q)(context.Background(), sel, ts)
	require.NoError(t, err, "line %d: %s", c.line, sel)
	if want == "" {
		require.Empty(t, vec, "line %d: %s", c.line, sel)
		return
	}
	require.Len(t, vec, 1, "line %d: %s: %v", c.line, sel, vec)
	got := vec[0].F
	if strings.HasPrefix(sel, "ALERTS_FOR_STATE") {
		got -= float64(f.store.base.Unix())
	}
	require.Equal(t, want, fmt.Sprint(got), "line %d: %s", c.line, sel)
}

// alertLabels turns `Name{a="b"}` into the alert's label set string.
func alertLabels(t *testing.T, s string) string {
	t.Helper()
	m, err := parser.NewParser(parser.Options{}).ParseMetric(s)
	require.NoError(t, err, "alert %q", s)
	b := labels.NewBuilder(m)
	b.Set(labels.AlertName, m.Get(labels.MetricName))
	b.Del(labels.MetricName)
	return b.Labels().String()
}
