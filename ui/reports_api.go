package ui

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/aiserve/appliance/slo"
)

// Reports serves the weekly SLO reports: the archive, and any week on
// demand (slo.Reporter implements it).
type Reports interface {
	List() ([]slo.ArchivedReport, error)
	Report(ctx context.Context, week, format string) ([]byte, error)
	// Statuses lists every SLO now, sorted by budget left, for the /slo
	// page (GET /api/v1/appliance/slos).
	Statuses(ctx context.Context) ([]slo.Status, error)
	// SendNow sends a week's report to the scheduled receivers now
	// (POST /api/v1/appliance/reports/<week>/send).
	SendNow(ctx context.Context, week string) error
}

var reportTypes = map[string]string{
	slo.FormatHTML:     "text/html; charset=utf-8",
	slo.FormatMarkdown: "text/markdown; charset=utf-8",
	slo.FormatJSON:     "application/json",
}

// mountReports serves GET /api/v1/appliance/reports (the archive) and
// /api/v1/appliance/reports/<week>.<html|md|json>, also at
// /reports/<week>.<format> (the address the report's own links use).
func (s *Server) mountReports(e *echo.Echo) {
	rp := s.opts.Reports
	e.GET("/api/v1/appliance/reports", func(c echo.Context) error {
		if rp == nil {
			return c.JSONBlob(http.StatusOK, []byte(`{"status":"success","data":[]}`))
		}
		list, err := rp.List()
		if err != nil {
			writeAPIError(c.Response(), http.StatusInternalServerError, "internal", err.Error())
			return nil
		}
		b, err := slo.MarshalList(list)
		if err != nil {
			return err
		}
		return c.JSONBlob(http.StatusOK, b)
	})
	one := func(c echo.Context) error {
		week, format, ok := strings.Cut(c.Param("file"), ".")
		if !ok {
			writeAPIError(c.Response(), http.StatusNotFound, "not_found", "want <week>.html, <week>.md or <week>.json, e.g. 2026-W48.html")
			return nil
		}
		if rp == nil {
			writeAPIError(c.Response(), http.StatusNotFound, "not_found", "no slos are configured")
			return nil
		}
		b, err := rp.Report(c.Request().Context(), week, format)
		switch {
		case errors.Is(err, slo.ErrBadWeek), errors.Is(err, slo.ErrUnknownFormat):
			writeAPIError(c.Response(), http.StatusBadRequest, "bad_data", err.Error())
			return nil
		case err != nil:
			writeAPIError(c.Response(), http.StatusInternalServerError, "internal", err.Error())
			return nil
		}
		return c.Blob(http.StatusOK, reportTypes[format], b)
	}
	e.GET("/api/v1/appliance/reports/:file", one)
	e.GET("/reports/:file", one)
	e.POST("/api/v1/appliance/reports/:week/send", func(c echo.Context) error {
		if rp == nil {
			writeAPIError(c.Response(), http.StatusNotFound, "not_found", "no slos are configured")
			return nil
		}
		err := rp.SendNow(c.Request().Context(), c.Param("week"))
		switch {
		case errors.Is(err, slo.ErrBadWeek):
			writeAPIError(c.Response(), http.StatusBadRequest, "bad_data", err.Error())
			return nil
		case errors.Is(err, slo.ErrNoSchedule):
			writeAPIError(c.Response(), http.StatusUnprocessableEntity, "bad_data", err.Error()+"; add them to the config to send reports")
			return nil
		case err != nil:
			writeAPIError(c.Response(), http.StatusInternalServerError, "internal", err.Error())
			return nil
		}
		return c.JSONBlob(http.StatusAccepted, []byte(`{"status":"success"}`))
	})
	e.GET("/api/v1/appliance/slos", func(c echo.Context) error {
		var list []slo.Status
		if rp != nil {
			var err error
			if list, err = rp.Statuses(c.Request().Context()); err != nil {
				writeAPIError(c.Response(), http.StatusInternalServerError, "internal", err.Error())
				return nil
			}
		}
		if list == nil {
			list = []slo.Status{}
		}
		return c.JSON(http.StatusOK, map[string]any{"status": "success", "data": list})
	})
}
