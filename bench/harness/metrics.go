package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// ErrNoSuchMetric is returned by [SumMetric] when the page has no sample of
// the metric, which usually means the system under test names it
// differently in this version.
var ErrNoSuchMetric = errors.New("metric not found")

// SumMetric fetches a Prometheus text-format page (a system's own
// /metrics) and returns the sum of all samples of the metric name over all
// label sets, e.g. prometheus_tsdb_head_samples_appended_total summed over
// its "type" label.
func SumMetric(ctx context.Context, client *http.Client, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("build request for %s: %w", url, err)
	}
	// Plain text format: Prometheus would otherwise offer protobuf or
	// OpenMetrics depending on the Accept header.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("get %s: status %s", url, resp.Status)
	}
	sum, err := sumTextMetric(resp.Body, name)
	if err != nil {
		return 0, fmt.Errorf("%s from %s: %w", name, url, err)
	}
	return sum, nil
}

// sumTextMetric sums the samples of name in a text exposition.
func sumTextMetric(r io.Reader, name string) (float64, error) {
	var (
		sum   float64
		found bool
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		switch {
		case strings.HasPrefix(rest, "{"):
			end := closingBrace(rest)
			if end < 0 {
				return 0, fmt.Errorf("cannot parse line %q: unterminated label set", line)
			}
			rest = rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name with the same prefix
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, fmt.Errorf("cannot parse line %q: no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("cannot parse line %q: %w", line, err)
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read exposition: %w", err)
	}
	if !found {
		return 0, ErrNoSuchMetric
	}
	return sum, nil
}

// closingBrace returns the index of the '}' that ends the label set s
// starts with, skipping braces inside quoted label values.
func closingBrace(s string) int {
	inQuote, escaped := false, false
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case inQuote && c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i
		}
	}
	return -1
}

// CountSeries fetches a target's text-format /metrics page and counts its
// samples, that is the series one scrape of it appends (before the
// scraper's own up, scrape_duration_seconds and so on).
func CountSeries(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("build request for %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("get %s: status %s", url, resp.Status)
	}
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", url, err)
	}
	return n, nil
}
