package ui

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/route"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/features"
	"github.com/prometheus/prometheus/util/notifications"
	apiv1 "github.com/prometheus/prometheus/web/api/v1"
)

// mountPrometheusAPI serves Prometheus' own API handler under /api/v1 and
// the appliance's replacements next to it; echo's router prefers the exact
// routes over the /api/v1/* wildcard.
func (s *Server) mountPrometheusAPI(e *echo.Echo) {
	o := s.opts
	promCfg := o.PromConfig
	if promCfg == nil {
		promCfg = func() promconfig.Config { return promconfig.DefaultConfig }
	}
	var rr apiv1.RulesRetriever = noRules{}
	if o.Rules != nil {
		rr = o.Rules
	}
	host, _ := os.Hostname()
	api := apiv1.NewAPI(
		o.Engine,
		s.queryable(),
		ingestAppendable{s}, // remote write: fsync, label limits, 400/503 (ingest.go)
		s.exemplarQueryable(),
		func(context.Context) apiv1.ScrapePoolsRetriever { return o.Targets },
		func(context.Context) apiv1.TargetRetriever { return o.Targets },
		func(context.Context) apiv1.AlertmanagerRetriever { return noAlertmanagers{} },
		promCfg,
		o.Flags,
		apiv1.GlobalURLOptions{ListenAddress: o.ListenAddress, Host: o.ListenAddress, Scheme: "http"},
		s.readyOnly,
		o.Storage,
		"",    // dbDir: only the admin snapshot uses it
		false, // admin API off: deletion and snapshots are not offered
		false, // search API off
		0,
		s.logger.With("component", "api"),
		func(context.Context) apiv1.RulesRetriever { return rr },
		0, 1, 1048576, // remote read: sample limit, concurrency, frame size
		false, // not an agent
		nil,   // no CORS origin
		func() (apiv1.RuntimeInfo, error) {
			return apiv1.RuntimeInfo{
				StartTime:           s.started,
				Hostname:            host,
				ServerTime:          time.Now().UTC(),
				ReloadConfigSuccess: true,
				GoroutineCount:      runtime.NumGoroutine(),
				GOMAXPROCS:          runtime.GOMAXPROCS(0),
				GOGC:                os.Getenv("GOGC"),
				GODEBUG:             os.Getenv("GODEBUG"),
				StorageRetention:    o.StorageRetention,
			}, nil
		},
		&o.BuildInfo,
		func() []notifications.Notification { return nil },
		func() (<-chan notifications.Notification, func(), bool) { return nil, func() {}, false },
		apiGatherer(o),
		o.Registerer,
		nil,
		true, // remote write receiver on
		remoteapi.MessageTypes{remoteapi.WriteV1MessageType, remoteapi.WriteV2MessageType},
		false, false, false, // OTLP off
		o.LookbackDelta,
		false, // type-and-unit labels off
		true,  // keep metadata that remote write sends
		nil,
		apiFeatures(engineParser(o.Engine)), // /api/v1/features
		apiv1.OpenAPIOptions{},
		engineParser(o.Engine), // with the engine's bounds on query text
		false,
		0,
	)
	api.ClearCodecs()
	api.InstallCodec(matrixCodec{}) // JSONCodec's bytes, matrices written faster (jsoncodec.go)
	r := route.New()
	api.Register(r)
	var prom http.Handler = http.StripPrefix("/api/v1", r)
	if o.Rules != nil {
		prom = rulesExtensions(o.Rules)(prom)
	}
	if o.Tiers != nil {
		prom = tiersMiddleware(prom)
	}
	if o.RangeCache != nil {
		prom = o.RangeCache.Handler(prom) // query_range from earlier answers (package ui/rangecache)
	}
	prom = extraLabels(prom) // extra_label=name=value (extralabel.go)
	// Gzip once, at its fastest level, outside every layer that amends
	// the JSON (compress.go).
	compressed := compressAPI(prom)
	e.Any("/api/v1/*", echo.WrapHandler(compressed))
	e.GET("/api/v1/targets", echo.WrapHandler(compressAPI(s.targetsWithRefusals(prom)))) // storage.max_series in lastError

	limit := s.limitBody
	e.POST("/api/v1/write", echo.WrapHandler(s.guardRemoteWrite(compressed)), s.ingestGate, limit)
	e.POST("/api/v1/import/prometheus", s.importPrometheus, s.ingestGate, limit, s.decodeBody)
	e.GET("/api/v1/status/config", s.statusConfig)
	e.GET("/api/v1/status/buildinfo", s.buildInfo)
	e.GET("/api/v1/metadata", s.metadata)
	// The dashboard's back-end, next to Prometheus' API (appliance_api.go).
	s.mountApplianceAPI(e)
}

// apiGatherer is what Prometheus' API reads its own figures from.
// /api/v1/status/tsdb takes headStats.chunkCount from the gauge
// prometheus_tsdb_head_chunks; the appliance has no head chunks, so it
// reports one open chunk per active series (what a Prometheus head holds),
// instead of the MinInt64 Prometheus prints when the gauge is missing.
func apiGatherer(o Options) prometheus.Gatherer {
	as, ok := o.Storage.(interface{ ActiveSeries() int })
	if !ok {
		return o.Gatherer
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "prometheus_tsdb_head_chunks",
		Help: "Open chunks: one per active series.",
	}, func() float64 { return float64(as.ActiveSeries()) }))
	return prometheus.Gatherers{o.Gatherer, reg}
}

// readyOnly refuses API calls with 503 until the appliance is ready.
func (s *Server) readyOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("Service Unavailable"))
			return
		}
		next(w, r)
	}
}

// limitBody bounds the request body; reading past the limit fails the
// handler's read, which answers 400 or 413 before writing anything.
func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > s.opts.MaxRequestBodyBytes {
			return apiError(c, http.StatusRequestEntityTooLarge, "bad_data",
				"request body of "+strconv.FormatInt(req.ContentLength, 10)+" bytes exceeds the limit of "+
					strconv.FormatInt(s.opts.MaxRequestBodyBytes, 10)+" bytes (web.max_request_body_bytes)")
		}
		req.Body = http.MaxBytesReader(c.Response(), req.Body, s.opts.MaxRequestBodyBytes)
		return next(c)
	}
}

// apiResponse is Prometheus' API envelope.
type apiResponse struct {
	Status    string `json:"status"`
	Data      any    `json:"data,omitempty"`
	ErrorType string `json:"errorType,omitempty"`
	Error     string `json:"error,omitempty"`
}

func apiError(c echo.Context, code int, typ, msg string) error {
	return c.JSON(code, apiResponse{Status: "error", ErrorType: typ, Error: msg})
}

func apiSuccess(c echo.Context, data any) error {
	return c.JSON(http.StatusOK, apiResponse{Status: "success", Data: data})
}

// buildInfo is Prometheus' answer plus the appliance's own version; like
// Prometheus' API it answers 503 until the appliance is ready.
func (s *Server) buildInfo(c echo.Context) error {
	if !s.ready.Load() {
		return c.String(http.StatusServiceUnavailable, "Service Unavailable")
	}
	b := s.opts.BuildInfo
	return apiSuccess(c, struct {
		apiv1.PrometheusVersion
		ApplianceVersion string `json:"applianceVersion,omitempty"`
	}{b, s.opts.ApplianceVersion})
}

// apiFeatures is what /api/v1/features lists, in Prometheus 3's
// categories: what this server's API, PromQL engine (query.New's
// settings and the parser's functions) and rules manager offer.
func apiFeatures(p parser.Parser) features.Collector {
	r := features.NewRegistry()
	r.Enable(features.Prometheus, "server_mode")
	r.Disable(features.Prometheus, "agent_mode")
	r.Disable(features.API, "admin")
	r.Enable(features.API, "lifecycle") // POST /-/reload
	r.Enable(features.API, "remote_write_receiver")
	r.Disable(features.API, "otlp_write_receiver")
	for _, f := range []string{"label_values_match", "query_warnings", "query_stats", "time_range_series", "time_range_labels", "exclude_alerts"} {
		r.Enable(features.API, f)
	}
	for f, on := range map[string]bool{"at_modifier": true, "negative_offset": true, "per_step_stats": true, "delayed_name_removal": false, "type_and_unit_labels": false, "per_query_lookback_delta": true, "subqueries": true} {
		r.Set(features.PromQL, f, on)
	}
	p.RegisterFeatures(r)
	r.Enable(features.Rules, "query_offset")
	r.Enable(features.Rules, "keep_firing_for")
	r.Disable(features.Rules, "concurrent_rule_eval")
	return r
}

func (s *Server) statusConfig(c echo.Context) error {
	y := ""
	if s.opts.ConfigYAML != nil {
		y = s.opts.ConfigYAML()
	}
	return apiSuccess(c, map[string]string{"yaml": y})
}

func (s *Server) metadata(c echo.Context) error {
	parse := func(name string) (int, bool) {
		v := c.FormValue(name)
		if v == "" {
			return -1, true
		}
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	limit, ok := parse("limit")
	if !ok {
		return apiError(c, http.StatusBadRequest, "bad_data", "limit must be a number")
	}
	perMetric, ok := parse("limit_per_metric")
	if !ok {
		return apiError(c, http.StatusBadRequest, "bad_data", "limit_per_metric must be a number")
	}
	md := s.opts.Storage.Metadata(c.FormValue("metric"), limit, perMetric)
	if md == nil {
		md = map[string][]metadata.Metadata{} // Prometheus answers {}, never null
	}
	return apiSuccess(c, md)
}

// exemplarQueryable answers /api/v1/query_exemplars: the exemplar
// storage, or none, answered as [] (Prometheus never answers null).
func (s *Server) exemplarQueryable() storage.ExemplarQueryable {
	if s.opts.Exemplars != nil {
		return s.opts.Exemplars
	}
	return noExemplars{}
}

type noExemplars struct{}

func (noExemplars) ExemplarQuerier(context.Context) (storage.ExemplarQuerier, error) {
	return noExemplars{}, nil
}

func (noExemplars) Select(int64, int64, ...[]*labels.Matcher) ([]exemplar.QueryResult, error) {
	return []exemplar.QueryResult{}, nil
}

type noAlertmanagers struct{}

func (noAlertmanagers) Alertmanagers() []*url.URL        { return nil }
func (noAlertmanagers) DroppedAlertmanagers() []*url.URL { return nil }

type noRules struct{}

func (noRules) RuleGroups() []*rules.Group           { return nil }
func (noRules) AlertingRules() []*rules.AlertingRule { return nil }
