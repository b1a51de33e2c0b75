package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

type benchQuery struct{ name, expr string }

// benchQueries are the two queries.
var benchQueries = []benchQuery{
	{"p95 latency", `histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))`},
	{"max queue", `max_over_time(vllm:num_requests_waiting[1h])`},
}

const day = 24 * time.Hour

// queryRanges are the ranges timed: 1 hour, 24 hours, 7, 30 and 90 days,
// those the data is long enough for.
func queryRanges(days int) []time.Duration {
	var r []time.Duration
	for _, d := range []time.Duration{time.Hour, day, 7 * day, 30 * day, 90 * day} {
		if d <= time.Duration(days)*day {
			r = append(r, d)
		}
	}
	return r
}

// rangeName is how a range is written in the report: 1h, 24h, 7d.
func rangeName(rng time.Duration) string {
	if rng >= 7*day {
		return fmt.Sprintf("%dd", rng/day)
	}
	return fmt.Sprintf("%dh", rng/time.Hour)
}

func queryKey(name string, rng time.Duration) string { return name + "/" + rangeName(rng) }

// queryWindow is the range ending at end with a step of about range/500:
// from 7 days on the nearest whole number of 5-minute windows, below that
// range/500 rounded up to whole 15 s (the scrape interval: 15s at 1 hour,
// 3m at 24 hours), as a dashboard asks for about 500 points.
func queryWindow(end time.Time, rng time.Duration) (time.Time, time.Time, time.Duration) {
	var step time.Duration
	if rng >= 7*day {
		step = max(5*time.Minute, (rng/500+150*time.Second)/(5*time.Minute)*(5*time.Minute))
	} else {
		step = (rng/500 + 15*time.Second - 1) / (15 * time.Second) * (15 * time.Second)
	}
	return end.Add(-rng), end, step
}

type timedQuery struct {
	latency        time.Duration
	series, points int
	mean           float64 // of all values returned, to compare answers
	tiers          string  // the appliance's X-Appliance-Tiers
}

// timeQuery runs one query_range, timed from sending the request to the
// last byte of the answer, as harness.QueryRange does; it also reads the
// tiers the appliance says served it.
func timeQuery(ctx context.Context, base, expr string, start, end time.Time, step time.Duration, extra url.Values) (timedQuery, error) {
	var r timedQuery
	q := url.Values{}
	for k, v := range extra {
		q[k] = v
	}
	q.Set("query", expr)
	q.Set("start", strconv.FormatInt(start.Unix(), 10))
	q.Set("end", strconv.FormatInt(end.Unix(), 10))
	q.Set("step", strconv.FormatFloat(step.Seconds(), 'f', -1, 64))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/query_range?"+q.Encode(), nil)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return r, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.latency = time.Since(t0)
	if err != nil {
		return r, err
	}
	r.tiers = resp.Header.Get("X-Appliance-Tiers")
	var res struct {
		Status string   `json:"status"`
		Error  string   `json:"error"`
		Tiers  []string `json:"tiers"`
		Data   struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return r, fmt.Errorf("decode answer (%s): %w", resp.Status, err)
	}
	if res.Status != "success" {
		return r, fmt.Errorf("%s: %s", resp.Status, res.Error)
	}
	if r.tiers == "" && len(res.Tiers) > 0 {
		r.tiers = strings.Join(res.Tiers, ",")
	}
	var sum float64
	var n int
	r.series = len(res.Data.Result)
	for _, s := range res.Data.Result {
		r.points += len(s.Values)
		for _, v := range s.Values {
			if str, ok := v[1].(string); ok {
				if f, err := strconv.ParseFloat(str, 64); err == nil {
					sum += f
					n++
				}
			}
		}
	}
	if n > 0 {
		r.mean = sum / float64(n)
	}
	return r, nil
}
