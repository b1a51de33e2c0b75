package scrape

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	commoncfg "github.com/prometheus/common/config"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	_ "github.com/prometheus/prometheus/discovery/file" // file_sd_configs
	_ "github.com/prometheus/prometheus/discovery/http" // http_sd_configs
	"github.com/prometheus/prometheus/model/labels"
	promscrape "github.com/prometheus/prometheus/scrape"
	"github.com/prometheus/prometheus/storage"
)

// Options configure a Scraper.
type Options struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer // may be nil
	// Appendable receives every scraped sample, with metadata.
	Appendable storage.AppendableV2
	// ExternalLabels are not attached to samples (Prometheus keeps them for
	// federation and remote write); they are used only to seed scrape
	// offsets so that several appliances spread their scrapes.
	ExternalLabels labels.Labels
}

// Scraper owns the discovery and scrape managers.
type Scraper struct {
	logger *slog.Logger
	disc   *discovery.Manager
	mgr    *promscrape.Manager

	// discCtx is the discovery manager's lifetime; Prometheus' discovery
	// manager takes its context at construction and starts providers under
	// it on ApplyConfig.
	discCtx    context.Context
	discCancel context.CancelFunc

	mu      sync.Mutex
	running bool
	sources []JobSource
}

// JobSource adds scrape jobs that are not in the config file, such as the
// jobs of auto-detected model servers. Its jobs are applied with every
// ApplyConfig, after the file's.
type JobSource interface {
	// ScrapeConfigs returns the jobs to add, validated against global.
	// taken reports the job names already used (by the file or an
	// earlier source); a source must not return one of them.
	ScrapeConfigs(global promconfig.GlobalConfig, taken func(job string) bool) ([]*promconfig.ScrapeConfig, error)
}

// AddJobSource adds a source of scrape jobs. It takes effect at the next
// ApplyConfig.
func (s *Scraper) AddJobSource(src JobSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sources = append(s.sources, src)
}

// New builds the managers. It starts no goroutines; Run does.
func New(opts Options) (*Scraper, error) {
	if opts.Appendable == nil {
		return nil, errors.New("scrape: no appendable")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	sdMetrics, err := discovery.CreateAndRegisterSDMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register discovery metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	disc := discovery.NewManager(ctx, logger.With("component", "discovery"), reg, sdMetrics, discovery.Name("scrape"))
	if disc == nil {
		cancel()
		return nil, errors.New("create discovery manager")
	}
	mgr, err := promscrape.NewManager(&promscrape.Options{
		// Metadata goes to the appender so the storage can keep it per family.
		AppendMetadata:           true,
		DiscoveryReloadOnStartup: true,
	}, logger.With("component", "scrape"), nil, nil, opts.Appendable, reg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("create scrape manager: %w", err)
	}
	return &Scraper{logger: logger, disc: disc, mgr: mgr, discCtx: ctx, discCancel: cancel}, nil
}

// Plan is a scrape config checked and merged with the jobs of the job
// sources, ready for Apply. Prepare makes one; it changes nothing.
type Plan struct {
	cfg   *promconfig.Config
	scfgs []*promconfig.ScrapeConfig
}

// Prepare reads the scrape configs of cfg (with scrape_config_files),
// adds the jobs of the job sources and checks what Apply would otherwise
// fail on halfway: the HTTP client of every job whose scrape pool exists
// already (Prometheus' manager rebuilds those on apply; new pools are built
// when their targets arrive, and one that cannot be fails alone). It
// changes nothing: a reload prepares every part before any part applies.
func (s *Scraper) Prepare(cfg *promconfig.Config) (*Plan, error) {
	scfgs, err := cfg.GetScrapeConfigs()
	if err != nil {
		return nil, fmt.Errorf("read scrape configs: %w", err)
	}
	s.mu.Lock()
	sources := slices.Clone(s.sources)
	s.mu.Unlock()
	if len(sources) > 0 {
		taken := make(map[string]bool, len(scfgs))
		for _, sc := range scfgs {
			taken[sc.JobName] = true
		}
		for _, src := range sources {
			extra, err := src.ScrapeConfigs(cfg.GlobalConfig, func(job string) bool { return taken[job] })
			if err != nil {
				return nil, fmt.Errorf("extra scrape jobs: %w", err)
			}
			for _, sc := range extra {
				if taken[sc.JobName] {
					return nil, fmt.Errorf("extra scrape job %q: the name is taken", sc.JobName)
				}
				taken[sc.JobName] = true
				scfgs = append(scfgs, sc)
			}
		}
		// A copy keeps Prometheus' "loaded" mark, which GetScrapeConfigs
		// requires; the scrape config files are already read into scfgs.
		merged := *cfg
		merged.ScrapeConfigFiles = nil
		merged.ScrapeConfigs = scfgs
		cfg = &merged
	}
	existing := s.mgr.ScrapePools()
	for _, sc := range scfgs {
		if !slices.Contains(existing, sc.JobName) {
			continue
		}
		c, err := commoncfg.NewClientFromConfig(sc.HTTPClientConfig, sc.JobName)
		if err != nil {
			return nil, fmt.Errorf("job %q: error creating HTTP client: %w", sc.JobName, err)
		}
		c.CloseIdleConnections()
	}
	return &Plan{cfg: cfg, scfgs: scfgs}, nil
}

// Apply applies a prepared plan. The scrape manager goes first so it knows
// a job's settings before discovery hands it the job's targets (the order
// Prometheus uses).
func (s *Scraper) Apply(p *Plan) error {
	if err := s.mgr.ApplyConfig(p.cfg); err != nil {
		return fmt.Errorf("apply scrape config: %w", err)
	}
	c := make(map[string]discovery.Configs, len(p.scfgs))
	for _, sc := range p.scfgs {
		c[sc.JobName] = sc.ServiceDiscoveryConfigs
	}
	if err := s.disc.ApplyConfig(c); err != nil {
		return fmt.Errorf("apply discovery config: %w", err)
	}
	return nil
}

// ApplyConfig prepares cfg and applies it.
func (s *Scraper) ApplyConfig(cfg *promconfig.Config) error {
	p, err := s.Prepare(cfg)
	if err != nil {
		return err
	}
	return s.Apply(p)
}

// Manager returns Prometheus' scrape manager, which the HTTP API reads
// targets, scrape pools and metadata from.
func (s *Scraper) Manager() *promscrape.Manager { return s.mgr }

// Run scrapes until ctx ends, then stops discovery and every scrape loop.
// As in Prometheus, shutting down writes no staleness markers (series go on
// after a restart), while a target that leaves the config on reload gets
// them. Scrapes in flight append until Run returns, so the storage must
// stay open until then.
func (s *Scraper) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("scrape: already running")
	}
	s.running = true
	s.mu.Unlock()

	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := s.disc.Run(); err != nil && !errors.Is(err, context.Canceled) {
			errc <- fmt.Errorf("discovery: %w", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := s.mgr.Run(s.disc.SyncCh()); err != nil {
			errc <- fmt.Errorf("scrape manager: %w", err)
		}
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.discCancel()
	s.mgr.Stop()
	wg.Wait()
	return err
}
