package rules

import (
	"fmt"
	"maps"
	"slices"

	"github.com/prometheus/prometheus/model/rulefmt"
	"go.yaml.in/yaml/v3"
)

// PrometheusRuleFile returns the rule groups the appliance evaluates for
// these rule files (globs) and packs as one Prometheus rule file: the
// extensions compiled to the PromQL `appliance check` prints, plus the
// built-in group that records appliance_instance_warming. Prometheus (or
// `promtool check rules`) can load it and evaluate exactly the same rules,
// which is how bench/rules compares the two. Alerts of escalated rules
// carry their labels, so the file differs from the sources only where the
// extensions were compiled.
func PrometheusRuleFile(files, packs []string) ([]byte, error) {
	exported, err := PrometheusRuleFiles(Config{Files: files, Packs: packs})
	if err != nil {
		return nil, err
	}
	var out rulefmt.RuleGroups
	for _, f := range exported {
		out.Groups = append(out.Groups, f.Groups.Groups...)
	}
	data, err := yaml.Marshal(&out)
	if err != nil {
		return nil, fmt.Errorf("marshal rule groups: %w", err)
	}
	return data, nil
}

// ExportedFile is one source of a Config as a plain Prometheus rule file.
type ExportedFile struct {
	// Source is the rule file's path, "pack:NAME", "generated:NAME" or
	// "appliance:warmup" (the group that records
	// appliance_instance_warming).
	Source string
	Groups rulefmt.RuleGroups
}

// PrometheusRuleFiles returns what the manager evaluates for cfg, one
// file per source (the rule files, the packs, the generated groups, then
// the warm-up group), the extensions compiled to PromQL, for `appliance
// rules export`.
func PrometheusRuleFiles(cfg Config) ([]ExportedFile, error) {
	ids, err := sources(cfg.Files, cfg.Packs)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Generated)) {
		ids = append(ids, generatedPrefix+name)
	}
	staged, err := newLoader().stageWith(ids, cfg)
	if err != nil {
		return nil, err
	}
	var out []ExportedFile
	for _, id := range append(staged.order, warmupID) {
		out = append(out, ExportedFile{Source: id, Groups: *staged.groups[id]})
	}
	return out, nil
}
