package ui

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/aiserve/appliance/explain"
	"github.com/aiserve/appliance/pipeline"
)

// The pipelines of the config (package pipeline), for /pipeline/<name>:
//
//	GET /api/v1/appliance/pipelines
//	GET /api/v1/appliance/pipelines/<name>?from=&to=&step=

// mountPipelines registers the pipelines' endpoints.
func (a *applianceAPI) mountPipelines(e *echo.Echo, guard echo.MiddlewareFunc) {
	e.GET("/api/v1/appliance/pipelines", a.pipelines, guard)
	e.GET("/api/v1/appliance/pipelines/:name", a.pipeline, guard)
}

func (a *applianceAPI) pipelineList() []pipeline.Pipeline {
	if a.s.opts.Pipelines == nil {
		return []pipeline.Pipeline{}
	}
	return a.s.opts.Pipelines()
}

func (a *applianceAPI) pipelines(c echo.Context) error {
	return apiSuccess(c, a.pipelineList())
}

func (a *applianceAPI) pipeline(c echo.Context) error {
	name := c.Param("name")
	for _, p := range a.pipelineList() {
		if p.Name != name {
			continue
		}
		from, to, err := timeRange(c, time.Hour)
		if err != nil {
			return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
		}
		step, err := durParam(c, "step", 0)
		if err != nil {
			return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
		}
		r, err := pipeline.Read(c.Request().Context(), a.querier(), p, explain.BreakdownOptions{From: from, To: to, Step: step})
		if err != nil {
			return apiError(c, http.StatusUnprocessableEntity, "execution", err.Error())
		}
		return apiSuccess(c, r)
	}
	return apiError(c, http.StatusNotFound, "not_found", "no pipeline "+strconv.Quote(name)+" in the config's pipelines")
}
