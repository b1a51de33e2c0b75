package query

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/stretchr/testify/require"
)

func TestQueryBounds(t *testing.T) {
	p := limitedParser{Parser: parser.NewParser(parser.Options{}), maxLength: DefaultMaxQueryLength, maxDepth: DefaultMaxQueryDepth}
	for name, q := range map[string]string{
		"50,000-term sum":      strings.Repeat("up+", 50_000) + "up",
		"1,100-term sum":       strings.Repeat("up+", 1_100) + "up",
		"300-term sum":         strings.Repeat("up+", 300) + "up",
		"20,000 parentheses":   strings.Repeat("(", 20_000) + "up" + strings.Repeat(")", 20_000),
		"300 nested abs calls": strings.Repeat("abs(", 300) + "up" + strings.Repeat(")", 300),
	} {
		_, err := p.ParseExpr(q)
		require.Error(t, err, name)
	}
	for name, q := range map[string]string{
		"200-term sum":        strings.Repeat("up+", 199) + "up",
		"brackets in strings": `up{job="` + strings.Repeat("(", 1000) + `"}`,
		"operators in regexp": `up{job=~"` + strings.Repeat("a|-+", 2000) + `"}`,
		"comment":             "up # " + strings.Repeat("(", 1000) + "\n",
		"matchers and offset": `sum by (job) (rate(http_requests_total{code!="200",job=~"a.*"}[5m] offset -1m)) / 2`,
	} {
		_, err := p.ParseExpr(q)
		require.NoError(t, err, name)
	}
}

// TestFullQueueIsATimeout: a query, split or whole, that waits for a
// slot longer than the timeout fails with the engine's timeout error
// (which the API answers 503), within the timeout.
func TestFullQueueIsATimeout(t *testing.T) {
	st := promqltest.LoadedStorage(t, "load 1m\n  up 1+0x1000\n")
	t.Cleanup(func() { st.Close() })
	e := New(Options{SplitParallelism: 2, MaxConcurrent: 1, Timeout: 100 * time.Millisecond}, nil, nil)
	e.minSplitRange = 0 // split the 16-hour range
	ctx := context.Background()
	_, err := e.slots.Insert(ctx, "holder")
	require.NoError(t, err)
	defer e.slots.Delete(0)
	for name, newQuery := range map[string]func() (promql.Query, error){
		"split": func() (promql.Query, error) {
			return e.NewRangeQuery(ctx, st, nil, "up", time.Unix(0, 0), time.Unix(59_000, 0), time.Minute)
		},
		"instant": func() (promql.Query, error) {
			return e.NewInstantQuery(ctx, st, nil, "up", time.Unix(600, 0))
		},
	} {
		// Prometheus' engine queues when preparing a query (the API
		// answers that error 503 too) and again when running it.
		q, err := newQuery()
		if err == nil {
			err = q.Exec(ctx).Err
			q.Close()
		}
		var timeout promql.ErrQueryTimeout
		require.ErrorAs(t, err, &timeout, name)
	}
}

// TestSubqueryStepsBound: a subquery of more than MaxSubquerySteps steps
// is refused when the query is made, counting the query's own range and
// the subqueries around it; smaller ones run.
func TestSubqueryStepsBound(t *testing.T) {
	st := promqltest.LoadedStorage(t, "load 1m\n  up 1+0x10\n")
	t.Cleanup(func() { st.Close() })
	e := New(Options{}, nil, nil)
	ctx := context.Background()
	at := time.Unix(600, 0)
	for name, q := range map[string]string{
		"300d at 1s":            "count_over_time(vector(1)[300d:1s])",
		"nested":                "max_over_time(count_over_time(up[5m:1s])[12d:1m])",
		"no step, 1m default":   "count_over_time(vector(1)[2000d:])",
		"inside an aggregation": "sum(count_over_time(vector(1)[300d:1s]) + 1)",
	} {
		_, err := e.NewInstantQuery(ctx, st, nil, q, at)
		require.ErrorContains(t, err, "steps; the appliance evaluates at most 1000000", name)
	}
	_, err := e.NewRangeQuery(ctx, st, nil, "count_over_time(vector(1)[1d:1s])", at, at.Add(11*24*time.Hour), time.Hour)
	require.ErrorContains(t, err, "at most 1000000", "the query's range counts")

	for name, q := range map[string]string{
		"30d at 5s": "count_over_time(vector(1)[30d:5s])",
		"nested":    "max_over_time(count_over_time(up[5m:1s])[1d:1m])",
		"no colon":  "up",
	} {
		qry, err := e.NewInstantQuery(ctx, st, nil, q, at)
		require.NoError(t, err, name)
		require.NoError(t, qry.Exec(ctx).Err, name)
		qry.Close()
	}
}
