package autodetect

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/model"

	"github.com/aiserve/appliance/config"
)

// checkTimeout bounds one look at one port. A model server answers
// /metrics in milliseconds; one that takes longer is found next round.
const checkTimeout = 3 * time.Second

// Options configure a Detector.
type Options struct {
	Host     string
	Ports    []int
	Interval time.Duration
	// Probes makes an llm probe for each OpenAI-compatible server found
	// and an http probe for Ollama, handed to OnProbes.
	Probes bool
	// OnProbes receives the probes for what was found, after every round
	// that changed them. May be nil.
	OnProbes func([]*config.ProbeConfig)
	// Scraped reports ports the config file scrapes already: a server
	// found there gets its probe but no second scrape job. May be nil.
	Scraped func(port int) bool
	Logger  *slog.Logger
}

// Detector looks for model servers and exporters on localhost's usual
// ports. What it found feeds the discovery of its scrape jobs (see
// ScrapeConfigs) and, through OnProbes, the probe manager.
//
// Found servers are kept while their port is down (a vLLM that crashed
// must show up=0 and alert, not vanish); a port is forgotten only when it
// answers as something else, or when its server is recognised again as a
// different kind.
type Detector struct {
	opts   Options
	client *http.Client

	mu      sync.Mutex
	found   map[int]Found // by port
	changed chan struct{} // closed and replaced on every change
	probes  []*config.ProbeConfig
}

// New checks opts. It starts nothing.
func New(opts Options) (*Detector, error) {
	if opts.Host == "" {
		return nil, errors.New("autodetect: no host")
	}
	if opts.Interval <= 0 {
		return nil, errors.New("autodetect: interval must be positive")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: checkTimeout}).DialContext,
		DisableKeepAlives:   true,
		MaxIdleConns:        1,
		TLSHandshakeTimeout: checkTimeout,
	}
	return &Detector{
		opts:    opts,
		client:  &http.Client{Transport: tr, Timeout: checkTimeout, CheckRedirect: noRedirect},
		found:   map[int]Found{},
		changed: make(chan struct{}),
	}, nil
}

// noRedirect: a port that redirects /metrics elsewhere (a web UI's login
// page) is not what we look for.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Run looks at once and then every interval until ctx ends.
func (d *Detector) Run(ctx context.Context) error {
	tick := time.NewTicker(d.opts.Interval)
	defer tick.Stop()
	for {
		d.Detect(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Detect runs one round: every port at once, each bounded by a short
// timeout.
func (d *Detector) Detect(ctx context.Context) {
	type answer struct {
		port int
		f    Found
		ok   bool
		down bool
	}
	answers := make([]answer, len(d.opts.Ports))
	var wg sync.WaitGroup
	for i, port := range d.opts.Ports {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 2*checkTimeout)
			defer cancel()
			base := "http://" + d.addr(port)
			f, ok := recognize(cctx, d.client, base)
			f.Port = port
			if ok && d.opts.Scraped != nil && d.opts.Scraped(port) {
				f.Scrape = false
				f.Evidence += "; the config file scrapes it already"
			}
			answers[i] = answer{port: port, f: f, ok: ok, down: !ok && !d.answers(cctx, port)}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}

	d.mu.Lock()
	changed := false
	for _, a := range answers {
		old, had := d.found[a.port]
		switch {
		case a.ok && (!had || old != a.f):
			d.found[a.port] = a.f
			changed = true
			d.opts.Logger.Info("auto-detected a server", "kind", a.f.Kind, "address", d.addr(a.port), "evidence", a.f.Evidence, "model", a.f.Model)
		case !a.ok && had && !a.down:
			// The port answers, but not as the server it was: forget it.
			delete(d.found, a.port)
			changed = true
			d.opts.Logger.Info("auto-detected server is gone; the port answers something else", "kind", old.Kind, "address", d.addr(a.port))
		}
	}
	var probes []*config.ProbeConfig
	if changed {
		close(d.changed)
		d.changed = make(chan struct{})
		probes = d.probesLocked()
		d.probes = probes
	}
	d.mu.Unlock()
	if changed && d.opts.OnProbes != nil && d.opts.Probes {
		d.opts.OnProbes(probes)
	}
}

// answers reports whether anything accepts a connection on port.
func (d *Detector) answers(ctx context.Context, port int) bool {
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, "tcp", d.addr(port))
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func (d *Detector) addr(port int) string {
	return net.JoinHostPort(d.opts.Host, strconv.Itoa(port))
}

// Found returns what was found, ordered by port.
func (d *Detector) Found() []Found {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Found, 0, len(d.found))
	for _, f := range d.found {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Found) int { return a.Port - b.Port })
	return out
}

// Probes returns the probes for what was found (nil unless Options.Probes).
func (d *Detector) Probes() []*config.ProbeConfig {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.opts.Probes {
		return nil
	}
	return d.probes
}

// probesLocked builds an llm probe per OpenAI-compatible server, on
// /v1/completions (which needs no chat template, so it works for base
// models too), and an http probe of /api/version per Ollama (a generation
// request would load a model into memory and keep it there).
func (d *Detector) probesLocked() []*config.ProbeConfig {
	var out []*config.ProbeConfig
	ports := make([]int, 0, len(d.found))
	for p := range d.found {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	for _, port := range ports {
		f := d.found[port]
		var p *config.ProbeConfig
		switch {
		case openAIKinds[f.Kind]:
			p = &config.ProbeConfig{
				Name: f.Kind + "-" + strconv.Itoa(port), Kind: config.ProbeKindLLM,
				URL: "http://" + d.addr(port) + "/v1/completions", Model: f.Model,
			}
		case f.Kind == KindOllama:
			p = &config.ProbeConfig{
				Name: f.Kind + "-" + strconv.Itoa(port), Kind: config.ProbeKindHTTP,
				URL: "http://" + d.addr(port) + "/api/version", ExpectBody: `"version"`,
			}
		default:
			continue
		}
		if err := p.Validate(); err != nil {
			d.opts.Logger.Warn("cannot build the probe of an auto-detected server", "address", d.addr(port), "err", err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// targets returns the target groups' targets of kind.
func (d *Detector) targets(kind string) ([]model.LabelSet, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []model.LabelSet
	for _, f := range d.found {
		if f.Kind != kind || !f.Scrape {
			continue
		}
		out = append(out, model.LabelSet{
			model.AddressLabel:           model.LabelValue(d.addr(f.Port)),
			"__meta_autodetect_kind":     model.LabelValue(f.Kind),
			"__meta_autodetect_port":     model.LabelValue(strconv.Itoa(f.Port)),
			"__meta_autodetect_evidence": model.LabelValue(f.Evidence),
			"__meta_autodetect_model":    model.LabelValue(f.Model),
			"__meta_autodetect_detected": "true",
		})
	}
	slices.SortFunc(out, func(a, b model.LabelSet) int {
		return cmp.Compare(a[model.AddressLabel], b[model.AddressLabel])
	})
	return out, d.changed
}
