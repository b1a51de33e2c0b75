package ui

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	apiv1 "github.com/prometheus/prometheus/web/api/v1"
)

// Storage is what the HTTP layer needs of the time-series store.
type Storage interface {
	storage.SampleAndChunkQueryable
	storage.ExemplarQueryable
	storage.AppendableV2
	apiv1.TSDBAdminStats
	// Metadata lists metadata per metric family with Prometheus'
	// /api/v1/metadata semantics (metric "" = all; limits <= 0 = none).
	Metadata(metric string, limit, limitPerMetric int) map[string][]metadata.Metadata
	// SetMetadata records a family's metadata (the text importer calls it).
	SetMetadata(family string, m metadata.Metadata)
}

// Targets is what the API reads of the scrape manager.
type Targets interface {
	apiv1.TargetRetriever
	apiv1.ScrapePoolsRetriever
}

// Options configure the server. Storage, Engine and Targets are required.
type Options struct {
	ListenAddress string
	Logger        *slog.Logger

	Storage Storage
	Engine  promql.QueryEngine
	Targets Targets
	// Rules lists rule groups and alerts for /api/v1/rules and /alerts,
	// with the appliance's rule extensions; nil serves empty lists.
	Rules RulesRetriever
	// Notify backs Alertmanager's v2 API under /api/v2/; nil serves none.
	Notify NotifyRetriever
	// Tiers, when set, serves /api/v1/status/tiers, and the query
	// endpoints take max_source_resolution and report the tiers that
	// served them (tiers.go); nil: neither.
	Tiers TierStatsSource
	// Reports serves the weekly SLO reports (reports_api.go); nil serves
	// an empty archive.
	Reports Reports

	// ConfigYAML returns the running config with secrets redacted.
	ConfigYAML func() string
	// PromConfig returns the Prometheus part of the running config.
	PromConfig func() promconfig.Config
	// Reload re-reads the config file; a bad file leaves the old config
	// running and the error is returned to the caller of /-/reload.
	Reload func() error

	LookbackDelta    time.Duration
	StorageRetention string
	Flags            map[string]string
	BuildInfo        apiv1.PrometheusVersion

	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer

	// BasicAuthUsers maps user names to bcrypt hashes; empty disables auth.
	BasicAuthUsers map[string]string
	// TLS, when set, serves HTTPS.
	TLS *tls.Config
	// MaxRequestBodyBytes bounds ingest bodies (default 32 MiB).
	MaxRequestBodyBytes int64

	// DashboardsDir holds user dashboards (ui.dashboards_dir); "" for none.
	DashboardsDir string
	// ProbeTargets lists the probes, so that services name theirs; nil
	// for none.
	ProbeTargets func() []ProbeTarget
	// LabelLimits returns the label limits pushed series must keep (the
	// global section's label_limit, label_name_length_limit,
	// label_value_length_limit); nil means none.
	LabelLimits func() LabelLimits
}

// DefaultMaxRequestBodyBytes bounds ingest request bodies when Options
// leaves it zero: Prometheus' remote-write senders send about 2,000 samples
// (a few hundred KiB) per request, so 32 MiB leaves room for large imports
// while keeping one request's memory bounded.
const DefaultMaxRequestBodyBytes = 32 << 20

// Server is the appliance's HTTP server.
type Server struct {
	opts     Options
	logger   *slog.Logger
	echo     *echo.Echo
	ready    atomic.Bool
	listener net.Listener
	started  time.Time

	// stopping turns /-/ready to 503 while queries are still answered.
	stopping atomic.Bool
	// ingest gates remote write and import; see StopIngest.
	ingestMu      sync.Mutex
	ingestStopped bool
	ingestWG      sync.WaitGroup
	ingest        *ingestMetrics
}

// New builds the server and binds its listener, so a port in use is an
// error here, before anything else starts. It starts no goroutines.
func New(opts Options) (*Server, error) {
	if opts.Storage == nil || opts.Engine == nil || opts.Targets == nil {
		return nil, errors.New("ui: storage, engine and targets are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxRequestBodyBytes <= 0 {
		opts.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if opts.Gatherer == nil {
		opts.Gatherer = prometheus.DefaultGatherer
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	s := &Server{opts: opts, logger: opts.Logger, started: time.Now(), ingest: newIngestMetrics(opts.Registerer)}
	s.echo = s.routes()
	if opts.ListenAddress != "" {
		ln, err := net.Listen("tcp", opts.ListenAddress)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", opts.ListenAddress, err)
		}
		if opts.TLS != nil {
			ln = tls.NewListener(ln, opts.TLS)
		}
		s.listener = ln
	}
	return s, nil
}

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() net.Addr {
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// Handler returns the whole HTTP handler (for tests).
func (s *Server) Handler() http.Handler { return s.echo }

// SetReady marks the appliance ready (or not) to serve queries and ingest.
func (s *Server) SetReady(r bool) { s.ready.Store(r) }

// SetStopping marks the appliance as shutting down: /-/ready answers 503
// from now on, so load balancers move away, while queries are answered
// until Run returns.
func (s *Server) SetStopping() { s.stopping.Store(true) }

// StopIngest refuses remote write and import with 503 from now on (senders
// retry elsewhere or later) and waits for those in flight to finish
// writing. Queries go on.
func (s *Server) StopIngest() {
	s.ingestMu.Lock()
	s.ingestStopped = true
	s.ingestMu.Unlock()
	s.ingestWG.Wait()
}

// ingestGate lets ingest requests through until StopIngest.
func (s *Server) ingestGate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		s.ingestMu.Lock()
		if s.ingestStopped {
			s.ingestMu.Unlock()
			return c.String(http.StatusServiceUnavailable, "shutting down: not taking samples\n")
		}
		s.ingestWG.Add(1)
		s.ingestMu.Unlock()
		defer s.ingestWG.Done()
		return next(c)
	}
}

// Run serves until ctx ends, then stops taking requests and waits up to
// three seconds for those in flight.
func (s *Server) Run(ctx context.Context) error {
	if s.listener == nil {
		return errors.New("ui: no listen address")
	}
	srv := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.listener) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.errorHandler
	if len(s.opts.BasicAuthUsers) > 0 {
		e.Use(basicAuth(s.opts.BasicAuthUsers))
	}

	e.GET("/-/healthy", func(c echo.Context) error {
		return c.String(http.StatusOK, "Appliance is Healthy.\n")
	})
	e.GET("/-/ready", func(c echo.Context) error {
		if !s.ready.Load() || s.stopping.Load() {
			return c.String(http.StatusServiceUnavailable, "Service Unavailable\n")
		}
		if err := s.ingestBlocked(); err != nil {
			// Queries still answer; ingest does not.
			return c.String(http.StatusServiceUnavailable, "Service Unavailable: "+err.Error()+"\n")
		}
		return c.String(http.StatusOK, "Appliance is Ready.\n")
	})
	reload := func(c echo.Context) error {
		if s.opts.Reload == nil {
			return c.String(http.StatusNotImplemented, "reload is not available\n")
		}
		if err := s.opts.Reload(); err != nil {
			return c.String(http.StatusInternalServerError, fmt.Sprintf("failed to reload config: %s\n", err))
		}
		return c.String(http.StatusOK, "config reloaded\n")
	}
	e.POST("/-/reload", reload)
	e.PUT("/-/reload", reload)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{})))
	// Go's profiler, as Prometheus serves it, for "why is the appliance
	// itself slow" (behind the same auth as everything else).
	e.GET("/debug/pprof/*", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
	e.GET("/debug/pprof/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)))
	e.GET("/debug/pprof/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)))
	e.GET("/debug/pprof/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)))
	e.GET("/debug/pprof/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)))

	s.mountPrometheusAPI(e)
	s.mountSPA(e)
	s.mountReports(e)
	if s.opts.Tiers != nil {
		e.Any("/api/v1/status/tiers", echo.WrapHandler(tierStatsHandler(s.opts.Tiers)))
	}
	if s.opts.Notify != nil {
		e.Any("/api/v2/*", echo.WrapHandler(alertmanagerHandler(s.opts.Notify)))
	}
	return e
}

// errorHandler answers echo's own errors (404, 405, 413) in plain text
// rather than echo's JSON, which no Prometheus client expects.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code := http.StatusInternalServerError
	msg := err.Error()
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code = he.Code
		msg = fmt.Sprint(he.Message)
	}
	_ = c.String(code, msg+"\n")
}
