package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/google/pprof/profile"
)

// profileChunk is the longest CPU profile asked for in one request: a
// window is profiled in back-to-back chunks, merged, so that no server's
// write timeout cuts a long one off.
const profileChunk = time.Minute

// cpuProfile profiles the process serving baseURL for d, from
// /debug/pprof/profile (Prometheus, VictoriaMetrics and the appliance all
// serve Go's profiler there), in chunks of at most profileChunk, and
// returns the merged profile, also written to path for `go tool pprof`.
func cpuProfile(ctx context.Context, client *http.Client, baseURL string, d time.Duration, path string) (*profile.Profile, error) {
	var parts []*profile.Profile
	end := time.Now().Add(d)
	for {
		left := time.Until(end).Round(time.Second)
		if left < time.Second {
			break
		}
		sec := int(min(left, profileChunk) / time.Second)
		p, err := fetchProfile(ctx, client, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", baseURL, sec))
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("CPU profile: window of %s is too short", d)
	}
	merged, err := profile.Merge(parts)
	if err != nil {
		return nil, fmt.Errorf("merge CPU profiles: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("write CPU profile: %w", err)
	}
	defer f.Close()
	if err := merged.Write(f); err != nil {
		return nil, fmt.Errorf("write CPU profile: %w", err)
	}
	return merged, f.Close()
}

func fetchProfile(ctx context.Context, client *http.Client, url string) (*profile.Profile, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("get %s: status %s: %s", url, resp.Status, body)
	}
	p, err := profile.Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse CPU profile from %s: %w", url, err)
	}
	return p, nil
}
