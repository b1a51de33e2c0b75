package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// flipTarget is a scrape target serving one gauge, flip_value, 0 until
// flip is called and 1 after. It remembers when it first served 1: the
// scrape that saw the flip.
type flipTarget struct {
	srv     *httptest.Server
	mu      sync.Mutex
	flipped bool
	scrapes int       // scrapes served, before and after the flip
	seenAt  time.Time // when a scrape first got 1; zero before
}

func newFlipTarget(t *testing.T) *flipTarget {
	ft := &flipTarget{}
	ft.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ft.mu.Lock()
		v := 0
		if ft.flipped {
			v = 1
			if ft.seenAt.IsZero() {
				ft.seenAt = time.Now()
			}
		}
		ft.scrapes++
		ft.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE flip_value gauge\nflip_value %d\n", v)
	}))
	t.Cleanup(ft.srv.Close)
	return ft
}

func (ft *flipTarget) flip() {
	ft.mu.Lock()
	ft.flipped = true
	ft.mu.Unlock()
}

// state returns how many scrapes it served and when the flip was seen.
func (ft *flipTarget) state() (int, time.Time) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.scrapes, ft.seenAt
}

// TestAlertLatency: the real binary scrapes a target whose value flips from
// 0 to 1; a rule with for: 0s fires on it and the webhook receives it. The
// alert arrives, and only after the scrape that saw the flip; nothing is
// sent before. The latency from that scrape to the webhook is logged (the
// figure with its goal is bench/alertlatency's).
func TestAlertLatency(t *testing.T) {
	target := newFlipTarget(t)
	hook := newWebhookSink(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "flip.rules.yml"), []byte(`groups:
  - name: flip
    warmup: 0s
    rules:
      - alert: Flipped
        expr: flip_value > 0
        for: 0s
        labels:
          severity: P1
`), 0o644))
	cfg := writeConfig(t, dir, fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: flip
    static_configs:
      - targets: [%q]
rule_files: [flip.rules.yml]
alerting:
  route:
    receiver: hook
    group_by: [alertname]
    group_wait: 0s
    group_interval: 1m
    repeat_interval: 1h
  receivers:
    - name: hook
      webhook_configs:
        - url: %s/hook
`, target.srv.Listener.Addr().String(), hook.srv.URL))
	p := start(t, cfg, filepath.Join(dir, "data"))

	// Before the flip: the rule has evaluated on scraped zeros and
	// nothing was sent.
	eventually(t, 60*time.Second, "flip_value scraped and queryable", func() bool {
		return len(p.instant(`flip_value == 0`, time.Time{})) == 1
	})
	eventually(t, 60*time.Second, "the rule evaluated after flip_value was stored", func() bool {
		return ruleEvaluatedOK(t, p, "flip", "Flipped")
	})
	n, _ := target.state()
	eventually(t, 60*time.Second, "two more scrapes of zero", func() bool {
		m, _ := target.state()
		return m >= n+2
	})
	require.Empty(t, hook.payloads(), "a notification before the flip")

	target.flip()
	eventually(t, 60*time.Second, "the Flipped alert at the webhook", func() bool {
		for _, name := range hook.alertnames() {
			if name == "Flipped:firing" {
				return true
			}
		}
		return false
	})
	_, seen := target.state()
	require.False(t, seen.IsZero(), "the alert arrived but no scrape saw the flip")
	hook.mu.Lock()
	arrived := hook.at[0]
	hook.mu.Unlock()
	require.True(t, arrived.After(seen), "the webhook got the alert at %s, before the scrape that saw the flip at %s", arrived, seen)
	t.Logf("alert latency, from the scrape that saw the flip to the webhook: %s (scrape and evaluation every 1s)", arrived.Sub(seen))
}

// ruleEvaluatedOK reports whether /api/v1/rules shows the rule of group
// with health ok and an evaluation.
func ruleEvaluatedOK(t *testing.T, p *proc, group, rule string) bool {
	t.Helper()
	code, r := p.get("/api/v1/rules", nil)
	if code != http.StatusOK {
		return false
	}
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Name           string    `json:"name"`
				Health         string    `json:"health"`
				LastEvaluation time.Time `json:"lastEvaluation"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &rules))
	for _, g := range rules.Groups {
		for _, rl := range g.Rules {
			if g.Name == group && rl.Name == rule {
				return rl.Health == "ok" && !rl.LastEvaluation.IsZero()
			}
		}
	}
	return false
}
