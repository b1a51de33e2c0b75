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

// queryRanges are the ranges timed, in days: 7, 30 and 90 where the data
// is that long.
func queryRanges(days int) []int {
	var r []int
	for _, d := range []int{7, 30, 90} {
		if d <= days {
			r = append(r, d)
		}
	}
	if len(r) == 0 {
		r = []int{days}
	}
	return r
}

func queryKey(name string, days int) string { return fmt.Sprintf("%s/%d", name, days) }

// queryWindow is the range ending at end with the step nearest range/500
// that is a whole number of 5-minute windows.
func queryWindow(end time.Time, days int) (time.Time, time.Time, time.Duration) {
	rng := time.Duration(days) * 24 * time.Hour
	step := max(5*time.Minute, (rng/500+150*time.Second)/(5*time.Minute)*(5*time.Minute))
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
func timeQuery(ctx context.Context, base, expr string, start, end time.Time, step time.Duration) (timedQuery, error) {
	var r timedQuery
	q := url.Values{}
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
