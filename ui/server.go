package ui

import (
	"cmp"
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

	"github.com/aiserve/appliance/internal/exemplars"
	"github.com/aiserve/appliance/internal/histconv"
	"github.com/aiserve/appliance/pipeline"
	"github.com/aiserve/appliance/ui/rangecache"
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
	// Queryable is what the API's series, labels and label values and
	// the dashboard's discovery read; nil reads Storage. In hub mode it
	// is the remote API (query.RemoteQuery.Queryable).
	Queryable storage.SampleAndChunkQueryable
	// BoxLabels returns the labels that identify a box (hub mode), for
	// the dashboard's box selector (/api/v1/appliance/boxes); nil or
	// empty shows none.
	BoxLabels func() []string
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
	// Annotations stores posted annotations and recorded releases
	// (annotations_api.go); nil: GET lists the computed ones only and
	// POST answers 404.
	Annotations Annotations

	// Cardinality serves /api/v1/appliance/cardinality (cardinality_api.go);
	// nil answers 404.
	Cardinality CardinalityReporter

	// ConfigYAML returns the running config with secrets redacted.
	ConfigYAML func() string
	// PromConfig returns the Prometheus part of the running config.
	PromConfig func() promconfig.Config
	// RangeCache, when set, answers /api/v1/query_range from the
	// points of earlier answers (package ui/rangecache); nil: off.
	RangeCache *rangecache.Cache
	// Reload re-reads the config file; a bad file leaves the old config
	// running and the error is returned to the caller of /-/reload.
	Reload func() error

	LookbackDelta    time.Duration
	StorageRetention string
	Flags            map[string]string
	// BuildInfo is /api/v1/status/buildinfo: its Version is the
	// Prometheus version whose API the appliance serves (clients such as
	// Grafana read it); ApplianceVersion is added as applianceVersion.
	BuildInfo        apiv1.PrometheusVersion
	ApplianceVersion string

	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer

	// BasicAuthUsers maps user names to bcrypt hashes; empty disables auth.
	BasicAuthUsers map[string]string
	// TLS, when set, serves HTTPS.
	TLS *tls.Config
	// CertFile and KeyFile, with TLS, are re-read when they change, so
	// a renewed certificate is served without a restart; empty serves
	// TLS.Certificates as they are.
	CertFile, KeyFile string
	// MaxRequestBodyBytes bounds ingest bodies (default 32 MiB).
	MaxRequestBodyBytes int64
	// OtherBodyBytes bounds the bodies of other requests (default
	// DefaultOtherBodyBytes).
	OtherBodyBytes int64
	// MaxConcurrentImports bounds the imports decoded at once (default
	// DefaultMaxConcurrentImports).
	MaxConcurrentImports int

	// MaxConnections caps the connections held open (default 512); it is
	// lowered to half of FileLimit, so that sockets never take the file
	// descriptors the storage needs.
	MaxConnections int
	// FileLimit is the process's limit of open files (RaiseFileLimit);
	// 0 for unknown.
	FileLimit uint64
	// ReadTimeout, WriteTimeout and IdleTimeout are http.Server's
	// (defaults DefaultReadTimeout, DefaultWriteTimeout,
	// DefaultIdleTimeout).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration

	// DashboardsDir holds user dashboards (ui.dashboards_dir); "" for none.
	DashboardsDir string
	// ProbeTargets lists the probes, so that services name theirs; nil
	// for none.
	ProbeTargets func() []ProbeTarget
	// Histograms stores pushed native histograms as classic series
	// (internal/histconv); nil builds one registered on Registerer.
	Histograms *histconv.Converter
	// Exemplars keeps pushed exemplars and answers
	// /api/v1/query_exemplars; nil keeps none (the answer is []).
	Exemplars *exemplars.Storage
	// LabelLimits returns the label limits pushed series must keep (the
	// global section's label_limit, label_name_length_limit,
	// label_value_length_limit); nil means none.
	LabelLimits func() LabelLimits
	// Pipelines lists the config's pipelines (package pipeline) for
	// /api/v1/appliance/pipelines; nil for none.
	Pipelines func() []pipeline.Pipeline
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
	limiter  *connLimiter
	started  time.Time
	handler  http.Handler

	auth *authenticator
	tls  atomic.Pointer[tlsState]
	// evicted counts idle connections closed to make room.
	evicted prometheus.Counter

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
	if opts.OtherBodyBytes <= 0 {
		opts.OtherBodyBytes = DefaultOtherBodyBytes
	}
	if opts.MaxConcurrentImports <= 0 {
		opts.MaxConcurrentImports = DefaultMaxConcurrentImports
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = 512
	}
	opts.ReadTimeout = cmp.Or(opts.ReadTimeout, DefaultReadTimeout)
	opts.WriteTimeout = cmp.Or(opts.WriteTimeout, DefaultWriteTimeout)
	opts.IdleTimeout = cmp.Or(opts.IdleTimeout, DefaultIdleTimeout)
	if opts.Histograms == nil {
		hopts := histconv.DefaultOptions()
		hopts.Registerer = opts.Registerer
		opts.Histograms = histconv.New(hopts)
	}
	s := &Server{opts: opts, logger: opts.Logger, started: time.Now(), auth: newAuthenticator(), ingest: newIngestMetrics(opts.Registerer)}
	next, err := s.PrepareWeb(WebSettings{BasicAuthUsers: opts.BasicAuthUsers, TLS: opts.TLS, CertFile: opts.CertFile, KeyFile: opts.KeyFile})
	if err != nil {
		return nil, err
	}
	s.ApplyWeb(next)
	s.evicted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "http_idle_connections_closed_total",
		Help: "Idle HTTP connections closed to make room under web.max_connections.",
	})
	connCap := connectionCap(opts.MaxConnections, opts.FileLimit)
	capGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "http_max_connections",
		Help: "The HTTP connections held open at most: web.max_connections, lowered to half the open files limit.",
	})
	capGauge.Set(float64(connCap))
	if err := errors.Join(opts.Registerer.Register(s.evicted), opts.Registerer.Register(capGauge)); err != nil {
		return nil, fmt.Errorf("register web metrics: %w", err)
	}
	if connCap < opts.MaxConnections {
		s.logger.Warn("web.max_connections lowered to half the open files limit, so that connections never take the files the storage needs",
			"max_connections", opts.MaxConnections, "open_files_limit", opts.FileLimit, "cap", connCap)
	}
	s.echo = s.routes()
	s.handler = s.bounded(headAsGet(s.echo))
	if opts.ListenAddress != "" {
		ln, err := net.Listen("tcp", opts.ListenAddress)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", opts.ListenAddress, err)
		}
		s.limiter = newConnLimiter(ln, connCap, s.evicted.Inc)
		s.listener = s.limiter
		if opts.TLS != nil {
			s.listener = tls.NewListener(s.limiter, &tls.Config{GetConfigForClient: s.tlsForClient})
		}
	}
	return s, nil
}

// connectionCap is the connections served at once: the configured cap,
// but at most half the open files limit, leaving the other half to the
// storage, scrapes and notifications.
func connectionCap(configured int, fileLimit uint64) int {
	if fileLimit == 0 {
		return configured
	}
	return max(1, min(configured, int(fileLimit/2)))
}

// Addr is the bound address (useful with port 0).
func (s *Server) Addr() net.Addr {
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// Handler returns the whole HTTP handler (for tests).
func (s *Server) Handler() http.Handler { return s.handler }

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
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		ConnState:         s.limiter.connState,
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

// headAsGet answers HEAD wherever GET is served, as Prometheus does for
// uptime checkers: the request is routed as GET, and net/http, whose
// response still belongs to the original HEAD request, drops the body.
func headAsGet(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			r = r.Clone(r.Context())
			r.Method = http.MethodGet
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.errorHandler
	// Always in place: a reload may turn auth on.
	e.Use(s.auth.middleware)

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
	s.mountFederation(e)
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
