package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	promconfig "github.com/prometheus/prometheus/config"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/scrape"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/ui"
)

// runFlags are the flags shared by run and demo.
type runFlags struct {
	config    string
	data      string
	listen    string
	logLevel  string
	logFormat string
}

func (f *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "config file (default: the embedded default config)")
	fs.StringVar(&f.data, "data", "", "data directory (overrides storage.path; default \"data\")")
	fs.StringVar(&f.listen, "listen", "", "HTTP listen address (overrides web.listen_address; default \":9090\")")
	fs.StringVar(&f.logLevel, "log.level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log.format", "text", "log format: text or json")
}

func (f *runFlags) flagMap() map[string]string {
	return map[string]string{"config": f.config, "data": f.data, "listen": f.listen, "log.level": f.logLevel, "log.format": f.logFormat}
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log.level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log.format %q: want text or json", format)
}

func cmdRun(args []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "appliance run:", err)
		return 2
	}
	cfg, err := loadConfig(f)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	app, err := newAppliance(cfg, f, logger)
	if err != nil {
		logger.Error("cannot start", "err", err)
		return 1
	}
	if err := app.run(); err != nil {
		logger.Error("stopped with an error", "err", err)
		return 1
	}
	return 0
}

// loadConfig reads the config file, or builds the embedded default when
// there is none, and applies the flags that override it.
func loadConfig(f runFlags) (*config.Config, error) {
	var cfg *config.Config
	if f.config == "" {
		listen := f.listen
		if listen == "" {
			listen = ":9090"
		}
		cfg = config.Default(listen)
	} else {
		c, err := config.LoadFile(f.config)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	if f.data != "" {
		cfg.Storage.Path = f.data
	}
	if f.listen != "" {
		cfg.Web.ListenAddress = f.listen
	}
	if cfg.Storage.Path == "" {
		cfg.Storage.Path = "data"
	}
	if cfg.Web.ListenAddress == "" {
		cfg.Web.ListenAddress = ":9090"
	}
	return cfg, nil
}

// appliance holds the running components. Construction opens the storage
// and binds the port but starts nothing; run starts every component and
// stops them in order.
type appliance struct {
	flags  runFlags
	logger *slog.Logger
	cfg    atomic.Pointer[config.Config]
	// reloadMu serialises reloads (SIGHUP and /-/reload may race).
	reloadMu sync.Mutex

	reg     *prometheus.Registry
	db      *storage.DB
	engine  *query.Engine
	scraper *scrape.Scraper
	web     *ui.Server

	reloadOK   prometheus.Gauge
	reloadTime prometheus.Gauge

	// extra actors run next to the appliance (the demo fleet).
	extra []actor
	// parts are the components wired from their own files (rules,
	// notify, probes, local readings, downsampling); see part.
	parts []part
	// uiExtra lets parts add to the HTTP server's options (rules for
	// /api/v1/rules, the Alertmanager API, ...).
	uiExtra []func(*ui.Options)
}

// part is a component wired from its own file in this package. Each
// file adds a constructor to partBuilders (in an init function); builders
// run in order of their rank after the storage, the engine and the scraper
// exist and before the HTTP server is built, so a part may set fields of
// uiExtra. A builder may return nil when its part is switched off.
type part interface {
	// name is used in logs and errors.
	name() string
	// run runs the part until ctx ends.
	run(ctx context.Context) error
	// applyConfig takes a reloaded config; an error refuses the reload.
	applyConfig(cfg *config.Config) error
}

// partBuilder builds a part; rank orders the builders (lower first).
type partBuilder struct {
	rank  int
	build func(a *appliance, cfg *config.Config) (part, error)
}

var partBuilders []partBuilder

type actor struct {
	name string
	run  func(ctx context.Context) error
}

func newAppliance(cfg *config.Config, f runFlags, logger *slog.Logger) (_ *appliance, err error) {
	a := &appliance{flags: f, logger: logger, reg: prometheus.NewRegistry()}
	a.cfg.Store(cfg)
	a.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// Components from Prometheus' libraries register their own metrics;
	// the prefix keeps every self-metric under appliance_.
	libReg := prometheus.WrapRegistererWithPrefix("appliance_", a.reg)
	a.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "appliance_config_last_reload_successful",
		Help: "Whether the last configuration reload attempt was successful.",
	})
	a.reloadTime = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "appliance_config_last_reload_success_timestamp_seconds",
		Help: "Timestamp of the last successful configuration reload.",
	})
	bi := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "appliance_build_info",
		Help:        "Build information; the value is 1.",
		ConstLabels: prometheus.Labels{"version": version, "revision": buildRevision(), "goversion": buildInfo().GoVersion},
	})
	bi.Set(1)
	a.reg.MustRegister(a.reloadOK, a.reloadTime, bi)

	sopts := storage.DefaultOptions()
	sopts.Path = cfg.Storage.Path
	if r := time.Duration(cfg.Storage.Retention.Raw); r > 0 {
		sopts.RetentionRaw = r
	}
	if r := time.Duration(cfg.Storage.Retention.OneMinute); r > 0 {
		sopts.Retention1m = r
	}
	if r := time.Duration(cfg.Storage.Retention.FiveMinute); r > 0 {
		sopts.Retention5m = r
	}
	sopts.MemoryBudget = int64(cfg.Storage.MemoryBudget)
	sopts.Logger = logger.With("component", "storage")
	sopts.Registerer = a.reg
	a.db, err = storage.Open(sopts)
	if err != nil {
		return nil, fmt.Errorf("open storage in %s: %w", cfg.Storage.Path, err)
	}
	defer func() {
		if err != nil {
			_ = a.db.Close()
		}
	}()

	a.engine = query.New(query.Options{
		Timeout:       time.Duration(cfg.Query.Timeout),
		MaxSamples:    cfg.Query.MaxSamples,
		MaxConcurrent: cfg.Query.MaxConcurrency,
		LookbackDelta: time.Duration(cfg.Query.LookbackDelta),
		// 0 takes the engine's default, one part per core.
		SplitParallelism: cfg.Query.SplitParallelism,
	}, logger.With("component", "query"), libReg)
	a.engine.SetNoStepSubqueryInterval(time.Duration(cfg.Global.EvaluationInterval))

	a.scraper, err = scrape.New(scrape.Options{
		Logger:     logger,
		Registerer: libReg,
		Appendable: a.db,
	})
	if err != nil {
		return nil, err
	}
	if err := a.scraper.ApplyConfig(cfg.PrometheusConfig()); err != nil {
		return nil, err
	}

	slices.SortStableFunc(partBuilders, func(x, y partBuilder) int { return x.rank - y.rank })
	for _, b := range partBuilders {
		p, err := b.build(a, cfg)
		if err != nil {
			return nil, err
		}
		if p != nil {
			a.parts = append(a.parts, p)
		}
	}

	tlsCfg, err := serverTLS(cfg.Web.TLSServerConfig)
	if err != nil {
		return nil, err
	}
	users := map[string]string{}
	for u, h := range cfg.Web.BasicAuthUsers {
		users[u] = string(h)
	}
	uiOpts := ui.Options{
		ListenAddress:       cfg.Web.ListenAddress,
		Logger:              logger.With("component", "web"),
		Storage:             a.db,
		Engine:              a.engine,
		Targets:             a.scraper.Manager(),
		ConfigYAML:          func() string { return a.cfg.Load().String() },
		PromConfig:          func() promconfig.Config { return *a.cfg.Load().PrometheusConfig() },
		Reload:              a.reload,
		LookbackDelta:       a.engine.Options().LookbackDelta,
		StorageRetention:    sopts.RetentionRaw.String(),
		Flags:               f.flagMap(),
		BuildInfo:           buildInfo(),
		Gatherer:            a.reg,
		Registerer:          libReg,
		BasicAuthUsers:      users,
		TLS:                 tlsCfg,
		MaxRequestBodyBytes: int64(cfg.Web.MaxRequestBodyBytes),
		DashboardsDir:       cfg.UI.DashboardsDir,
		ProbeTargets:        a.probeTargets,
	}
	for _, set := range a.uiExtra {
		set(&uiOpts)
	}
	a.web, err = ui.New(uiOpts)
	if err != nil {
		return nil, err
	}
	a.reloadOK.Set(1)
	a.reloadTime.SetToCurrentTime()
	return a, nil
}

// run starts every component and blocks until SIGTERM/SIGINT or a
// component fails. The run group interrupts all actors at once: the HTTP
// server stops taking requests and the scrape manager stops its loops
// (writing staleness markers, so storage must still be open). Storage is
// closed last, after every writer has returned, which flushes it to disk.
func (a *appliance) run() error {
	var g run.Group
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	{
		term := make(chan os.Signal, 1)
		hup := make(chan os.Signal, 1)
		signal.Notify(term, os.Interrupt, syscall.SIGTERM)
		signal.Notify(hup, syscall.SIGHUP)
		stop := make(chan struct{})
		g.Add(func() error {
			for {
				select {
				case s := <-term:
					a.logger.Info("received signal, shutting down", "signal", s.String())
					return nil
				case <-hup:
					_ = a.reload()
				case <-stop:
					return nil
				}
			}
		}, func(error) {
			signal.Stop(term)
			signal.Stop(hup)
			close(stop)
		})
	}
	addCtx := func(name string, fn func(context.Context) error) {
		actx, acancel := context.WithCancel(ctx)
		g.Add(func() error {
			if err := fn(actx); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		}, func(error) { acancel() })
	}
	for _, x := range a.extra {
		addCtx(x.name, x.run)
	}
	for _, p := range a.parts {
		addCtx(p.name(), p.run)
	}
	addCtx("scrape", a.scraper.Run)
	addCtx("web", a.web.Run)

	cfg := a.cfg.Load()
	a.logger.Info("appliance started", "version", version, "listen", a.web.Addr().String(),
		"data", cfg.Storage.Path, "config", a.flags.config, "scrape_jobs", len(cfg.ScrapeConfigs))
	a.web.SetReady(true)
	err := g.Run()
	a.web.SetReady(false)

	start := time.Now()
	if cerr := a.db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close storage: %w", cerr))
	}
	a.logger.Info("appliance stopped", "storage_close", time.Since(start).Round(time.Millisecond).String())
	return err
}

// reload re-reads the config file. A file that does not load leaves the
// running config untouched. Storage and web settings need a restart; the
// rest applies at once.
func (a *appliance) reload() error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.flags.config == "" {
		a.logger.Info("reload requested, but the embedded default config is in use: nothing to reload")
		return nil
	}
	fail := func(err error) error {
		a.reloadOK.Set(0)
		a.logger.Error("config reload refused; the previous config keeps running", "file", a.flags.config, "err", err)
		return err
	}
	cfg, err := loadConfig(a.flags)
	if err != nil {
		return fail(err)
	}
	if err := a.scraper.ApplyConfig(cfg.PrometheusConfig()); err != nil {
		// Re-apply the old config so no half-applied state remains.
		_ = a.scraper.ApplyConfig(a.cfg.Load().PrometheusConfig())
		return fail(err)
	}
	for _, p := range a.parts {
		if err := p.applyConfig(cfg); err != nil {
			return fail(fmt.Errorf("%s: %w", p.name(), err))
		}
	}
	a.engine.SetNoStepSubqueryInterval(time.Duration(cfg.Global.EvaluationInterval))
	old := a.cfg.Swap(cfg)
	if changed := restartOnly(old, cfg); len(changed) > 0 {
		a.logger.Warn("these settings take effect after a restart", "keys", strings.Join(changed, ", "))
	}
	a.reloadOK.Set(1)
	a.reloadTime.SetToCurrentTime()
	a.logger.Info("config reloaded", "file", a.flags.config, "scrape_jobs", len(cfg.ScrapeConfigs))
	return nil
}

func restartOnly(old, cfg *config.Config) []string {
	var keys []string
	if old.Storage.Path != cfg.Storage.Path || old.Storage.Retention != cfg.Storage.Retention || old.Storage.MemoryBudget != cfg.Storage.MemoryBudget {
		keys = append(keys, "storage")
	}
	if old.Web.ListenAddress != cfg.Web.ListenAddress || old.Web.MaxRequestBodyBytes != cfg.Web.MaxRequestBodyBytes {
		keys = append(keys, "web")
	}
	if old.Query != cfg.Query {
		keys = append(keys, "query")
	}
	return keys
}

// serverTLS builds the HTTPS settings, or nil for plain HTTP.
func serverTLS(c *config.TLSServerConfig) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	t, err := c.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("web.tls_server_config: %w", err)
	}
	return t, nil
}
