package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/probe"
	"github.com/aiserve/appliance/scrape/autodetect"
	"github.com/aiserve/appliance/scrape/local"
)

// The outside-in probes, the local readings (host, thermal, GPU) and the
// auto-detection of local model servers. They are one part because
// auto-detection feeds both the scraper (jobs) and the probes (llm probes
// for what it found).
func init() {
	partBuilders = append(partBuilders, partBuilder{rank: 30, build: buildProbesPart})
}

type probesPart struct {
	a      *appliance
	probes *probe.Manager
	local  *local.Reader        // nil when the collectors are off
	detect *autodetect.Detector // nil when auto-detection is off
	skip   atomic.Pointer[map[int]bool]

	// started holds the sections that need a restart to change.
	started struct {
		collectors config.CollectorsConfig
		autodetect config.AutodetectConfig
	}
}

func buildProbesPart(a *appliance, cfg *config.Config) (part, error) {
	p := &probesPart{a: a}
	p.started.collectors, p.started.autodetect = cfg.Collectors, cfg.Autodetect
	logger := a.logger.With("component", "probe")

	popts := probe.DefaultOptions()
	popts.Appendable = a.db
	popts.Logger = logger
	m, err := probe.NewManager(popts)
	if err != nil {
		return nil, err
	}
	if err := m.ApplyConfig(cfg.Probes); err != nil {
		return nil, fmt.Errorf("probes: %w", err)
	}
	p.probes = m

	if c := cfg.Collectors; c.Enabled && (c.Host || c.Thermal || c.GPU) {
		lopts := local.DefaultOptions()
		lopts.Host, lopts.Thermal, lopts.GPU = c.Host, c.Thermal, c.GPU
		lopts.ProcPath, lopts.SysPath, lopts.RootFSPath, lopts.NvidiaSMI = c.ProcPath, c.SysPath, c.RootFSPath, c.NvidiaSMI
		lopts.Interval = time.Duration(cmpOr(c.Interval, cfg.Global.ScrapeInterval))
		lopts.Appendable = a.db
		lopts.Logger = a.logger.With("component", "local")
		if p.local, err = local.New(lopts); err != nil {
			return nil, err
		}
	}

	if ad := cfg.Autodetect; ad.Enabled {
		p.setSkip(cfg)
		p.detect, err = autodetect.New(autodetect.Options{
			Host:     ad.Host,
			Ports:    ad.Ports,
			Interval: time.Duration(ad.Interval),
			Probes:   ad.Probes,
			OnProbes: m.SetDetected,
			Scraped:  func(port int) bool { return (*p.skip.Load())[port] },
			Logger:   a.logger.With("component", "autodetect"),
		})
		if err != nil {
			return nil, err
		}
		// The scraper applied the file's jobs before the parts were
		// built; apply again with the detected jobs added.
		a.scraper.AddJobSource(p.detect)
		if err := a.scraper.ApplyConfig(cfg.PrometheusConfig()); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func cmpOr(a, b model.Duration) model.Duration {
	if a > 0 {
		return a
	}
	return b
}

func (p *probesPart) name() string { return "probes" }

// run runs the probes, the local readings and auto-detection until ctx
// ends. The probe manager and the local reader mark their series stale
// when they stop, so they return before the storage closes (the run group
// waits for every actor).
func (p *probesPart) run(ctx context.Context) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := func(name string, fn func(context.Context) error) {
		wg.Go(func() {
			if err := fn(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
				cancel()
			}
		})
	}
	start("probes", p.probes.Run)
	if p.local != nil {
		start("local readings", p.local.Run)
	}
	if p.detect != nil {
		start("autodetect", p.detect.Run)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// applyConfig applies the probes of a reloaded config; the collectors and
// autodetect sections take effect after a restart.
func (p *probesPart) applyConfig(cfg *config.Config) error {
	if err := p.probes.ApplyConfig(cfg.Probes); err != nil {
		return err
	}
	if p.detect != nil {
		p.setSkip(cfg)
	}
	if !reflect.DeepEqual(cfg.Collectors, p.started.collectors) || !reflect.DeepEqual(cfg.Autodetect, p.started.autodetect) {
		p.a.logger.Warn("changes to the collectors and autodetect sections take effect after a restart")
	}
	return nil
}

// setSkip records the local ports the config file scrapes already, so that
// auto-detection does not scrape them a second time (it still probes them).
func (p *probesPart) setSkip(cfg *config.Config) {
	local := map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "0.0.0.0": true, "": true, cfg.Autodetect.Host: true}
	if h, err := os.Hostname(); err == nil {
		local[h] = true
	}
	skip := map[int]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, c := range sc.ServiceDiscoveryConfigs {
			st, ok := c.(discovery.StaticConfig)
			if !ok {
				continue
			}
			for _, tg := range st {
				for _, t := range tg.Targets {
					host, port, err := net.SplitHostPort(string(t[model.AddressLabel]))
					if err != nil || !local[host] {
						continue
					}
					if n, err := strconv.Atoi(port); err == nil {
						skip[n] = true
					}
				}
			}
		}
	}
	p.skip.Store(&skip)
}
