package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/rules"
	"github.com/aiserve/appliance/rules/rulefile"
	"github.com/aiserve/appliance/ui"
)

// The rules part evaluates rule_files and rule_packs with Prometheus'
// rules manager over the raw tier, and serves them at /api/v1/rules and
// /api/v1/alerts. It runs even with no rules, so that a reload can add
// some.
func init() {
	partBuilders = append(partBuilders, partBuilder{rank: 20, build: buildRules})
}

type rulesPart struct {
	m *rules.Manager
}

func buildRules(a *appliance, cfg *config.Config) (part, error) {
	// Alerts link to the appliance's graph page (notify.go's externalURL:
	// web.external_url, else this host and port).
	ext, err := url.Parse(externalURL(cfg))
	if err != nil {
		return nil, fmt.Errorf("web.external_url: %w", err)
	}
	opts := rules.DefaultOptions()
	// The raw tier: rules need every sample of their windows, and their
	// output is stored like scraped data.
	opts.Queryable = a.db.Raw()
	opts.Appendable = a.db
	opts.Engine = a.engine
	opts.Logger = a.logger.With("component", "rules")
	opts.Registerer = prometheus.WrapRegistererWithPrefix("appliance_", a.reg)
	opts.ExternalURL = ext
	// The notify part (rank 10) is built first; without it alerts are logged.
	opts.Notifier = a.alertSink()
	m := rules.New(opts)
	if err := m.Update(rulesConfig(cfg)); err != nil {
		return nil, err
	}
	a.uiExtra = append(a.uiExtra, func(o *ui.Options) {
		o.Rules = m
		o.Middleware = append(o.Middleware, m.APIMiddleware)
	})
	return &rulesPart{m: m}, nil
}

func rulesConfig(cfg *config.Config) rules.Config {
	return rules.Config{
		Interval:       time.Duration(cfg.Global.EvaluationInterval),
		Files:          cfg.RuleFiles,
		Packs:          cfg.RulePacks,
		ExternalLabels: cfg.PrometheusConfig().GlobalConfig.ExternalLabels,
	}
}

func (p *rulesPart) name() string                         { return "rules" }
func (p *rulesPart) run(ctx context.Context) error        { return p.m.Run(ctx) }
func (p *rulesPart) applyConfig(cfg *config.Config) error { return p.m.Update(rulesConfig(cfg)) }

// printGeneratedRules writes, for `appliance check`, the PromQL that the
// extensions of the config's rule files and packs compile to.
func printGeneratedRules(w io.Writer, path string) {
	cfg, err := config.LoadFile(path)
	if err != nil {
		return
	}
	show := func(source string, data []byte) {
		f, errs := rulefile.Parse(data)
		if len(errs) > 0 {
			return
		}
		_, compiled := f.Compile()
		for _, c := range compiled {
			if c.Instances == nil {
				continue
			}
			fmt.Fprintf(w, "%s:%d: alert %s (severity %s) compiles to:\n  %s\n", source, c.Line, c.Alert, c.Severity, c.Expr)
		}
	}
	for _, pat := range cfg.RuleFiles {
		files, _ := filepath.Glob(pat)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				show(file, data)
			}
		}
	}
	for _, p := range cfg.RulePacks {
		if data, ok := rules.Pack(p); ok {
			show("pack "+p, data)
		}
	}
}
