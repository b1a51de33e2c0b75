package slo

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aiserve/appliance/config"
)

// ReleaseWindow is how far before and after a release the report reads
// its P95: a day, so that the daily pattern of traffic is in both.
const ReleaseWindow = 24 * time.Hour

// ReleaseMark is a release recorded in the state file: posted to
// /api/v1/appliance/annotations with the tag release, or recorded when a
// target's version label or process start changed.
type ReleaseMark struct {
	At     time.Time
	Text   string
	Labels map[string]string
}

// ReleaseSource lists the releases recorded in [from, to).
type ReleaseSource interface {
	Releases(ctx context.Context, from, to time.Time) ([]ReleaseMark, error)
}

// ReleaseFunc is a ReleaseSource of a function.
type ReleaseFunc func(ctx context.Context, from, to time.Time) ([]ReleaseMark, error)

// Releases implements ReleaseSource.
func (f ReleaseFunc) Releases(ctx context.Context, from, to time.Time) ([]ReleaseMark, error) {
	return f(ctx, from, to)
}

// Release is a release in the week with each latency SLO's P95 over the
// day before it and the day after (to the report's time at most).
type Release struct {
	At      time.Time         `json:"at"`
	Text    string            `json:"text"`
	Labels  map[string]string `json:"labels"`
	Latency []ReleaseLatency  `json:"latency"`
}

// ReleaseLatency is one SLO's P95 (one value of its by labels) around a
// release.
type ReleaseLatency struct {
	SLO    string            `json:"slo"`
	Labels map[string]string `json:"labels"`
	// Before and After are the P95 in seconds; nil without requests.
	Before      *float64 `json:"p95_before"`
	After       *float64 `json:"p95_after"`
	BeforeTotal float64  `json:"requests_before"`
	AfterTotal  float64  `json:"requests_after"`
}

// releaseMatchers are the matchers of a release that narrow the SLO's
// histogram to what was released: the target, and the SLO's by labels.
func releaseMatchers(s *config.SLOConfig, ls map[string]string) string {
	var ms []string
	for _, l := range append([]string{"job", "instance"}, s.By...) {
		if v, ok := ls[l]; ok && v != "" && !slices.Contains(ms, l) {
			ms = append(ms, fmt.Sprintf("%s=%q", l, v))
		}
	}
	slices.Sort(ms)
	return strings.Join(ms, ", ")
}

// releases lists the releases in [start, end) with the P95 around each.
func releases(ctx context.Context, src Source, rs ReleaseSource, slos []*config.SLOConfig, start, end, now time.Time) ([]Release, error) {
	out := []Release{}
	if rs == nil {
		return out, nil
	}
	marks, err := rs.Releases(ctx, start, end)
	if err != nil {
		return nil, fmt.Errorf("list releases: %w", err)
	}
	slices.SortStableFunc(marks, func(a, b ReleaseMark) int { return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Text, b.Text)) })
	for _, m := range marks {
		if m.At.Before(start) || !m.At.Before(end) {
			continue
		}
		r := Release{At: m.At.In(start.Location()), Text: m.Text, Labels: m.Labels, Latency: []ReleaseLatency{}}
		if r.Labels == nil {
			r.Labels = map[string]string{}
		}
		for _, s := range slos {
			if s.Kind != config.SLOKindLatency {
				continue
			}
			narrowed := *s
			body := selectorBody(s.Selector)
			if extra := releaseMatchers(s, m.Labels); extra != "" {
				body = strings.Trim(body+", "+extra, ", ")
			}
			narrowed.Selector = "{" + body + "}"
			before, err := spanData(ctx, src, &narrowed, m.At.Add(-ReleaseWindow), m.At)
			if err != nil {
				return nil, err
			}
			afterEnd := m.At.Add(ReleaseWindow)
			if afterEnd.After(now) {
				afterEnd = now
			}
			after := &weekly{total: map[string]float64{}}
			if afterEnd.Sub(m.At) >= time.Minute {
				if after, err = spanData(ctx, src, &narrowed, m.At, afterEnd); err != nil {
					return nil, err
				}
			}
			keys := map[string]bool{}
			for k, n := range before.total {
				keys[k] = keys[k] || n > 0
			}
			for k, n := range after.total {
				keys[k] = keys[k] || n > 0
			}
			sorted := make([]string, 0, len(keys))
			for k, ok := range keys {
				if ok {
					sorted = append(sorted, k)
				}
			}
			slices.Sort(sorted)
			for _, k := range sorted {
				lbls := before.lbls[k]
				if lbls == nil {
					lbls = after.lbls[k]
				}
				r.Latency = append(r.Latency, ReleaseLatency{SLO: s.Name, Labels: lbls,
					Before: p95(before, k), After: p95(after, k), BeforeTotal: before.total[k], AfterTotal: after.total[k]})
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Releases implements ReleaseSource: GET /api/v1/appliance/annotations
// with tags=release.
func (s APISource) Releases(ctx context.Context, from, to time.Time) ([]ReleaseMark, error) {
	u := s.URL.JoinPath("/api/v1/appliance/annotations")
	u.RawQuery = url.Values{"from": {formatAPITime(from)}, "to": {formatAPITime(to)}, "tags": {"release"}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	c := s.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list releases: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAPIResponse))
	if err != nil {
		return nil, fmt.Errorf("read releases: %w", err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil // an appliance from before annotations were stored
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   []struct {
			Time   float64           `json:"time"`
			Text   string            `json:"text"`
			Labels map[string]string `json:"labels"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("releases: HTTP %d, not the appliance's JSON: %w", resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("releases: HTTP %d: %s", resp.StatusCode, r.Error)
	}
	out := make([]ReleaseMark, 0, len(r.Data))
	for _, a := range r.Data {
		sec, frac := math.Modf(a.Time)
		out = append(out, ReleaseMark{At: time.Unix(int64(sec), int64(math.Round(frac*1000))*int64(time.Millisecond)), Text: a.Text, Labels: a.Labels})
	}
	return out, nil
}

func fmtReleaseLabels(ls map[string]string) string {
	keys := make([]string, 0, len(ls))
	for k := range ls {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+ls[k])
	}
	return strings.Join(parts, ", ")
}
