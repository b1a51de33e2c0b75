package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
)

// system is one side of the comparison. Prometheus' side is two processes:
// its Build builds Alertmanager too, and start launches both.
type system struct {
	harness.System
	// files writes the config (and rule files) into dir for a target,
	// a webhook URL, Alertmanager's address (Prometheus only), an
	// interval and the repeats (one rule group each), and returns the
	// config's path.
	files func(dir, target, hook, amAddr string, interval time.Duration, repeats int) (string, error)
}

var systems = []system{
	{System: harness.Appliance, files: applianceFiles},
	{System: prometheusWithAlertmanager(), files: prometheusFiles},
}

func prometheusWithAlertmanager() harness.System {
	s := harness.Prometheus
	s.Title = harness.Prometheus.Title + " + " + harness.Alertmanager.Title
	build := s.Build
	s.Build = func(ctx context.Context, root, binDir string, log io.Writer) (string, error) {
		if _, err := harness.Alertmanager.Build(ctx, root, binDir, log); err != nil {
			return "", err
		}
		return build(ctx, root, binDir, log)
	}
	return s
}

// alertmanagerBin is where prometheusWithAlertmanager's Build put it.
func alertmanagerBin(binDir string) string { return filepath.Join(binDir, "alertmanager") }

// ruleFile is the same for both: one group per repeat, each with one rule
// on its own series. Rule groups are evaluated at an offset within the
// interval that depends on the group's name (as scrapes do on the target),
// so the repeats see as many phases between scrape and evaluation as there
// are groups, as a box with many rule groups would. warmup adds the
// appliance's warmup: 0s (its default holds alerts of an instance that
// started less than 5 minutes ago; Prometheus refuses the key).
func ruleFile(repeats int, warmup bool) []byte {
	var b strings.Builder
	b.WriteString("groups:\n")
	for k := 1; k <= repeats; k++ {
		fmt.Fprintf(&b, "  - name: flip-%d\n", k)
		if warmup {
			b.WriteString("    warmup: 0s\n")
		}
		fmt.Fprintf(&b, `    rules:
      - alert: Flipped
        expr: flip_value{n="%d"} > 0
        for: 0s
        labels:
          severity: P1
`, k)
	}
	return []byte(b.String())
}

// The route is the same for both: a new aggregation group per alert, sent
// at once.
const (
	routeBody = `route:
  receiver: hook
  group_by: [alertname, n]
  group_wait: 0s
  group_interval: 1m
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: %s
        send_resolved: false
`
)

func scrapeBody(target string, interval time.Duration) string {
	return fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: %s
  evaluation_interval: %s
scrape_configs:
  - job_name: flip
    static_configs:
      - targets: [%q]
`, interval, min(interval, 10*time.Second), interval, target)
}

func applianceFiles(dir, target, hook, _ string, interval time.Duration, repeats int) (string, error) {
	if err := os.WriteFile(filepath.Join(dir, "flip.rules.yml"), ruleFile(repeats, true), 0o644); err != nil {
		return "", fmt.Errorf("write rules: %w", err)
	}
	cfg := scrapeBody(target, interval) +
		"rule_files: [flip.rules.yml]\n" +
		"autodetect: {enabled: false}\ncollectors: {enabled: false}\n" +
		"alerting:\n" + indent(fmt.Sprintf(routeBody, hook))
	path := filepath.Join(dir, "appliance.yml")
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

func prometheusFiles(dir, target, hook, amAddr string, interval time.Duration, repeats int) (string, error) {
	if err := os.WriteFile(filepath.Join(dir, "flip.rules.yml"), ruleFile(repeats, false), 0o644); err != nil {
		return "", fmt.Errorf("write rules: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"),
		[]byte(fmt.Sprintf(routeBody, hook)), 0o644); err != nil {
		return "", fmt.Errorf("write alertmanager config: %w", err)
	}
	cfg := scrapeBody(target, interval) +
		"rule_files: [flip.rules.yml]\n" +
		fmt.Sprintf("alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [%q]\n", amAddr)
	path := filepath.Join(dir, "prometheus.yml")
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// indent puts two spaces before every line of s.
func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}
