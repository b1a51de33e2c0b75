package ui

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
)

// This file is the API side of the dashboard's box selector (hub mode):
// GET /api/v1/appliance/boxes lists the boxes, and extra_label narrows
// the Prometheus API's answers to one of them.

// queryable is what the API reads besides PromQL: Options.Queryable
// (the remote API in hub mode), else the storage.
func (s *Server) queryable() storage.SampleAndChunkQueryable {
	if s.opts.Queryable != nil {
		return s.opts.Queryable
	}
	return s.opts.Storage
}

// boxesAnswer is GET /api/v1/appliance/boxes: the labels that identify a
// box and the values of each in [from, to] (default the last 6h); no
// labels outside hub mode.
type boxesAnswer struct {
	Labels []string            `json:"labels"`
	Values map[string][]string `json:"values"`
}

func (a *applianceAPI) boxes(c echo.Context) error {
	out := boxesAnswer{Labels: []string{}, Values: map[string][]string{}}
	if a.s.opts.BoxLabels != nil {
		out.Labels = append(out.Labels, a.s.opts.BoxLabels()...)
	}
	if len(out.Labels) == 0 {
		return apiSuccess(c, out)
	}
	from, to, err := timeRange(c, defaultDiscoverWindow)
	if err != nil {
		return apiError(c, http.StatusBadRequest, "bad_data", err.Error())
	}
	q, err := a.s.queryable().Querier(from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return apiError(c, http.StatusInternalServerError, "internal", err.Error())
	}
	defer q.Close()
	for _, l := range out.Labels {
		vals, _, err := q.LabelValues(c.Request().Context(), l, nil)
		if err != nil {
			return apiError(c, http.StatusServiceUnavailable, "unavailable", err.Error())
		}
		if vals == nil {
			vals = []string{}
		}
		out.Values[l] = vals
	}
	return apiSuccess(c, out)
}

// extraLabels implements VictoriaMetrics' extra_label=<name>=<value>
// parameter on the PromQL, series, labels and label values endpoints:
// every selector of query and match[] gets the matcher name="value" (in
// place of any matcher of that name, as prom-label-proxy enforces a
// label), and labels and label values without match[] get
// match[]={name="value"}. The dashboard's box selector sends it.
func extraLabels(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, "/api/v1")
		valuesPath := strings.HasPrefix(p, "/label/") && strings.HasSuffix(p, "/values")
		if p != "/query" && p != "/query_range" && p != "/series" && p != "/labels" && !valuesPath {
			next.ServeHTTP(w, r)
			return
		}
		if err := r.ParseForm(); err != nil || len(r.Form["extra_label"]) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		ms, err := extraMatchers(r.Form["extra_label"])
		if err == nil {
			err = enforceForm(r, ms, p == "/labels" || valuesPath)
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(apiResponse{Status: "error", ErrorType: "bad_data", Error: err.Error()})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func extraMatchers(vals []string) ([]*labels.Matcher, error) {
	ms := make([]*labels.Matcher, 0, len(vals))
	for _, v := range vals {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			return nil, &badParam{"extra_label", v, "want name=value"}
		}
		m, err := labels.NewMatcher(labels.MatchEqual, name, value)
		if err != nil {
			return nil, &badParam{"extra_label", v, err.Error()}
		}
		ms = append(ms, m)
	}
	return ms, nil
}

type badParam struct{ name, value, why string }

func (e *badParam) Error() string {
	return "invalid parameter " + e.name + "=" + e.value + ": " + e.why
}

// enforceForm rewrites query and match[] of r's parsed form with ms.
func enforceForm(r *http.Request, ms []*labels.Matcher, matchAll bool) error {
	p := parser.NewParser(parser.Options{})
	if qs := r.Form.Get("query"); qs != "" {
		expr, err := p.ParseExpr(qs)
		if err != nil {
			// Left as is: Prometheus' handler answers the parse error.
			return nil
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				vs.LabelMatchers = enforce(vs.LabelMatchers, ms)
			}
			return nil
		})
		r.Form.Set("query", expr.String())
	}
	matches := r.Form["match[]"]
	for i, m := range matches {
		sel, err := p.ParseMetricSelector(m)
		if err != nil {
			return &badParam{"match[]", m, err.Error()}
		}
		matches[i] = (&parser.VectorSelector{LabelMatchers: enforce(sel, ms)}).String()
	}
	if len(matches) == 0 && matchAll {
		r.Form["match[]"] = []string{(&parser.VectorSelector{LabelMatchers: ms}).String()}
	}
	delete(r.Form, "extra_label")
	return nil
}

// enforce returns sel without matchers on the names of ms, plus ms.
func enforce(sel, ms []*labels.Matcher) []*labels.Matcher {
	out := make([]*labels.Matcher, 0, len(sel)+len(ms))
	for _, m := range sel {
		keep := true
		for _, e := range ms {
			if m.Name == e.Name {
				keep = false
			}
		}
		if keep {
			out = append(out, m)
		}
	}
	return append(out, ms...)
}
