package rules

import "github.com/aiserve/appliance/rules/rulefile"

// CompiledRules returns the alerting rules compiled from one source: the
// file name Prometheus' rules API reports for a group (a rule file's path,
// or a pack's name), with the appliance's extensions (instances,
// escalate_when_all, warmup, the expression as written). Package ui adds
// them to /api/v1/rules through its RulesRetriever interface.
func (m *Manager) CompiledRules(file string) []rulefile.Compiled {
	return m.loader.compiledFor(file)
}
