package ui

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/common/model"

	"github.com/aiserve/appliance/thermal"
)

// The temperature-vs-latency overlay of /hardware (package thermal):
//
//	GET /api/v1/appliance/thermal?from=&to=&step=&job=&model=&metric=&match=&frames=
//
// The latency is the P95 of metric (a histogram's base name, narrowed by
// match) when given, else the request time of the service job/model,
// else of the first model service stored in the range, else of the
// per-frame histogram. frames names the
// per-frame histogram of a detection-style workload; without it, the
// first stored histogram whose name holds "frame" is taken.

func (a *applianceAPI) mountThermal(e *echo.Echo, guard echo.MiddlewareFunc) {
	e.GET("/api/v1/appliance/thermal", a.thermal, guard)
}

func (a *applianceAPI) thermal(c echo.Context) error {
	from, to, err := timeRange(c, time.Hour)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	step, err := durParam(c, "step", 0)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	var probes []ProbeTarget
	if a.s.opts.ProbeTargets != nil {
		probes = a.s.opts.ProbeTargets()
	}
	inv, err := a.catalog.Discover(c.Request().Context(), a.s.opts.Storage, from.UnixMilli(), to.UnixMilli(), probes)
	if err != nil {
		return apiError(c, http.StatusUnprocessableEntity, "execution", err.Error())
	}
	match := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(c.QueryParam("match")), "{"), "}"))
	var spec thermal.Spec
	if m := strings.TrimSuffix(c.QueryParam("metric"), "_bucket"); m != "" {
		if !model.LegacyValidation.IsValidMetricName(m) {
			return apiError(c, http.StatusBadRequest, "bad_data", "metric: want a histogram's base name, got "+m)
		}
		spec.Latency = &thermal.Latency{Name: m + " P95", P95: "histogram_quantile(0.95, sum by (le) (rate(" + m + "_bucket{" + match + "}[$__window])))"}
	} else {
		job, mdl := c.QueryParam("job"), c.QueryParam("model")
		svcs := slices.Clone(inv.Services)
		sort.SliceStable(svcs, func(i, j int) bool { return svcs[i].Engine != "generic" && svcs[j].Engine == "generic" })
		for _, s := range svcs {
			if job != "" && (s.Job != job || s.Model != mdl) {
				continue
			}
			es := a.catalog.ExplainSpec(inv, s, c.QueryParam("instance"))
			if es.Total != nil && es.Total.P95 != "" {
				spec.Latency = &thermal.Latency{Name: s.ID() + " P95", P95: es.Total.P95}
				break
			}
		}
	}
	if f := strings.TrimSuffix(c.QueryParam("frames"), "_bucket"); f != "" {
		if !model.LegacyValidation.IsValidMetricName(f) {
			return apiError(c, http.StatusBadRequest, "bad_data", "frames: want a histogram's base name, got "+f)
		}
		spec.Frames = &thermal.Frames{Metric: f, Matchers: match}
	} else {
		var names []string
		for n := range inv.Names {
			if base, ok := strings.CutSuffix(n, "_bucket"); ok && strings.Contains(base, "frame") {
				names = append(names, base)
			}
		}
		sort.Strings(names)
		if len(names) > 0 {
			spec.Frames = &thermal.Frames{Metric: names[0]}
		}
	}
	if f := spec.Frames; spec.Latency == nil && f != nil {
		// A detector with no model server in front: its per-frame
		// histogram is the inference time.
		spec.Latency = &thermal.Latency{Name: f.Metric + " P95", P95: "histogram_quantile(0.95, sum by (le) (rate(" + f.Metric + "_bucket{" + f.Matchers + "}[$__window])))"}
	}
	r, err := thermal.Overlay(c.Request().Context(), a.querier(), spec, thermal.Options{From: from, To: to, Step: step})
	if err != nil {
		return apiError(c, http.StatusUnprocessableEntity, "execution", err.Error())
	}
	return apiSuccess(c, r)
}
