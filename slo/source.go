package slo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

// Sample is one series of a query result at one time.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Series is one series of a range query result.
type Series struct {
	Labels map[string]string
	Points []Point
}

// Point is one value of a Series.
type Point struct {
	T time.Time
	V float64
}

// Source answers the report's queries. Implementations must be safe for
// use from one goroutine at a time; the report asks sequentially.
type Source interface {
	// Instant evaluates q at ts.
	Instant(ctx context.Context, q string, ts time.Time) ([]Sample, error)
	// Range evaluates q over [start, end] at step.
	Range(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]Series, error)
}

// QueryEngine is what EngineSource needs of the query engine
// (query.Engine implements it).
type QueryEngine interface {
	NewInstantQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, ts time.Time) (promql.Query, error)
	NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, interval time.Duration) (promql.Query, error)
}

// EngineSource reads through the query engine, in process: the tiers
// (storage.DB) for the report, so that last week comes from the 1m tier.
type EngineSource struct {
	Engine    QueryEngine
	Queryable storage.Queryable
}

// Instant implements Source.
func (s EngineSource) Instant(ctx context.Context, q string, ts time.Time) ([]Sample, error) {
	qry, err := s.Engine.NewInstantQuery(ctx, s.Queryable, nil, q, ts)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("query %s: %w", q, res.Err)
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		out := make([]Sample, 0, len(v))
		for _, smp := range v {
			out = append(out, Sample{Labels: smp.Metric.Map(), Value: smp.F})
		}
		return out, nil
	case promql.Scalar:
		return []Sample{{Labels: map[string]string{}, Value: v.V}}, nil
	}
	return nil, fmt.Errorf("query %s: unexpected result type %s", q, res.Value.Type())
}

// Range implements Source.
func (s EngineSource) Range(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]Series, error) {
	qry, err := s.Engine.NewRangeQuery(ctx, s.Queryable, nil, q, start, end, step)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("query %s: %w", q, res.Err)
	}
	m, err := res.Matrix()
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	out := make([]Series, 0, len(m))
	for _, ser := range m {
		ps := make([]Point, 0, len(ser.Floats))
		for _, p := range ser.Floats {
			ps = append(ps, Point{T: time.UnixMilli(p.T).UTC(), V: p.F})
		}
		out = append(out, Series{Labels: ser.Metric.Map(), Points: ps})
	}
	return out, nil
}

// BucketBounds implements BoundSource: the le values of the histogram's
// buckets in the last 7 days.
func (s EngineSource) BucketBounds(ctx context.Context, histogram, selector string) ([]string, error) {
	return boundsFromSamples(s.Instant(ctx, bucketBoundsQuery(histogram, selector), time.Now()))
}

func bucketBoundsQuery(histogram, selector string) string {
	m := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(selector), "{"), "}"))
	if m != "" {
		m = "{" + m + "}"
	}
	return fmt.Sprintf("count by (le) (last_over_time(%s_bucket%s[7d]))", histogram, m)
}

func boundsFromSamples(ss []Sample, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	var les []string
	for _, s := range ss {
		if le, ok := s.Labels[labels.BucketLabel]; ok && !slices.Contains(les, le) {
			les = append(les, le)
		}
	}
	slices.Sort(les)
	return les, nil
}

// APISource reads a running appliance (or any Prometheus-compatible
// server) through its HTTP API.
type APISource struct {
	URL    *url.URL
	Client *http.Client
}

// maxAPIResponse bounds a response body.
const maxAPIResponse = 64 << 20

type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

func (s APISource) get(ctx context.Context, path string, params url.Values) (*apiResponse, error) {
	u := s.URL.JoinPath(path)
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(params.Encode()))
	if err != nil {
		return nil, err
	}
	req.URL.RawQuery = ""
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := s.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponse))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d, not Prometheus API JSON: %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return &r, nil
}

func parseAPIValue(v [2]any) (time.Time, float64, error) {
	ts, ok := v[0].(float64)
	if !ok {
		return time.Time{}, 0, fmt.Errorf("bad timestamp %v", v[0])
	}
	str, ok := v[1].(string)
	if !ok {
		return time.Time{}, 0, fmt.Errorf("bad value %v", v[1])
	}
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return time.Time{}, 0, err
	}
	return time.UnixMilli(int64(ts * 1000)).UTC(), f, nil
}

// Instant implements Source.
func (s APISource) Instant(ctx context.Context, q string, ts time.Time) ([]Sample, error) {
	r, err := s.get(ctx, "/api/v1/query", url.Values{"query": {q}, "time": {formatAPITime(ts)}})
	if err != nil {
		return nil, err
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: result type %s, want vector", q, r.Data.ResultType)
	}
	var res []struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := json.Unmarshal(r.Data.Result, &res); err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	out := make([]Sample, 0, len(res))
	for _, x := range res {
		_, v, err := parseAPIValue(x.Value)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", q, err)
		}
		out = append(out, Sample{Labels: x.Metric, Value: v})
	}
	return out, nil
}

// Range implements Source.
func (s APISource) Range(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]Series, error) {
	r, err := s.get(ctx, "/api/v1/query_range", url.Values{"query": {q}, "start": {formatAPITime(start)}, "end": {formatAPITime(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
	if err != nil {
		return nil, err
	}
	var res []struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	if err := json.Unmarshal(r.Data.Result, &res); err != nil {
		return nil, fmt.Errorf("query %s: %w", q, err)
	}
	out := make([]Series, 0, len(res))
	for _, x := range res {
		ser := Series{Labels: x.Metric}
		for _, v := range x.Values {
			t, f, err := parseAPIValue(v)
			if err != nil {
				return nil, fmt.Errorf("query %s: %w", q, err)
			}
			ser.Points = append(ser.Points, Point{T: t, V: f})
		}
		out = append(out, ser)
	}
	return out, nil
}

// BucketBounds implements BoundSource.
func (s APISource) BucketBounds(ctx context.Context, histogram, selector string) ([]string, error) {
	return boundsFromSamples(s.Instant(ctx, bucketBoundsQuery(histogram, selector), time.Now()))
}

func formatAPITime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}
