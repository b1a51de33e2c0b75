package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aiserve/appliance/bench/harness"
	"github.com/aiserve/appliance/rules"
)

// packs are the embedded rule packs both systems evaluate.
var packs = []string{"vllm", "targets", "gpu"}

// system is one system under test: how to build and start it (System),
// how to write its config, and the prefix of its rules manager's metrics
// on its /metrics page.
type system struct {
	harness.System
	// config writes the system's config (and rule files) into dir and
	// returns the config's path.
	config func(dir string, scrape scrapeSetup) (string, error)
	// metricPrefix is put before the rules manager's metric names:
	// the appliance registers Prometheus' library metrics with appliance_.
	metricPrefix string
}

var systems = []system{
	{
		System: harness.Prometheus,
		config: func(dir string, sc scrapeSetup) (string, error) {
			// The same groups the appliance evaluates, compiled by it:
			// its extensions become plain PromQL, plus its warm-up group.
			synth := filepath.Join(dir, "synthetic.rules.yml")
			if err := os.WriteFile(synth, syntheticRuleFile(), 0o644); err != nil {
				return "", fmt.Errorf("write synthetic rules: %w", err)
			}
			data, err := rules.PrometheusRuleFile([]string{synth}, packs)
			if err != nil {
				return "", fmt.Errorf("compile the appliance's rules for Prometheus: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, "prometheus.rules.yml"), data, 0o644); err != nil {
				return "", fmt.Errorf("write rules: %w", err)
			}
			return writeConfig(dir, "prometheus.yml", sc, "rule_files: [prometheus.rules.yml]\n")
		},
		metricPrefix: "",
	},
	{
		System: harness.Appliance,
		config: func(dir string, sc scrapeSetup) (string, error) {
			if err := os.WriteFile(filepath.Join(dir, "synthetic.rules.yml"), syntheticRuleFile(), 0o644); err != nil {
				return "", fmt.Errorf("write synthetic rules: %w", err)
			}
			return writeConfig(dir, "appliance.yml", sc,
				"rule_files: [synthetic.rules.yml]\nrule_packs: ["+strings.Join(packs, ", ")+"]\n")
		},
		metricPrefix: "appliance_",
	},
}

// scrapeSetup is what both systems scrape, and how often.
type scrapeSetup struct {
	interval  time.Duration // scrape and evaluation interval
	vllm      []string      // the demo fleet's targets
	synthetic []string
}

// writeConfig writes Prometheus' config syntax, which the appliance also
// reads, with extra (rule file lines) appended.
func writeConfig(dir, name string, sc scrapeSetup, extra string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n",
		sc.interval, min(sc.interval, 10*time.Second), sc.interval)
	b.WriteString("scrape_configs:\n")
	for _, job := range []struct {
		name    string
		targets []string
	}{{"vllm", sc.vllm}, {"synthetic", sc.synthetic}} {
		fmt.Fprintf(&b, "  - job_name: %s\n    static_configs:\n      - targets:\n", job.name)
		for _, t := range job.targets {
			fmt.Fprintf(&b, "          - %q\n", t)
		}
	}
	b.WriteString(extra)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("write config: %w", err)
	}
	return path, nil
}
