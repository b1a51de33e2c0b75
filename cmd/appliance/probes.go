package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/probe"
	"github.com/aiserve/appliance/scrape/autodetect"
	"github.com/aiserve/appliance/scrape/local"
	"github.com/aiserve/appliance/storage"
)

// inputs are the outside-in probes, the local readings (host, thermal,
// GPU) and the auto-detection of local model servers: the input besides
// the scraper and web ingest. They are built together because
// auto-detection feeds both the scraper (jobs, as a scrape.JobSource) and
// the probes (llm probes for what it found).
type inputs struct {
	probes *probe.Manager
	local  *local.Reader        // nil when the collectors are off
	detect *autodetect.Detector // nil when auto-detection is off
	// scraped are the local ports the config file scrapes already.
	scraped scrapedPorts

	// started holds the sections that need a restart to change.
	started struct {
		collectors config.CollectorsConfig
		autodetect config.AutodetectConfig
	}
}

// newInputs builds the probes, the local readings and auto-detection; it
// starts nothing. The probes' config is applied here (the manager starts
// its runners when Run starts).
func newInputs(cfg *config.Config, db *storage.DB, logger *slog.Logger) (*inputs, error) {
	in := &inputs{}
	in.started.collectors, in.started.autodetect = cfg.Collectors, cfg.Autodetect

	popts := probe.DefaultOptions()
	popts.Appendable = db
	popts.Logger = logger.With("component", "probe")
	m, err := probe.NewManager(popts)
	if err != nil {
		return nil, err
	}
	if err := m.ApplyConfig(cfg.Probes); err != nil {
		return nil, fmt.Errorf("probes: %w", err)
	}
	in.probes = m

	if c := cfg.Collectors; c.Enabled && (c.Host || c.Thermal || c.GPU) {
		lopts := local.DefaultOptions()
		lopts.Host, lopts.Thermal, lopts.GPU = c.Host, c.Thermal, c.GPU
		lopts.ProcPath, lopts.SysPath, lopts.RootFSPath, lopts.NvidiaSMI, lopts.Vcgencmd = c.ProcPath, c.SysPath, c.RootFSPath, c.NvidiaSMI, c.Vcgencmd
		lopts.Interval = time.Duration(cmpOr(c.Interval, cfg.Global.ScrapeInterval))
		lopts.Appendable = db
		lopts.Logger = logger.With("component", "local")
		if in.local, err = local.New(lopts); err != nil {
			return nil, err
		}
	}

	if ad := cfg.Autodetect; ad.Enabled {
		in.scraped.set(cfg)
		in.detect, err = autodetect.New(autodetect.Options{
			Host:     ad.Host,
			Ports:    ad.Ports,
			Interval: time.Duration(ad.Interval),
			Probes:   ad.Probes,
			OnProbes: m.SetDetected,
			Scraped:  in.scraped.has,
			Logger:   logger.With("component", "autodetect"),
		})
		if err != nil {
			return nil, err
		}
	}
	return in, nil
}

func cmpOr(a, b model.Duration) model.Duration {
	if a > 0 {
		return a
	}
	return b
}

// prepare checks the probes of a reloaded config; it changes nothing.
func (in *inputs) prepare(cfg *config.Config) (*probe.Prepared, error) {
	return in.probes.Prepare(cfg.Probes)
}

// apply applies prepared probes and the ports the reloaded config
// scrapes; the collectors and autodetect sections take effect after a
// restart.
func (in *inputs) apply(cfg *config.Config, p *probe.Prepared, logger *slog.Logger) {
	in.probes.Apply(p)
	if in.detect != nil {
		in.scraped.set(cfg)
	}
	if !reflect.DeepEqual(cfg.Collectors, in.started.collectors) || !reflect.DeepEqual(cfg.Autodetect, in.started.autodetect) {
		logger.Warn("changes to the collectors and autodetect sections take effect after a restart")
	}
}

// scrapedPorts are the local ports the config file scrapes already, so
// that auto-detection does not scrape them a second time (it still probes
// them). Reload replaces them while auto-detection reads them.
type scrapedPorts struct{ m atomic.Pointer[map[int]bool] }

func (s *scrapedPorts) has(port int) bool {
	m := s.m.Load()
	return m != nil && (*m)[port]
}

// set records the local ports of cfg's static scrape targets.
func (s *scrapedPorts) set(cfg *config.Config) {
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
	s.m.Store(&skip)
}
