package rules

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/notifier"
	"github.com/prometheus/prometheus/promql"
	promrules "github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/rules/rulefile"
)

// Notifier receives the alerts the rules raise: firing ones (EndsAt in the
// future, about four evaluation intervals ahead, renewed while they fire)
// and resolved ones (EndsAt when they resolved). Send is called from the
// rule groups' goroutines, possibly at once from several; it must not
// block on the network and may keep the alerts it is given.
//
// It is the interface of Prometheus' notifier.Manager and rules.Sender,
// so the notify part takes []*notifier.Alert as Alertmanager's clients do.
type Notifier interface {
	Send(alerts ...*notifier.Alert)
}

// Options configure a Manager. Queryable and Appendable must be the raw
// tier: rules need every sample of their windows, and write recording
// rules, ALERTS and ALERTS_FOR_STATE like scraped data. Appendable is
// Prometheus' AppendableV2, the interface its rules manager appends with.
// Zero durations take DefaultOptions' values.
type Options struct {
	Queryable  storage.Queryable
	Appendable storage.AppendableV2
	Engine     promql.QueryEngine
	// Notifier receives the alerts; nil logs them.
	Notifier   Notifier
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// ExternalURL is the appliance's URL, used in alerts' generator links
	// and in templates as $externalURL.
	ExternalURL *url.URL
	// OutageTolerance is how long the appliance may be down for alerts to
	// be restored from ALERTS_FOR_STATE.
	OutageTolerance time.Duration
	// ForGracePeriod is the least time an alert restored while pending
	// waits before firing.
	ForGracePeriod time.Duration
	// ResendDelay is how often a firing alert is sent again.
	ResendDelay time.Duration
}

// DefaultOptions returns Prometheus' defaults (its flags
// rules.alert.for-outage-tolerance and resend-delay) except for
// ForGracePeriod: Prometheus' 10m would make every alert pending with a
// `for` under about 10m start its `for` over after a restart, where the
// appliance promises that it keeps the time it had served. The appliance
// restarts in seconds and scrapes again within an interval, so a minute is
// enough for the data an alert needs to come back.
func DefaultOptions() Options {
	return Options{
		OutageTolerance: time.Hour,
		ForGracePeriod:  time.Minute,
		ResendDelay:     time.Minute,
	}
}

// Config is what the manager evaluates.
type Config struct {
	// Interval is the evaluation interval of groups that set none.
	Interval time.Duration
	// Files are rule file globs (already resolved against the config's
	// directory); Packs are names of embedded packs.
	Files []string
	Packs []string
	// ExternalLabels are added to alerts sent and available in templates.
	ExternalLabels labels.Labels
	// Generated are rule files other parts make (the SLOs' recording and
	// burn-rate rules), by name, evaluated like files after Files and
	// Packs and checked the same way.
	Generated map[string][]byte
	// Severities maps the severity label to the priority label the rules'
	// alerts gain (alerting.severity_map); the zero value is the default
	// map.
	Severities config.Severities
	// Warmup is the warm-up of the alerting rules of Files whose rule and
	// group set none (rules.warmup; 0: none). Packs and Generated keep
	// rulefile.DefaultWarmup.
	Warmup time.Duration
}

// Manager evaluates rule files with Prometheus' rules manager. It
// implements the RulesRetriever of Prometheus' API (/api/v1/rules and
// /api/v1/alerts). Methods are safe for concurrent use.
type Manager struct {
	opts   Options
	logger *slog.Logger
	loader *loader
	m      *promrules.Manager
	// notifier is swapped by SetNotifier.
	notifier atomic.Pointer[Notifier]

	// mu serialises Update and Run's start.
	mu sync.Mutex
	// started is set by Run; before it, Update only keeps the config in
	// pending, because Prometheus' manager starts a goroutine per group
	// on update, and a constructor starts none.
	started bool
	pending *pendingUpdate
}

type pendingUpdate struct {
	ids    []string
	staged *loaded
	cfg    Config
}

// New returns a manager that evaluates nothing until Update and Run.
func New(opts Options) *Manager {
	d := DefaultOptions()
	if opts.OutageTolerance <= 0 {
		opts.OutageTolerance = d.OutageTolerance
	}
	if opts.ForGracePeriod <= 0 {
		opts.ForGracePeriod = d.ForGracePeriod
	}
	if opts.ResendDelay <= 0 {
		opts.ResendDelay = d.ResendDelay
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ExternalURL == nil {
		opts.ExternalURL = &url.URL{}
	}
	m := &Manager{opts: opts, logger: opts.Logger, loader: newLoader()}
	n := opts.Notifier
	if n == nil {
		n = logNotifier{logger: opts.Logger}
	}
	m.notifier.Store(&n)
	m.m = promrules.NewManager(&promrules.ManagerOptions{
		ExternalURL:     opts.ExternalURL,
		QueryFunc:       promrules.EngineQueryFunc(opts.Engine, opts.Queryable),
		NotifyFunc:      promrules.SendAlerts(m, opts.ExternalURL.String()),
		Context:         context.Background(),
		AppendableV2:    opts.Appendable,
		Queryable:       opts.Queryable,
		Logger:          opts.Logger,
		Registerer:      opts.Registerer,
		OutageTolerance: opts.OutageTolerance,
		ForGracePeriod:  opts.ForGracePeriod,
		ResendDelay:     opts.ResendDelay,
		GroupLoader:     m.loader,
	})
	return m
}

// SetNotifier replaces where alerts go (nil: the log).
func (m *Manager) SetNotifier(n Notifier) {
	if n == nil {
		n = logNotifier{logger: m.logger}
	}
	m.notifier.Store(&n)
}

// Send passes alerts to the notifier; it makes Manager a rules.Sender.
func (m *Manager) Send(alerts ...*notifier.Alert) { (*m.notifier.Load()).Send(alerts...) }

// Update loads cfg's rule files and packs and swaps them in (before Run:
// when Run starts). Every file is parsed and checked first: on any error
// the rules in force keep running and the error says which file and line.
// Alerts of unchanged rules keep their state.
func (m *Manager) Update(cfg Config) error {
	u, err := m.Prepare(cfg)
	if err != nil {
		return err
	}
	return m.Apply(u)
}

// Prepared is a rule config whose files and packs are read, parsed and
// compiled, ready for Apply.
type Prepared struct{ u *pendingUpdate }

// Prepare reads, parses and compiles cfg's rule files and packs; it
// changes nothing. An error names the file and the line.
func (m *Manager) Prepare(cfg Config) (*Prepared, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var packNames []string
	for _, p := range withDefaultPacks(cfg.Packs) {
		if _, ok := Pack(p); !ok {
			// The command refuses unknown names when it loads a config
			// (against PackNames); a Config made otherwise may still
			// name one.
			m.logger.Warn("rule pack is not in this build; skipping it", "pack", p, "available", PackNames())
			continue
		}
		packNames = append(packNames, p)
	}
	ids, err := sources(cfg.Files, packNames)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Generated)) {
		ids = append(ids, generatedPrefix+name)
	}
	staged, err := m.loader.stageWith(ids, cfg)
	if err != nil {
		return nil, err
	}
	if len(staged.order) > 0 {
		ids = append(ids, warmupID)
	}
	return &Prepared{u: &pendingUpdate{ids: ids, staged: staged, cfg: cfg}}, nil
}

// Apply swaps prepared rules in (before Run: when Run starts).
func (m *Manager) Apply(p *Prepared) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		m.pending = p.u
		return nil
	}
	return m.apply(p.u)
}

// apply swaps staged rules in; m.mu is held.
func (m *Manager) apply(u *pendingUpdate) error {
	prev := m.loader.swap(u.staged)
	interval := u.cfg.Interval
	if interval <= 0 {
		interval = time.Minute
	}
	if err := m.m.Update(interval, u.ids, u.cfg.ExternalLabels, m.opts.ExternalURL.String(), nil); err != nil {
		m.loader.swap(prev)
		return fmt.Errorf("load rules: %w", err)
	}
	return nil
}

// sources lists the loader identifiers of cfg: matching files, sorted per
// glob as Prometheus does, then packs.
func sources(globs, packs []string) ([]string, error) {
	var ids []string
	for _, pat := range globs {
		files, err := filepath.Glob(pat)
		if err != nil {
			return nil, fmt.Errorf("invalid rule file pattern %q: %w", pat, err)
		}
		for _, f := range files {
			if !slices.Contains(ids, f) {
				ids = append(ids, f)
			}
		}
	}
	for _, p := range packs {
		id := packPrefix + p
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Run starts evaluating and blocks until ctx ends; then it stops every
// group, waiting for the evaluations under way.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.started = true
	if m.pending != nil {
		if err := m.apply(m.pending); err != nil {
			m.mu.Unlock()
			return err
		}
		m.pending = nil
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.m.Run()
	}()
	<-ctx.Done()
	m.m.Stop()
	<-done
	return nil
}

// RuleGroups returns the groups in force, for /api/v1/rules.
func (m *Manager) RuleGroups() []*promrules.Group { return m.m.RuleGroups() }

// AlertingRules returns the alerting rules in force, for /api/v1/alerts.
func (m *Manager) AlertingRules() []*promrules.AlertingRule { return m.m.AlertingRules() }

// Compiled returns what the extensions of the loaded rules compiled to.
func (m *Manager) Compiled() []rulefile.Compiled { return m.loader.allCompiled() }

// logNotifier logs alerts until the notify part takes them.
type logNotifier struct{ logger *slog.Logger }

func (n logNotifier) Send(alerts ...*notifier.Alert) {
	for _, a := range alerts {
		state := "firing"
		if a.Resolved() {
			state = "resolved"
		}
		n.logger.Info("alert", "state", state, "alertname", a.Name(), "severity", a.Labels.Get("severity"),
			"labels", a.Labels.String(), "starts_at", a.StartsAt.UTC().Format(time.RFC3339))
	}
}
