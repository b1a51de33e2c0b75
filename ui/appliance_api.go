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

func (s *Server) mountApplianceAPI(e *echo.Echo) error {
	cat, err := dashboard.NewCatalog()
	if err != nil {
		return err
	}
	s.catalog = cat
	ready := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !s.ready.Load() {
				return apiError(c, http.StatusServiceUnavailable, "unavailable", "the appliance is not ready")
			}
			return next(c)
		}
	}
	e.GET("/api/v1/appliance/services", s.applianceServices, ready)
	e.GET("/api/v1/appliance/dashboards", s.applianceDashboards, ready)
	e.GET("/api/v1/appliance/dashboards/:id", s.applianceDashboard, ready)
	e.GET("/api/v1/appliance/annotations", s.applianceAnnotations, ready)
	return nil
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

func (s *Server) inventory(c echo.Context) (*dashboard.Inventory, error) {
	from, to, err := timeRange(c, defaultDiscoverWindow)
	if err != nil {
		return nil, err
	}
	var probes []dashboard.ProbeTarget
	if s.opts.ProbeTargets != nil {
		probes = s.opts.ProbeTargets()
	}
	return s.catalog.Discover(c.Request().Context(), s.opts.Storage, from.UnixMilli(), to.UnixMilli(), probes)
}

func (s *Server) applianceServices(c echo.Context) error {
	inv, err := s.inventory(c)
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
func (s *Server) definitions() ([]*dashboard.Definition, []string) {
	defs, errs := s.catalog.WithDir(s.opts.DashboardsDir)
	var warnings []string
	for _, err := range errs {
		s.logger.Warn("user dashboard not loaded", "err", err)
		warnings = append(warnings, err.Error())
	}
	return defs, warnings
}

func (s *Server) applianceDashboards(c echo.Context) error {
	defs, warnings := s.definitions()
	out := make([]dashboardInfo, 0, len(defs))
	for _, d := range defs {
		out = append(out, dashboardInfo{ID: d.ID, Title: d.Title, Source: d.Source})
	}
	return c.JSON(http.StatusOK, apiWarnings{Status: "success", Data: out, Warnings: warnings})
}

func (s *Server) applianceDashboard(c echo.Context) error {
	defs, warnings := s.definitions()
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
	inv, err := s.inventory(c)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	f := dashboard.Filter{Job: c.QueryParam("job"), Model: c.QueryParam("model"), Instance: c.QueryParam("instance")}
	return c.JSON(http.StatusOK, apiWarnings{Status: "success", Data: s.catalog.Resolve(def, inv, f), Warnings: warnings})
}

func (s *Server) applianceAnnotations(c echo.Context) error {
	from, to, err := timeRange(c, time.Hour)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	out, err := dashboard.Annotations(c.Request().Context(), s.opts.Engine, s.opts.Storage, from, to)
	if err != nil {
		return apiError(c, http.StatusUnprocessableEntity, "execution", err.Error())
	}
	return apiSuccess(c, out)
}
