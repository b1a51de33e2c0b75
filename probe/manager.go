package probe

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/prometheus/storage"

	"github.com/aiserve/appliance/config"
)

// Options configure a Manager.
type Options struct {
	// Appendable receives every probe run's series, one commit per run.
	Appendable storage.AppendableV2
	Logger     *slog.Logger
	// Now is the clock of sample timestamps (default time.Now). Durations
	// are measured on the monotonic clock whatever Now is.
	Now func() time.Time
}

// DefaultOptions returns Options with the default clock and a discarding
// logger; set Appendable.
func DefaultOptions() Options {
	return Options{Logger: slog.New(slog.DiscardHandler), Now: time.Now}
}

// Manager runs the probes of the config and those auto-detection found,
// each on its own interval, one request at a time per probe.
//
// ApplyConfig and SetDetected may be called at any time, also before and
// after Run, from any goroutine. Probes run only while Run runs.
type Manager struct {
	opts Options

	mu       sync.Mutex
	fromCfg  []*config.ProbeConfig
	detected []*config.ProbeConfig
	running  map[string]*runner
	runCtx   context.Context // nil unless Run is running
	wg       sync.WaitGroup
}

// runner is one probe's loop.
type runner struct {
	cfg    *config.ProbeConfig
	prober Prober
	w      *seriesWriter
	cancel context.CancelFunc
	done   chan struct{}
}

// NewManager checks opts. It starts nothing.
func NewManager(opts Options) (*Manager, error) {
	if opts.Appendable == nil {
		return nil, errors.New("probe manager: no appendable")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Manager{opts: opts, running: map[string]*runner{}}, nil
}

// ApplyConfig replaces the probes from the config file. It refuses the
// whole set, keeping the old one, if any probe cannot be built (a TLS file
// that does not load) or two share a name.
func (m *Manager) ApplyConfig(probes []*config.ProbeConfig) error {
	p, err := m.Prepare(probes)
	if err != nil {
		return err
	}
	m.Apply(p)
	return nil
}

// Prepared is a checked set of configured probes, ready for Apply.
type Prepared struct{ probes []*config.ProbeConfig }

// Prepare checks the probes of a config (names, and that every probe can
// be built); it changes nothing.
func (m *Manager) Prepare(probes []*config.ProbeConfig) (*Prepared, error) {
	if err := config.ValidateProbes(probes); err != nil {
		return nil, err
	}
	for _, p := range probes {
		if _, err := NewProber(p); err != nil {
			return nil, err
		}
	}
	return &Prepared{probes: probes}, nil
}

// Apply replaces the configured probes with a prepared set.
func (m *Manager) Apply(p *Prepared) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fromCfg = p.probes
	m.syncLocked()
}

// SetDetected replaces the probes that auto-detection made. A detected
// probe whose name a configured probe has is left out: the config wins.
func (m *Manager) SetDetected(probes []*config.ProbeConfig) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.detected = probes
	m.syncLocked()
}

// wanted returns the probes that should run, by name.
func (m *Manager) wantedLocked() map[string]*config.ProbeConfig {
	want := make(map[string]*config.ProbeConfig, len(m.fromCfg)+len(m.detected))
	for _, p := range m.detected {
		want[p.Name] = p
	}
	for _, p := range m.fromCfg {
		want[p.Name] = p
	}
	return want
}

// syncLocked stops the runners of probes that are gone or changed, marking
// their series stale, and starts the new ones, if Run is running.
func (m *Manager) syncLocked() {
	if m.runCtx == nil {
		return
	}
	want := m.wantedLocked()
	for name, r := range m.running {
		if c, ok := want[name]; ok && reflect.DeepEqual(c, r.cfg) {
			continue
		}
		m.stopRunner(r)
		delete(m.running, name)
	}
	for name, c := range want {
		if _, ok := m.running[name]; ok {
			continue
		}
		p, err := NewProber(c)
		if err != nil {
			m.opts.Logger.Error("cannot start probe", "probe", name, "err", err)
			continue
		}
		ctx, cancel := context.WithCancel(m.runCtx)
		r := &runner{cfg: c, prober: p, w: newSeriesWriter(m.opts.Appendable), cancel: cancel, done: make(chan struct{})}
		m.running[name] = r
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer close(r.done)
			m.loop(ctx, r)
		}()
	}
}

// stopRunner stops r, waits for its run in flight to end, and marks its
// series stale.
func (m *Manager) stopRunner(r *runner) {
	r.cancel()
	<-r.done
	if err := r.w.close(m.opts.Now()); err != nil {
		m.opts.Logger.Warn("cannot mark a removed probe's series stale", "probe", r.cfg.Name, "err", err)
	}
}

// Run runs the probes until ctx ends, then stops them and marks their
// series stale, so the storage must still be open when Run returns.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.runCtx != nil {
		m.mu.Unlock()
		return errors.New("probe manager: already running")
	}
	m.runCtx = ctx
	m.syncLocked()
	m.mu.Unlock()

	<-ctx.Done()

	m.mu.Lock()
	for name, r := range m.running {
		m.stopRunner(r)
		delete(m.running, name)
	}
	m.runCtx = nil
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// loop runs one probe at once and then every interval. A run never
// overlaps the next: the timeout is at most the interval, and a tick that
// comes while a run is in flight is dropped by the ticker.
func (m *Manager) loop(ctx context.Context, r *runner) {
	tick := time.NewTicker(time.Duration(r.cfg.Interval))
	defer tick.Stop()
	failing := false
	for {
		res := r.prober.Probe(ctx)
		if ctx.Err() != nil {
			// Cancelled mid-run (stopped or shutting down): the result
			// says nothing about the server.
			return
		}
		if err := r.w.write(samples(r.cfg, &res), m.opts.Now()); err != nil {
			m.opts.Logger.Warn("cannot store probe result", "probe", r.cfg.Name, "err", err)
		}
		switch {
		case !res.Success && !failing:
			m.opts.Logger.Warn("probe failing", "probe", r.cfg.Name, "reason", res.Reason, "err", res.Err)
		case res.Success && failing:
			m.opts.Logger.Info("probe succeeds again", "probe", r.cfg.Name)
		}
		failing = !res.Success
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Names returns the names of the probes running now, for tests and logs.
func (m *Manager) Names() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.running))
	for n := range m.running {
		out = append(out, n)
	}
	return out
}
