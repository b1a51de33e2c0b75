package ui

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/aiserve/appliance/ui/dashboard"
)

// The dashboard's back-end (package dashboard): services, dashboard
// definitions with the panels storage fills, and chart annotations, in
// Prometheus' envelope. Options.DashboardsDir adds user dashboards;
// Options.ProbeTargets lets services name their probes.

// defaultDiscoverWindow is the range the metric names and services are
// read from when the request names none.
const defaultDiscoverWindow = 6 * time.Hour

// ProbeTarget is what a service's probes are matched by (Options.ProbeTargets).
type ProbeTarget = dashboard.ProbeTarget

// applianceAPI serves the dashboard's endpoints.
type applianceAPI struct {
	s       *Server
	catalog *dashboard.Catalog
}

// mountApplianceAPI registers the dashboard's endpoints. The embedded
// definitions are checked by the package's tests; should they not load,
// every endpoint answers 500 with the reason.
func (s *Server) mountApplianceAPI(e *echo.Echo) {
	cat, err := dashboard.NewCatalog()
	a := &applianceAPI{s: s, catalog: cat}
	guard := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err != nil {
				return apiError(c, http.StatusInternalServerError, "internal", "embedded dashboards: "+err.Error())
			}
			if !s.ready.Load() {
				return apiError(c, http.StatusServiceUnavailable, "unavailable", "the appliance is not ready")
			}
			return next(c)
		}
	}
	e.GET("/api/v1/appliance/services", a.services, guard)
	e.GET("/api/v1/appliance/boxes", a.boxes, guard)
	e.GET("/api/v1/appliance/dashboards", a.dashboards, guard)
	e.GET("/api/v1/appliance/dashboards/:id", a.dashboard, guard)
	e.GET("/api/v1/appliance/annotations", a.listAnnotations, guard)
	e.POST("/api/v1/appliance/annotations", a.postAnnotation, guard)
	e.GET("/api/v1/appliance/digest/preview", s.digestPreview)
	e.GET("/api/v1/appliance/cardinality", a.cardinality, guard)
	a.mountExplain(e, guard)
	a.mountPipelines(e, guard)
	a.mountThermal(e, guard)
}

// apiWarnings is the envelope with Prometheus' warnings field.
type apiWarnings struct {
	Status   string   `json:"status"`
	Data     any      `json:"data"`
	Warnings []string `json:"warnings,omitempty"`
}

// timeRange reads from/to (Unix seconds or RFC 3339; start/end also
// accepted) with to defaulting to now and from to to-def.
func timeRange(c echo.Context, def time.Duration) (time.Time, time.Time, error) {
	parse := func(names ...string) (time.Time, bool, error) {
		for _, n := range names {
			v := c.QueryParam(n)
			if v == "" {
				continue
			}
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				sec, frac := math.Modf(f)
				return time.Unix(int64(sec), int64(frac*1e9)), true, nil
			}
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return time.Time{}, false, errors.New(n + ": want Unix seconds or RFC 3339, got " + strconv.Quote(v))
			}
			return t, true, nil
		}
		return time.Time{}, false, nil
	}
	to, ok, err := parse("to", "end")
	if err != nil {
		return to, to, err
	}
	if !ok {
		to = time.Now()
	}
	from, ok, err := parse("from", "start")
	if err != nil {
		return from, to, err
	}
	if !ok {
		from = to.Add(-def)
	}
	if !from.Before(to) {
		return from, to, errors.New("from must be before to")
	}
	return from, to, nil
}

func (a *applianceAPI) inventory(c echo.Context) (*dashboard.Inventory, error) {
	from, to, err := timeRange(c, defaultDiscoverWindow)
	if err != nil {
		return nil, err
	}
	var probes []dashboard.ProbeTarget
	if a.s.opts.ProbeTargets != nil {
		probes = a.s.opts.ProbeTargets()
	}
	return a.catalog.Discover(c.Request().Context(), a.s.queryable(), from.UnixMilli(), to.UnixMilli(), probes)
}

func (a *applianceAPI) services(c echo.Context) error {
	inv, err := a.inventory(c)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	out := inv.Services
	if out == nil {
		out = []*dashboard.Service{}
	}
	return apiSuccess(c, out)
}

type dashboardInfo struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Source string `json:"source"`
}

// definitions returns every dashboard and, as warnings, the user files
// that do not load (each error names its file); they are logged too.
func (a *applianceAPI) definitions() ([]*dashboard.Definition, []string) {
	defs, errs := a.catalog.WithDir(a.s.opts.DashboardsDir)
	var warnings []string
	for _, err := range errs {
		a.s.logger.Warn("user dashboard not loaded", "err", err)
		warnings = append(warnings, err.Error())
	}
	return defs, warnings
}

func (a *applianceAPI) dashboards(c echo.Context) error {
	defs, warnings := a.definitions()
	out := make([]dashboardInfo, 0, len(defs))
	for _, d := range defs {
		out = append(out, dashboardInfo{ID: d.ID, Title: d.Title, Source: d.Source})
	}
	return c.JSON(http.StatusOK, apiWarnings{Status: "success", Data: out, Warnings: warnings})
}

func (a *applianceAPI) dashboard(c echo.Context) error {
	defs, warnings := a.definitions()
	var def *dashboard.Definition
	for _, d := range defs {
		if d.ID == c.Param("id") {
			def = d
		}
	}
	if def == nil {
		msg := "no dashboard " + strconv.Quote(c.Param("id"))
		if len(warnings) > 0 {
			msg += " (some user dashboards did not load: see /api/v1/appliance/dashboards)"
		}
		return apiError(c, http.StatusNotFound, "not_found", msg)
	}
	inv, err := a.inventory(c)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	f := dashboard.Filter{Job: c.QueryParam("job"), Model: c.QueryParam("model"), Instance: c.QueryParam("instance")}
	return c.JSON(http.StatusOK, apiWarnings{Status: "success", Data: a.catalog.Resolve(def, inv, f), Warnings: warnings})
}
