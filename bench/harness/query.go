package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// QueryResult is the outcome of one range query.
type QueryResult struct {
	Latency time.Duration // from sending the request to the last byte of the body
	Series  int           // series in the result
	Points  int           // points over all series
}

// QueryRange runs one GET /api/v1/query_range against a server speaking
// Prometheus' HTTP API and times it. It fails on a non-success status, so a
// system that cannot run the query does not report a fast time.
func QueryRange(ctx context.Context, client *http.Client, baseURL, query string, start, end time.Time, step time.Duration) (QueryResult, error) {
	var res QueryResult
	q := url.Values{}
	q.Set("query", query)
	q.Set("start", formatUnix(start))
	q.Set("end", formatUnix(end))
	q.Set("step", strconv.FormatFloat(step.Seconds(), 'f', -1, 64))
	u := baseURL + "/api/v1/query_range?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return res, fmt.Errorf("build query request: %w", err)
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return res, fmt.Errorf("query_range: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	res.Latency = time.Since(t0)
	if err != nil {
		return res, fmt.Errorf("read query_range response: %w", err)
	}
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Values []json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return res, fmt.Errorf("decode query_range response (status %s): %w", resp.Status, err)
	}
	if r.Status != "success" {
		return res, fmt.Errorf("query_range: status %s: %s: %s", resp.Status, r.ErrorType, r.Error)
	}
	res.Series = len(r.Data.Result)
	for _, s := range r.Data.Result {
		res.Points += len(s.Values)
	}
	return res, nil
}

func formatUnix(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', 3, 64)
}

// Median returns the median of ds (the mean of the middle two for an even
// count), or 0 for none.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// WaitHTTP polls url until it answers 200 OK, ctx ends or exited is
// closed (the process being waited for died), checking every 200ms.
func WaitHTTP(ctx context.Context, client *http.Client, url string, exited <-chan struct{}) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("build request for %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w (last: %v)", url, context.Cause(ctx), last)
		case <-exited:
			return fmt.Errorf("process exited while waiting for %s (see its log)", url)
		case <-tick.C:
		}
	}
}
