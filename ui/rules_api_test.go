package ui

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	promrules "github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/rules/rulefile"
)

// testRules is one group of Prometheus' rules with the compiled forms of
// its alerting rules, as rules.Manager would hold them.
type testRules struct {
	group    *promrules.Group
	compiled map[string][]rulefile.Compiled
}

func (r testRules) RuleGroups() []*promrules.Group { return []*promrules.Group{r.group} }

func (r testRules) AlertingRules() []*promrules.AlertingRule {
	var out []*promrules.AlertingRule
	for _, rule := range r.group.Rules() {
		if ar, ok := rule.(*promrules.AlertingRule); ok {
			out = append(out, ar)
		}
	}
	return out
}

func (r testRules) CompiledRules(file string) []rulefile.Compiled { return r.compiled[file] }

// TestRulesExtensions: /api/v1/rules and /api/v1/alerts are Prometheus'
// answers plus the appliance's fields, added from CompiledRules.
func TestRulesExtensions(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	compiledExpr := `count by (job) (up == 0) >= 2`
	expr, err := p.ParseExpr(compiledExpr)
	require.NoError(t, err)
	slow := promrules.NewAlertingRule("TargetsDown", expr, 0, 0,
		labels.FromStrings("severity", "P1"),
		labels.FromStrings(rulefile.BreachingAnnotation, "10.0.0.5:8000, 10.0.0.6:8000"),
		labels.EmptyLabels(), "", false, slog.New(slog.DiscardHandler))
	plain, err := p.ParseExpr(`up == 0`)
	require.NoError(t, err)
	other := promrules.NewAlertingRule("Down", plain, time.Hour, 0, labels.FromStrings("severity", "P2"),
		labels.EmptyLabels(), labels.EmptyLabels(), "", false, slog.New(slog.DiscardHandler))
	rr := testRules{
		group: promrules.NewGroup(promrules.GroupOptions{Name: "g", File: "r.yml", Interval: time.Minute, Rules: []promrules.Rule{slow, other}}),
		compiled: map[string][]rulefile.Compiled{"r.yml": {
			{Group: "g", Alert: "TargetsDown", Severity: "P1", Source: `up == 0`, Expr: compiledExpr,
				Instances: &rulefile.Instances{Min: 2, By: []string{"instance"}}, Warmup: 5 * time.Minute},
			{Group: "g", Alert: "Down", Severity: "P2", Source: `up == 0`, Expr: `up == 0`},
		}},
	}
	// One evaluation makes TargetsDown fire (no `for`).
	query := func(context.Context, string, time.Time) (promql.Vector, error) {
		return promql.Vector{{Metric: labels.FromStrings("job", "vllm"), F: 2}}, nil
	}
	_, err = slow.Eval(context.Background(), 0, time.Now(), query, nil, 0)
	require.NoError(t, err)

	ts := newTestServer(t, func(o *Options) { o.Rules = rr })
	code, body := ts.get("/api/v1/rules")
	require.Equal(t, http.StatusOK, code, body)
	var got struct {
		Status string `json:"status"`
		Data   struct {
			Groups []struct {
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got), body)
	require.Equal(t, "success", got.Status)
	require.Len(t, got.Data.Groups, 1)
	rs := got.Data.Groups[0].Rules
	require.Len(t, rs, 2)
	require.Equal(t, "TargetsDown", rs[0]["name"])
	require.Equal(t, compiledExpr, rs[0]["query"], "Prometheus' fields stay")
	require.Equal(t, "up == 0", rs[0]["sourceQuery"])
	require.Equal(t, map[string]any{"min": 2.0, "by": []any{"instance"}}, rs[0]["instances"])
	require.Equal(t, 300.0, rs[0]["warmup"])
	require.Equal(t, true, rs[0]["warmupHeld"])
	require.NotContains(t, rs[0], "escalated")
	require.NotContains(t, rs[1], "sourceQuery", "no sourceQuery when the query is as written")
	require.Equal(t, 0.0, rs[1]["warmup"])
	require.Equal(t, false, rs[1]["warmupHeld"])

	code, body = ts.get("/api/v1/alerts")
	require.Equal(t, http.StatusOK, code, body)
	var alerts struct {
		Data struct {
			Alerts []struct {
				Labels             map[string]string `json:"labels"`
				BreachingInstances []string          `json:"breachingInstances"`
			} `json:"alerts"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &alerts), body)
	require.Len(t, alerts.Data.Alerts, 1)
	require.Equal(t, []string{"10.0.0.5:8000", "10.0.0.6:8000"}, alerts.Data.Alerts[0].BreachingInstances)

	// Asked for gzip, the amended answer comes back whole (gzipped once,
	// after it was amended; ts.do decompresses it).
	req := httptest.NewRequest(http.MethodGet, "/api/v1/rules", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	code, body = ts.do(req)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"sourceQuery":"up == 0"`)
}

// Without rules, Prometheus' answers pass untouched.
func TestNoRulesServesEmptyLists(t *testing.T) {
	ts := newTestServer(t, nil)
	code, body := ts.get("/api/v1/rules")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"success","data":{"groups":[]}}`, body)
}
