package ui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/common/model"

	"github.com/aiserve/appliance/explain"
	"github.com/aiserve/appliance/slo"
	"github.com/aiserve/appliance/ui/dashboard"
)

// The "why is it slow" endpoints (package explain), beside the
// dashboard's:
//
//	GET /api/v1/appliance/breakdown?job=&model=&instance=&from=&to=&step=
//	GET /api/v1/appliance/explain?job=&model=&instance=&at=&lookback=
//	GET /api/v1/appliance/compare?metric=&match=&label=&a=&b=&from=&to=
//	    or ...&a_from=&a_to=&b_from=&b_to= (two time windows)

// querier runs package explain's queries on the API's engine and storage.
func (a *applianceAPI) querier() slo.EngineSource {
	return slo.EngineSource{Engine: a.s.opts.Engine, Queryable: a.s.opts.Storage}
}

// mountExplain registers breakdown, explain and compare.
func (a *applianceAPI) mountExplain(e *echo.Echo, guard echo.MiddlewareFunc) {
	e.GET("/api/v1/appliance/breakdown", a.breakdown, guard)
	e.GET("/api/v1/appliance/explain", a.explain, guard)
	e.GET("/api/v1/appliance/compare", a.compare, guard)
}

// service finds the page's service (job and model) among those stored in
// [from, to]; the error is for the client.
func (a *applianceAPI) service(c echo.Context, from, to time.Time) (*dashboard.Inventory, *dashboard.Service, error) {
	var probes []dashboard.ProbeTarget
	if a.s.opts.ProbeTargets != nil {
		probes = a.s.opts.ProbeTargets()
	}
	inv, err := a.catalog.Discover(c.Request().Context(), a.s.queryable(), from.UnixMilli(), to.UnixMilli(), probes)
	if err != nil {
		return nil, nil, err
	}
	job, model := c.QueryParam("job"), c.QueryParam("model")
	if job == "" {
		return nil, nil, errors.New("job is required (a service of /api/v1/appliance/services)")
	}
	for _, s := range inv.Services {
		if s.Job == job && s.Model == model {
			return inv, s, nil
		}
	}
	return nil, nil, fmt.Errorf("no service job=%q model=%q stored between %s and %s", job, model, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
}

// durParam reads a duration parameter: Prometheus syntax (5m) or seconds.
func durParam(c echo.Context, name string, def time.Duration) (time.Duration, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: want a positive duration (5m) or seconds, got %q", name, v)
	}
	return d, nil
}

// timeParam reads a time parameter: Unix seconds or RFC 3339; zero when
// absent.
func timeParam(c echo.Context, name string) (time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return time.Time{}, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return time.UnixMilli(int64(f * 1000)), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: want Unix seconds or RFC 3339, got %q", name, v)
	}
	return t, nil
}

func (a *applianceAPI) breakdown(c echo.Context) error {
	from, to, err := timeRange(c, time.Hour)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	step, err := durParam(c, "step", 0)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	inv, svc, err := a.service(c, from, to)
	if err != nil {
		return apiError(c, http.StatusNotFound, "not_found", err.Error())
	}
	spec := a.catalog.ExplainSpec(inv, svc, c.QueryParam("instance"))
	r, err := explain.Breakdown(c.Request().Context(), a.querier(), spec, explain.BreakdownOptions{From: from, To: to, Step: step})
	if err != nil {
		return apiError(c, http.StatusUnprocessableEntity, "execution", err.Error())
	}
	return apiSuccess(c, r)
}

func (a *applianceAPI) explain(c echo.Context) error {
	now := time.Now()
	if t, err := timeParam(c, "now"); err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	} else if !t.IsZero() {
		now = t
	}
	at, err := timeParam(c, "at")
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	lookback, err := durParam(c, "lookback", time.Hour)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	o := explain.Options{Now: now, At: at, Lookback: lookback}
	if !at.IsZero() && at.After(now) {
		return apiError(c, http.StatusBadRequest, "bad_data", "at must not be after now")
	}
	inv, svc, err := a.service(c, now.Add(-lookback-10*time.Minute), now)
	if err != nil {
		return apiError(c, http.StatusNotFound, "not_found", err.Error())
	}
	spec := a.catalog.ExplainSpec(inv, svc, c.QueryParam("instance"))
	r, err := explain.Explain(c.Request().Context(), a.querier(), spec, o)
	if err != nil {
		return apiError(c, http.StatusUnprocessableEntity, "execution", err.Error())
	}
	return apiSuccess(c, r)
}

// compare: version mode (label, a, b over from..to) or windows mode
// (a_from..a_to against b_from..b_to); match narrows both sides.
func (a *applianceAPI) compare(c echo.Context) error {
	metric := c.QueryParam("metric")
	match := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(c.QueryParam("match")), "{"), "}"))
	with := func(extra string) string {
		switch {
		case match == "":
			return extra
		case extra == "":
			return match
		}
		return match + "," + extra
	}
	var sa, sb explain.Side
	if label := c.QueryParam("label"); label != "" {
		if !model.LegacyValidation.IsValidLabelName(label) {
			return apiError(c, http.StatusBadRequest, "bad_data", "label: not a label name: "+strconv.Quote(label))
		}
		from, to, err := timeRange(c, time.Hour)
		if err != nil {
			return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
		}
		va, vb := c.QueryParam("a"), c.QueryParam("b")
		if va == "" || vb == "" {
			return apiError(c, http.StatusBadRequest, "bad_data", "a and b: the two values of "+label+" to compare are required")
		}
		sa = explain.Side{Name: label + "=" + va, Matchers: with(label + "=" + strconv.Quote(va)), From: from, To: to}
		sb = explain.Side{Name: label + "=" + vb, Matchers: with(label + "=" + strconv.Quote(vb)), From: from, To: to}
	} else {
		var ts [4]time.Time
		for i, n := range []string{"a_from", "a_to", "b_from", "b_to"} {
			t, err := timeParam(c, n)
			if err != nil {
				return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
			}
			if t.IsZero() {
				return apiError(c, http.StatusBadRequest, "bad_data", "want label, a and b (two versions) or a_from, a_to, b_from and b_to (two windows)")
			}
			ts[i] = t
		}
		f := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }
		sa = explain.Side{Name: f(ts[0]) + " – " + f(ts[1]), Matchers: match, From: ts[0], To: ts[1]}
		sb = explain.Side{Name: f(ts[2]) + " – " + f(ts[3]), Matchers: match, From: ts[2], To: ts[3]}
	}
	r, err := explain.Compare(c.Request().Context(), a.querier(), metric, sa, sb)
	switch {
	case errors.Is(err, explain.ErrBadMetric):
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	case err != nil:
		return apiError(c, http.StatusUnprocessableEntity, "execution", err.Error())
	}
	return apiSuccess(c, r)
}
