package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Scale of TestNotifyAtScale: issue 16's 5,000 alerts and 10,000
// silences.
const (
	scaleAlerts   = 5000
	scaleSilences = 10000
	scaleNames    = 50 // alertnames, so 50 groups of 100
	scaleJobs     = 100
	scaleP0       = 20 // alerts 0..19 are P0: each inhibits the P1 of its job
)

// scaleAlertLabels are the labels of load alert i.
func scaleAlertLabels(i int) map[string]string {
	sev := "P1"
	if i < scaleP0 {
		sev = "P0"
	}
	return map[string]string{
		"alertname": fmt.Sprintf("ScaleLoad%02d", i%scaleNames),
		"instance":  fmt.Sprintf("host-%05d:9100", i),
		"job":       fmt.Sprintf("job-%03d", i%scaleJobs),
		"severity":  sev,
	}
}

// scaleSilenceInstance is the instance silence j matches: one in ten is on
// a load alert's instance, the rest on instances no alert has; one in ten
// (others) is expired after it is made.
func scaleSilenceInstance(j int) (inst string, expire bool) {
	if j%10 == 1 {
		return fmt.Sprintf("host-%05d:9100", j%scaleAlerts), false
	}
	return fmt.Sprintf("other-%05d:9100", j), j%10 == 0
}

// TestNotifyAtScale: with 5,000 firing alerts and 10,000 silences (1,000
// of them expired), a new alert with group_wait 1s is still delivered
// before a second one posted group_wait + 2s after it; /api/v2/alerts
// answers with the right silenced and inhibited alerts; the process does
// not pin a core; SIGTERM ends it with exit 0 within 5 s (DESIGN.md).
// The figures (latencies, CPU, SIGTERM time) are logged.
func TestNotifyAtScale(t *testing.T) {
	hook := newWebhookSink(t)
	dir := t.TempDir()
	p := start(t, writeConfig(t, dir, fmt.Sprintf(`alerting:
  route:
    receiver: chat
    group_by: [alertname]
    group_wait: 1s
    group_interval: 5s
    repeat_interval: 1h
  receivers:
    - name: chat
      webhook_configs:
        - url: %s/hook
`, hook.srv.URL)), filepath.Join(dir, "data"))
	client := &http.Client{Timeout: 60 * time.Second}
	// doE is safe in goroutines; do fails the test.
	doE := func(method, path string, body any) (int, []byte, time.Duration, error) {
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			if err != nil {
				return 0, nil, 0, err
			}
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, p.url(path), rd)
		if err != nil {
			return 0, nil, 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		begin := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, 0, fmt.Errorf("%s %s: %w", method, path, err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, time.Since(begin), err
	}
	do := func(method, path string, body any) (int, []byte, time.Duration) {
		t.Helper()
		code, out, d, err := doE(method, path, body)
		require.NoError(t, err)
		return code, out, d
	}
	endsAt := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	// 5,000 alerts, in batches of 500 as a Prometheus would send them.
	for b := 0; b < scaleAlerts; b += 500 {
		var batch []map[string]any
		for i := b; i < b+500; i++ {
			batch = append(batch, map[string]any{"labels": scaleAlertLabels(i), "endsAt": endsAt})
		}
		code, out, _ := do("POST", "/api/v2/alerts", batch)
		require.Equal(t, http.StatusOK, code, "%s", out)
	}

	// Every load group has been notified before any silence exists: five
	// groups (alertnames 01, 11, 21, 31, 41) are wholly silenced below,
	// so waiting for them after the silences raced the first flush
	// against how fast the silences were made. The groups flush at
	// scale from here on (every group_interval, with the silences).
	eventually(t, 60*time.Second, "all 50 load groups at the webhook", func() bool {
		seen := map[string]bool{}
		for _, pl := range hook.payloads() {
			seen[pl.Common["alertname"]] = true
		}
		for k := range scaleNames {
			if !seen[fmt.Sprintf("ScaleLoad%02d", k)] {
				return false
			}
		}
		return true
	})

	// 10,000 silences through the API, eight clients at once.
	makeSilence := func(j int) error {
		inst, expire := scaleSilenceInstance(j)
		code, out, _, err := doE("POST", "/api/v2/silences", map[string]any{
			"matchers":  []map[string]any{{"name": "instance", "value": inst, "isRegex": false}},
			"startsAt":  time.Now().UTC().Format(time.RFC3339),
			"endsAt":    endsAt,
			"createdBy": "scale-test", "comment": "issue 16",
		})
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("silence %d: %d %s %v", j, code, out, err)
		}
		if !expire {
			return nil
		}
		var r struct {
			SilenceID string `json:"silenceID"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return err
		}
		if code, out, _, err := doE("DELETE", "/api/v2/silence/"+r.SilenceID, nil); err != nil || code != http.StatusOK {
			return fmt.Errorf("expire %s: %d %s %v", r.SilenceID, code, out, err)
		}
		return nil
	}
	begin := time.Now()
	jobs := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := makeSilence(j); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for j := range scaleSilences {
		select {
		case jobs <- j:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	t.Logf("10,000 silences (1,000 expired) made in %s", time.Since(begin).Round(time.Millisecond))

	// The process does not pin a core while it holds all this.
	cpu0, at0 := cpuSeconds(t, p), time.Now()
	eventually(t, 30*time.Second, "a 10s window of CPU", func() bool { return time.Since(at0) >= 10*time.Second })
	cpu1, at1 := cpuSeconds(t, p), time.Now()
	cores := (cpu1 - cpu0) / at1.Sub(at0).Seconds()
	t.Logf("CPU at rest with 5,000 alerts and 10,000 silences: %.3f cores (%.2fs CPU in %s)", cores, cpu1-cpu0, at1.Sub(at0).Round(time.Millisecond))
	require.Less(t, cores, 0.5, "the notifier at rest must not keep a core busy")

	// A new alert with group_wait 1s arrives before one posted group_wait
	// + 2s after it (the tick is 1s).
	postOne := func(name string) time.Duration {
		code, out, d := do("POST", "/api/v2/alerts", []map[string]any{{"labels": map[string]string{"alertname": name, "severity": "P1", "job": "sentinel"}, "endsAt": endsAt}})
		require.Equal(t, http.StatusOK, code, "%s", out)
		return d
	}
	arrival := func(name string) (int, time.Time) {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		for i, pl := range hook.got {
			if pl.Common["alertname"] == name {
				return i, hook.at[i]
			}
		}
		return -1, time.Time{}
	}
	postedA := time.Now()
	postA := postOne("ScaleSentinelA")
	eventually(t, 10*time.Second, "group_wait + 2s after the first sentinel", func() bool { return time.Since(postedA) >= 3*time.Second })
	postedB := time.Now()
	postB := postOne("ScaleSentinelB")
	eventually(t, 60*time.Second, "the second sentinel at the webhook", func() bool {
		i, _ := arrival("ScaleSentinelB")
		return i >= 0
	})
	ia, atA := arrival("ScaleSentinelA")
	ib, atB := arrival("ScaleSentinelB")
	require.GreaterOrEqual(t, ia, 0, "the first sentinel was delivered")
	t.Logf("sentinel A: POST %s, at the webhook %s after it was posted; sentinel B: POST %s, at the webhook %s after it was posted",
		postA.Round(time.Millisecond), atA.Sub(postedA).Round(time.Millisecond), postB.Round(time.Millisecond), atB.Sub(postedB).Round(time.Millisecond))
	require.Less(t, ia, ib, "the first sentinel is delivered before the second")
	require.True(t, atA.Before(postedB), "the first sentinel is delivered before the second is posted, group_wait + 2s later")

	// The API answers with every alert and the right states.
	code, body, getD := do("GET", "/api/v2/alerts", nil)
	require.Equal(t, http.StatusOK, code)
	var got []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State       string   `json:"state"`
			SilencedBy  []string `json:"silencedBy"`
			InhibitedBy []string `json:"inhibitedBy"`
		} `json:"status"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	silencedInst := map[string]int{}
	for j := range scaleSilences {
		if inst, expire := scaleSilenceInstance(j); !expire {
			silencedInst[inst]++
		}
	}
	var wantSilenced, wantInhibited, silenced, inhibited int
	for i := range scaleAlerts {
		l := scaleAlertLabels(i)
		if silencedInst[l["instance"]] > 0 {
			wantSilenced++
		}
		if l["severity"] == "P1" && i%scaleJobs < scaleP0 {
			wantInhibited++
		}
	}
	for _, a := range got {
		if n := len(a.Status.SilencedBy); n > 0 {
			silenced++
			require.Equal(t, silencedInst[a.Labels["instance"]], n, "silences of %v", a.Labels)
		}
		if len(a.Status.InhibitedBy) > 0 {
			inhibited++
		}
	}
	t.Logf("GET /api/v2/alerts: %d alerts (%d silenced, %d inhibited), %d bytes in %s", len(got), silenced, inhibited, len(body), getD.Round(time.Millisecond))
	require.Len(t, got, scaleAlerts+2)
	require.Equal(t, wantSilenced, silenced)
	require.Equal(t, wantInhibited, inhibited)

	// Alerts, groups and silences answer while flushes run.
	var rg sync.WaitGroup
	results := make([]string, 4)
	for i, path := range []string{"/api/v2/alerts/groups", "/api/v2/silences", "/api/v2/alerts?silenced=false&inhibited=false", "/-/healthy"} {
		rg.Add(1)
		go func() {
			defer rg.Done()
			code, _, d, err := doE("GET", path, nil)
			results[i] = fmt.Sprintf("GET %s: %d in %s %v", path, code, d.Round(time.Millisecond), err)
		}()
	}
	rg.Wait()
	for _, r := range results {
		t.Log(r)
		require.Contains(t, r, ": 200 in ", r)
	}

	exit, took := p.stop()
	t.Logf("SIGTERM to exit: %s", took.Round(time.Millisecond))
	require.Equal(t, 0, exit)
	require.Less(t, took, 5*time.Second, "DESIGN.md: exit 0 within a few seconds of SIGTERM (5 s)")
	for _, bad := range []string{"panic", "fatal error", "goroutine "} {
		require.NotContains(t, p.Output(), bad)
	}
}

// cpuSeconds reads process_cpu_seconds_total from /metrics.
func cpuSeconds(t *testing.T, p *proc) float64 {
	t.Helper()
	code, body := p.getRaw("/metrics")
	require.Equal(t, http.StatusOK, code)
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	t.Fatalf("no process_cpu_seconds_total in /metrics")
	return 0
}
