package main

// This file is where the parts meet. Read it top to bottom for the whole
// appliance: newAppliance builds every part in the order below (building
// starts nothing), run starts them and stops them in order, and reload
// changes their config in two phases.
//
// Parts, in the order they are built (each takes what is above it):
//
//	storage      raw/1m/5m tiers and the bbolt state file
//	remote write a durable queue per remote_write entry under
//	             <data>/remote_write/; every Commit of the storage is
//	             also written to them (storage.CommitSink)
//	query        the PromQL engine over the tiers
//	downsample   rolls raw data up into the 1m and 5m tiers
//	notify       routes alerts to receivers through the bbolt outbox
//	rules        evaluates rule files and packs, and the SLOs' generated
//	             rules; alerts go to notify
//	slo          the weekly SLO reports: on demand, and on schedule
//	             through notify's outbox
//	cardinality  the cardinality report and its warning series
//	inputs       probes, local readings, auto-detection (see probes.go)
//	scrape       Prometheus' scrape and discovery managers, with the jobs
//	             auto-detection finds
//	web          the HTTP API; binds its port, answers once ready
//
// Shutdown (SIGTERM, SIGINT, or a part that fails) stops them one after the
// other, each waiting for the one before to return:
//
//	1. /-/ready answers 503 (queries are still answered)
//	2. input: web ingest (remote write, import), auto-detection, scrape,
//	   probes, local readings
//	3. rules, then the SLO report scheduler (it hands reports to notify),
//	   then the cardinality check
//	4. notify: the delivery in flight and one last dispatch, bounded;
//	   whatever is not accepted stays in the outbox for the next start
//	5. downsample
//	6. web: queries are answered until here
//	7. remote write: the senders stop (a request in flight is sent again
//	   at the next start); every sample is in the queues on disk already
//	8. the queues close, then storage closes, after every part has
//	   returned, and flushes to disk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/aiserve/appliance/cardinality"
	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/downsample"
	"github.com/aiserve/appliance/internal/exemplars"
	"github.com/aiserve/appliance/internal/histconv"
	"github.com/aiserve/appliance/notify"
	"github.com/aiserve/appliance/pipeline"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/remotewrite"
	"github.com/aiserve/appliance/rules"
	"github.com/aiserve/appliance/scrape"
	"github.com/aiserve/appliance/storage"
	"github.com/aiserve/appliance/ui"
	"github.com/aiserve/appliance/ui/rangecache"
)

// appliance holds the parts. Construction opens the storage and binds the
// port but starts nothing; run starts every part and stops them in order.
type appliance struct {
	flags  runFlags
	logger *slog.Logger
	cfg    atomic.Pointer[config.Config]
	// reloadMu serialises reloads (SIGHUP and /-/reload may race).
	reloadMu sync.Mutex

	reg        *prometheus.Registry
	reloadOK   prometheus.Gauge
	reloadTime prometheus.Gauge

	// The parts, in the order they are built.
	db          *storage.DB
	remoteWrite *remotewrite.Manager
	remoteRead  *query.RemoteRead
	remoteQuery *query.RemoteQuery
	engine      *query.Engine
	downsampler *downsample.Downsampler
	notifier    *notify.Notifier
	rules       *rules.Manager
	slo         *sloReports
	// cardinality reports what fills the store; cardinalityW writes its
	// flags as appliance_cardinality_warning.
	cardinality  *cardinality.Analyzer
	cardinalityW *cardinality.Writer
	inputs       *inputs
	scraper      *scrape.Scraper
	web          *ui.Server
	rangeCache   *rangecache.Cache // query_range results; emptied by every reload
	// exemplars is the in-memory exemplar ring of scrapes and remote
	// write; histograms stores native histograms as classic ones.
	exemplars  *exemplars.Storage
	histograms *histconv.Converter

	// extra actors run next to the appliance (the demo fleet); they stop
	// after the web server, before the storage closes.
	extra []actor
}

type actor struct {
	name string
	run  func(ctx context.Context) error
}

func newAppliance(cfg *config.Config, f runFlags, logger *slog.Logger) (_ *appliance, err error) {
	a := &appliance{flags: f, logger: logger, reg: prometheus.NewRegistry()}
	a.cfg.Store(cfg)
	// Before the storage opens its files: the soft limit of open files
	// up to the hard one; the web server keeps half of it for others.
	fileLimit, err := ui.RaiseFileLimit()
	if err != nil {
		logger.Warn("cannot read the open files limit", "err", err)
	}
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

	// storage
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
	sopts.MinFreeDisk = int64(cfg.Storage.MinFreeDisk)
	sopts.MaxSeries = cfg.Storage.MaxSeries
	sopts.SelfMonitoring = selfScrape
	sopts.Logger = logger.With("component", "storage")
	sopts.Registerer = a.reg
	sopts.StartFresh = f.startFresh
	a.db, err = storage.Open(sopts)
	if err != nil {
		return nil, fmt.Errorf("open storage in %s: %w", cfg.Storage.Path, err)
	}
	defer func() {
		if err != nil {
			_ = a.db.Close()
		}
	}()

	// remote write: the queues open now, so that the first sample stored
	// is queued; the senders start with run.
	a.remoteWrite = remotewrite.New(remotewrite.Options{
		Dir:        filepath.Join(cfg.Storage.Path, "remote_write"),
		Logger:     logger.With("component", "remotewrite"),
		Registerer: a.reg, // Prometheus' names: prometheus_remote_storage_*
	})
	rwNext, err := a.remoteWrite.Prepare(cfg.RemoteWrite, cfg.Global.ExternalLabels)
	if err != nil {
		return nil, err
	}
	if err := a.remoteWrite.Apply(rwNext); err != nil {
		return nil, fmt.Errorf("remote write: %w", err)
	}
	a.db.SetCommitSink(a.remoteWrite)
	defer func() {
		if err != nil {
			a.db.SetCommitSink(nil)
			_ = a.remoteWrite.Close()
		}
	}()

	// query, with remote_read's endpoints as extra read sources; with
	// read_recent false they serve what is older than the raw tier.
	rawRetention := sopts.RetentionRaw
	a.remoteRead = query.NewRemoteRead(func() (int64, error) {
		return time.Now().Add(-rawRetention).UnixMilli(), nil
	})
	rrNext, err := a.remoteRead.Prepare(cfg.RemoteRead, cfg.Global.ExternalLabels)
	if err != nil {
		return nil, err
	}
	a.remoteRead.Apply(rrNext)
	// hub mode (storage.remote_query): every query goes to the remote
	// API instead, whoever asks (API, rules, reports, dashboard).
	a.remoteQuery = query.NewRemoteQuery()
	rqNext, err := a.remoteQuery.Prepare(cfg.Storage.RemoteQuery)
	if err != nil {
		return nil, err
	}
	a.remoteQuery.Apply(rqNext)
	if u := a.remoteQuery.URL(); u != "" {
		logger.Info("hub mode: queries, rules and reports read the remote query API", "url", u)
	}
	a.engine = query.New(query.Options{
		RemoteRead:    a.remoteRead,
		RemoteQuery:   a.remoteQuery,
		Timeout:       time.Duration(cfg.Query.Timeout),
		MaxSamples:    cfg.Query.MaxSamples,
		MaxConcurrent: cfg.Query.MaxConcurrency,
		LookbackDelta: time.Duration(cfg.Query.LookbackDelta),
		// 0 takes the engine's default, one part per core.
		SplitParallelism: cfg.Query.SplitParallelism,
	}, logger.With("component", "query"), libReg)
	a.engine.SetNoStepSubqueryInterval(time.Duration(cfg.Global.EvaluationInterval))

	// downsample
	dopts := downsample.DefaultOptions()
	dopts.Logger = logger.With("component", "downsample")
	dopts.Registerer = a.reg // its metrics are named appliance_downsample_*
	if a.downsampler, err = downsample.New(a.db, dopts); err != nil {
		return nil, err
	}

	// notify
	if a.notifier, err = newNotifier(cfg, a.db, logger.With("component", "notify"), a.reg); err != nil {
		return nil, err
	}

	// rules, which hand their alerts to notify
	if a.rules, err = newRules(cfg, a.db, a.engine, a.notifier, logger.With("component", "rules"), libReg); err != nil {
		return nil, err
	}

	// slo reports, sent through notify
	if a.slo, err = newSLOReports(cfg, a.db, a.engine, a.notifier, logger.With("component", "slo")); err != nil {
		return nil, err
	}
	// cardinality: the report behind /cardinality and the
	// appliance_cardinality_warning series, written through the rules'
	// appender (never refused by storage.max_series)
	a.cardinality = cardinality.New(cardinality.Options{
		Status:         a.db,
		Queryable:      a.db.Raw(),
		SeriesLimit:    a.db.SeriesLimit,
		SampleLimit:    a.sampleLimit,
		MaxLabelValues: cfg.Storage.Cardinality.MaxLabelValues,
	})
	a.cardinalityW = cardinality.NewWriter(a.cardinality, a.db, time.Duration(cfg.Storage.Cardinality.Interval), logger.With("component", "cardinality"))

	// inputs: probes, local readings, auto-detection
	if a.inputs, err = newInputs(cfg, a.db, logger); err != nil {
		return nil, err
	}

	// exemplars and native histograms, for scrapes and remote write
	if a.exemplars, err = exemplars.New(exemplars.Options{MaxExemplars: cfg.Storage.Exemplars.MaxExemplars, Registerer: a.reg}); err != nil {
		return nil, err
	}
	hopts := histconv.DefaultOptions()
	hopts.Registerer = a.reg // appliance_native_histograms_*
	a.histograms = histconv.New(hopts)

	// scrape, with auto-detection's jobs added before the config is
	// applied, once. Native histograms (scrape_native_histograms) are
	// stored as classic ones, exemplars kept in memory.
	a.scraper, err = scrape.New(scrape.Options{
		Logger:     logger,
		Registerer: libReg,
		Appendable: a.histograms.Appendable(a.exemplars.Appendable(a.db)),
	})
	if err != nil {
		return nil, err
	}
	if a.inputs.detect != nil {
		a.scraper.AddJobSource(a.inputs.detect)
	}
	if err := a.scraper.ApplyConfig(cfg.PrometheusConfig()); err != nil {
		return nil, err
	}

	// web
	ws, err := webSettings(cfg.Web)
	if err != nil {
		return nil, err
	}
	// query_range from the points of earlier answers; off while remote
	// read or hub mode brings samples the cache cannot see.
	a.rangeCache = rangecache.New(rangecache.Options{
		Store:         a.db,
		Parser:        a.engine.Parser(),
		LookbackDelta: a.engine.Options().LookbackDelta,
		Passes:        a.downsampler.Passes,
		Bypass:        func() bool { return a.remoteRead.Len() > 0 || a.remoteQuery.URL() != "" },
		Registerer:    a.reg, // appliance_query_cache_*
	})
	a.web, err = ui.New(ui.Options{
		ListenAddress:    cfg.Web.ListenAddress,
		Logger:           logger.With("component", "web"),
		Storage:          a.db,
		Engine:           a.engine,
		Queryable:        a.remoteQuery.Queryable(a.db),
		BoxLabels:        a.remoteQuery.BoxLabels,
		Targets:          a.scraper.Manager(),
		Rules:            a.rules,
		Reports:          a.slo.reporter,
		Annotations:      a.slo.annotations,
		Cardinality:      a.cardinality,
		ConfigYAML:       func() string { return a.cfg.Load().String() },
		PromConfig:       func() promconfig.Config { return *a.cfg.Load().PrometheusConfig() },
		Reload:           a.reload,
		RangeCache:       a.rangeCache,
		LookbackDelta:    a.engine.Options().LookbackDelta,
		StorageRetention: sopts.RetentionRaw.String(),
		Flags:            f.flagMap(),
		BuildInfo:        buildInfo(),
		ApplianceVersion: version,
		Gatherer:         a.reg,
		Registerer:       libReg,
		// Alertmanager's v2 API; per-request max_source_resolution, the
		// tiers that served a query and /api/v1/status/tiers.
		Notify:              a.notifier,
		Tiers:               a.db,
		BasicAuthUsers:      ws.BasicAuthUsers,
		TLS:                 ws.TLS,
		CertFile:            ws.CertFile,
		KeyFile:             ws.KeyFile,
		MaxRequestBodyBytes: int64(cfg.Web.MaxRequestBodyBytes),
		MaxConnections:      cfg.Web.MaxConnections,
		FileLimit:           fileLimit,
		ReadTimeout:         time.Duration(cfg.Web.ReadTimeout),
		WriteTimeout:        webWriteTimeout(cfg, a.engine.Options().Timeout),
		IdleTimeout:         time.Duration(cfg.Web.IdleTimeout),
		DashboardsDir:       cfg.UI.DashboardsDir,
		ProbeTargets:        a.probeTargets,
		Histograms:          a.histograms,
		Exemplars:           a.exemplars,
		Pipelines:           func() []pipeline.Pipeline { return pipeline.FromConfig(a.cfg.Load().Pipelines) },
		// Pushed series keep the global label limits, as scraped ones do.
		LabelLimits: func() ui.LabelLimits {
			g := a.cfg.Load().Global
			return ui.LabelLimits{Count: int(g.LabelLimit), NameLength: int(g.LabelNameLengthLimit), ValueLength: int(g.LabelValueLengthLimit)}
		},
	})
	if err != nil {
		return nil, err
	}
	a.reloadOK.Set(1)
	a.reloadTime.SetToCurrentTime()
	return a, nil
}

// run starts every part and blocks until SIGTERM/SIGINT or a part fails;
// then it stops the parts in the order of the file comment and closes the
// storage.
//
// oklog/run calls the interrupts one after the other, in the order the
// actors were added, once the first actor returns. Each part's interrupt
// (addPart) cancels the part and waits for it to return, so the order of
// g.Add below is the order of shutdown. All parts start at once when
// g.Run starts; building (newAppliance) happened in the order above.
func (a *appliance) run() error {
	var g run.Group

	// 1. Signals. The interrupt turns /-/ready to 503 first, whatever
	// stops the group, so that load balancers move away while the rest
	// shuts down; queries are answered until the web server stops (6).
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
					a.web.SetStopping()
					a.logger.Info("received signal, shutting down", "signal", s.String())
					return nil
				case <-hup:
					_ = a.reload()
				case <-stop:
					return nil
				}
			}
		}, func(error) {
			a.web.SetStopping()
			signal.Stop(term)
			signal.Stop(hup)
			close(stop)
		})
	}

	// 2. Input, so that nothing new arrives while the rest stops.
	// Web ingest first: remote write and import answer 503 (senders
	// retry) and those in flight finish writing.
	a.addPart(&g, "web ingest", func(ctx context.Context) error {
		<-ctx.Done()
		a.web.StopIngest()
		return nil
	})
	// Auto-detection before scrape and probes: it hands them jobs and
	// probes, and a probe it hands over after the probe manager stopped
	// would write after input stopped.
	if in := a.inputs; in.detect != nil {
		a.addPart(&g, "autodetect", in.detect.Run)
	}
	// The scraper writes no staleness markers on shutdown (series go on
	// after a restart, as in Prometheus), but scrapes in flight append
	// until Run returns. The probes and the local readings mark their
	// series stale when they stop. All of them need the storage open,
	// which it is until every part has returned.
	a.addPart(&g, "scrape", a.scraper.Run)
	a.addPart(&g, "probes", a.inputs.probes.Run)
	if in := a.inputs; in.local != nil {
		a.addPart(&g, "local readings", in.local.Run)
	}

	// 3. Rules, after input: the evaluation in flight ends, its alerts
	// reach the notifier, which still runs. Recording rules write to the
	// storage.
	a.addPart(&g, "rules", a.rules.Run)
	// The report scheduler, before notify: a report it hands over is in
	// the outbox, which notify drains.
	a.addPart(&g, "slo reports", a.slo.run)
	// The cardinality check writes its warnings to the storage.
	a.addPart(&g, "cardinality", a.cardinalityW.Run)

	// 4. Notify, after rules, so it has their last alerts: it lets the
	// delivery in flight finish and dispatches once more, within
	// notify.DefaultDrainTimeout; what is not accepted stays in the outbox
	// (the storage's bbolt file, still open) and is sent at the next start.
	a.addPart(&g, "notify", a.notifier.Run)

	// 5. Downsample, after every writer of raw samples, so its last
	// rollup sees them; it writes tiers and its watermarks to the storage.
	a.addPart(&g, "downsample", func(ctx context.Context) error {
		defer a.downsampler.Close()
		return a.downsampler.Run(ctx)
	})

	// 6. Web. Its API reads the rules and the notifier, which stay
	// readable after they stopped; it waits up to three seconds for the
	// requests in flight.
	a.addPart(&g, "web", a.web.Run)

	for _, x := range a.extra {
		a.addPart(&g, x.name, x.run)
	}

	// 7. Remote write, after every writer: the senders stop; what they
	// had not sent is in the queues (written at Commit) for the next start.
	a.addPart(&g, "remote write", a.remoteWrite.Run)

	cfg := a.cfg.Load()
	a.logger.Info("appliance started", "version", version, "listen", a.web.Addr().String(),
		"data", cfg.Storage.Path, "config", a.flags.config, "scrape_jobs", len(cfg.ScrapeConfigs))
	a.web.SetReady(true)
	err := g.Run()
	a.web.SetReady(false)

	// 8. The queues, then the storage, last: every part that writes has
	// returned (g.Run waits for every actor). Closing flushes it to disk.
	a.db.SetCommitSink(nil)
	if cerr := a.remoteWrite.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close remote write queues: %w", cerr))
	}
	start := time.Now()
	if cerr := a.db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close storage: %w", cerr))
	}
	a.logger.Info("storage closed", "took", time.Since(start).Round(time.Millisecond).String())
	a.logger.Info("appliance stopped")
	return err
}

// addPart adds a part to the group: fn runs until its context ends. The
// interrupt cancels that context and waits until fn has returned, so that
// the next interrupt (the next part) starts only then.
func (a *appliance) addPart(g *run.Group, name string, fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	g.Add(func() error {
		defer close(done)
		if err := fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}, func(error) {
		cancel()
		<-done
		a.logger.Info("part stopped", "part", name)
	})
}

// reload re-reads the config file in two phases. First every part
// prepares the new config and changes nothing: rules read, parse and
// compile their files and packs, notify builds its receivers, templates
// and time intervals, the scraper merges and checks its jobs, the probes
// build their probers, query builds its remote_read and remote_query clients. Only when all have succeeded does any part apply.
// A config that does not load or that a part refuses leaves everything
// as it was; the error names the part and, where known, the file and
// line. Storage, query and web settings need a restart (a warning says
// so); the rest applies at once.
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

	// Phase 1: prepare. Every part is asked, so that one answer names
	// every problem.
	var errs []error
	rulesNext, err := a.rules.Prepare(rulesConfig(cfg))
	if err != nil {
		errs = append(errs, fmt.Errorf("rules: %w", err))
	}
	notifyNext, err := a.notifier.Prepare(cfg.Alerting)
	if err != nil {
		errs = append(errs, fmt.Errorf("notify: %w", err))
	}
	scrapeNext, err := a.scraper.Prepare(cfg.PrometheusConfig())
	if err != nil {
		errs = append(errs, fmt.Errorf("scrape: %w", err))
	}
	probesNext, err := a.inputs.prepare(cfg)
	if err != nil {
		errs = append(errs, fmt.Errorf("probes: %w", err))
	}
	remoteReadNext, err := a.remoteRead.Prepare(cfg.RemoteRead, cfg.Global.ExternalLabels)
	if err != nil {
		errs = append(errs, fmt.Errorf("query: %w", err))
	}
	remoteWriteNext, err := a.remoteWrite.Prepare(cfg.RemoteWrite, cfg.Global.ExternalLabels)
	if err != nil {
		errs = append(errs, fmt.Errorf("remote write: %w", err))
	}
	remoteQueryNext, err := a.remoteQuery.Prepare(cfg.Storage.RemoteQuery)
	if err != nil {
		errs = append(errs, fmt.Errorf("query: %w", err))
	}
	var webNext *ui.WebNext
	if ws, err := webSettings(cfg.Web); err != nil {
		errs = append(errs, fmt.Errorf("web: %w", err))
	} else if webNext, err = a.web.PrepareWeb(ws); err != nil {
		errs = append(errs, fmt.Errorf("web: %w", err))
	}
	if len(errs) > 0 {
		return fail(errors.Join(errs...))
	}

	// Phase 2: apply. Notify first, so that alerts of new rules find
	// their routes; the scraper after rules, so that rules over new jobs
	// are in force when their first samples arrive. What can still fail
	// here is I/O that preparing cannot foresee (the notifier's state
	// file, Prometheus' managers); it is reported as such.
	if err := a.notifier.Apply(notifyNext); err != nil {
		return fail(fmt.Errorf("notify: apply: %w", err))
	}
	if err := a.rules.Apply(rulesNext); err != nil {
		return fail(fmt.Errorf("rules: apply: %w", err))
	}
	if err := a.scraper.Apply(scrapeNext); err != nil {
		return fail(fmt.Errorf("scrape: apply: %w", err))
	}
	if err := a.remoteWrite.Apply(remoteWriteNext); err != nil {
		return fail(fmt.Errorf("remote write: apply: %w", err))
	}
	a.inputs.apply(cfg, probesNext, a.logger)
	a.exemplars.Resize(cfg.Storage.Exemplars.MaxExemplars)
	a.remoteRead.Apply(remoteReadNext)
	a.remoteQuery.Apply(remoteQueryNext)
	a.slo.apply(cfg)
	// Users and TLS files: from the next request (handshake) on.
	a.web.ApplyWeb(webNext)
	a.engine.SetNoStepSubqueryInterval(time.Duration(cfg.Global.EvaluationInterval))
	a.rangeCache.Reset()
	old := a.cfg.Swap(cfg)
	if changed := restartOnly(old, cfg); len(changed) > 0 {
		a.logger.Warn("these settings take effect after a restart", "keys", strings.Join(changed, ", "))
	}
	a.reloadOK.Set(1)
	a.reloadTime.SetToCurrentTime()
	a.logger.Info("config reloaded", "file", a.flags.config, "scrape_jobs", len(cfg.ScrapeConfigs))
	return nil
}

// selfScrape tells the appliance's own scrape (job "appliance", which the
// default config has) from the rest, for storage.Options.SelfMonitoring.
func selfScrape(first labels.Labels) bool {
	return first.Get("job") == "appliance"
}

// sampleLimit is a scrape job's sample_limit in the running config (0:
// none, or a job auto-detection added).
func (a *appliance) sampleLimit(job string) int {
	for _, sc := range a.cfg.Load().ScrapeConfigs {
		if sc.JobName == job {
			return int(sc.SampleLimit)
		}
	}
	return 0
}
