// Package rules evaluates recording and alerting rules with Prometheus'
// own rules manager (github.com/prometheus/prometheus/rules) over the
// appliance's query engine and raw tier.
//
// # Basics
//
// Rule files are Prometheus' format plus the extensions of package
// rulefile (severity, instances, escalate_when_all, warmup), which compile
// to plain PromQL before the manager sees them; embedded packs (packs/*.yml)
// are rule files switched on by name. New builds a Manager, Update loads
// a Config (every file is parsed and checked before anything is
// replaced), Run evaluates until its context ends.
//
// Because the evaluation is Prometheus', so are the semantics users know:
// `for`, `keep_firing_for`, templates, `limit`, `query_offset`, staleness
// of recording rule output, the series ALERTS and ALERTS_FOR_STATE, and the
// restore of alert state after a restart (an alert pending before keeps the
// time it had served, one firing fires again at the first evaluation after
// the restore, with the start it had). The rules package adds:
//
//   - the group appliance-warmup, which records appliance_instance_warming
//     {instance} = 1 while an instance warms up (the longest warm-up of any
//     rule, default 5m);
//   - Notifier, where alerts go (logged until the notify part is wired);
//   - CompiledRules, the compiled alerting rules of a source with their
//     extensions.
//
// The package serves no HTTP: package ui serves /api/v1/rules and
// /api/v1/alerts with Prometheus' API handler over the Manager (RuleGroups,
// AlertingRules) and adds the extensions as extra fields from
// CompiledRules, all through its RulesRetriever interface.
//
// # Caveats
//
// Options must name the raw tier: a rule over downsampled data would see
// averages where it needs every sample. Evaluation reads what the storage
// makes visible, which for VictoriaMetrics lags appends by up to about a
// second: an alerting rule that reads a recording rule of the same group
// sees the recording rule's previous value.
//
// Prometheus' manager starts a goroutine per group when rules are loaded,
// so Update before Run only stages the config; Run applies it.
package rules
