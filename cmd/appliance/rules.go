package main

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/query"
	"github.com/aiserve/appliance/rules"
	"github.com/aiserve/appliance/rules/rulefile"
	"github.com/aiserve/appliance/storage"
)

// newRules builds the rules stage: rule_files and rule_packs evaluated
// with Prometheus' rules manager over the raw tier, alerts handed to sink
// (the notifier). It is built even with no rules, so that a reload can add
// some. The config is applied when Run starts.
func newRules(cfg *config.Config, db *storage.DB, engine *query.Engine, sink rules.Notifier, logger *slog.Logger, reg prometheus.Registerer) (*rules.Manager, error) {
	// Alerts link to the appliance's graph page (notify.go's externalURL:
	// web.external_url, else this host and port).
	ext, err := url.Parse(externalURL(cfg))
	if err != nil {
		return nil, fmt.Errorf("web.external_url: %w", err)
	}
	opts := rules.DefaultOptions()
	// The raw tier: rules need every sample of their windows, and their
	// output is stored like scraped data.
	opts.Queryable = db.Raw()
	opts.Appendable = db.Own() // counted by storage.max_series, never refused
	opts.Engine = engine
	opts.Logger = logger
	opts.Registerer = reg
	opts.ExternalURL = ext
	opts.Notifier = sink
	m := rules.New(opts)
	if err := m.Update(rulesConfig(cfg)); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return m, nil
}

// selfPack is the rule pack about the appliance itself (its self-scrape):
// loaded whatever rule_packs lists.
const selfPack = "appliance"

func rulesConfig(cfg *config.Config) rules.Config {
	packs := cfg.RulePacks
	if !slices.Contains(packs, selfPack) {
		packs = append(slices.Clip(packs), selfPack)
	}
	return rules.Config{
		Interval:       time.Duration(cfg.Global.EvaluationInterval),
		Files:          cfg.RuleFiles,
		Packs:          packs,
		ExternalLabels: cfg.PrometheusConfig().GlobalConfig.ExternalLabels,
		// The SLOs' recording and burn-rate rules (slo.go).
		Generated: sloRuleFiles(cfg),
		// alerting.severity_map turns severity into the priority label
		// routing reads; rules.warmup is the rule files' warm-up.
		Severities: cfg.Alerting.Severities(),
		Warmup:     time.Duration(cfg.Rules.Warmup),
	}
}

// generatedRules is what `appliance check` prints for a parsed rule
// file or pack (source): the PromQL its extensions compile to.
func generatedRules(source string, f *rulefile.File) []string {
	_, compiled := f.Compile()
	var out []string
	for _, c := range compiled {
		if c.Instances == nil {
			continue
		}
		sev := c.Severity
		if sev == "" {
			sev = "none, routes as " + c.Priority
		}
		out = append(out, fmt.Sprintf("%s:%d: alert %s (severity %s) compiles to:\n  %s", source, c.Line, c.Alert, sev, c.Expr))
	}
	return out
}
