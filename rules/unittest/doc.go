// Package unittest runs rule unit tests in promtool's format (`promtool
// test rules`), with the appliance's rule file extensions, for the command
// `appliance test rules FILE...`.
//
// # Basics
//
// A test file is promtool's YAML: rule_files (relative to the test file,
// globs allowed), evaluation_interval (default 1m), group_eval_order,
// fuzzy_compare and tests, each with interval, input_series in PromQL's
// expanding notation (`1+2x10`, `_`, `stale`), alert_rule_test
// (eval_time, alertname, exp_alerts with exp_labels and exp_annotations),
// promql_expr_test (expr, eval_time, exp_samples), external_labels,
// external_url, name and start_timestamp. Run evaluates like promtool:
// every group at each evaluation interval from the start up to the last
// eval_time, with Prometheus' rules manager and the appliance's PromQL
// engine (package query), over an in-memory Prometheus TSDB loaded step by
// step (promqltest's LazyLoader, promtool's own loader). It prints what
// promtool prints ("Processing test file", SUCCESS or FAILED with the
// expected and actual alerts or samples) and returns promtool's exit
// status: 0 when every test passed, 1 otherwise.
//
// The appliance's extensions:
//
//   - a rule file that uses the rule extensions of package rulefile
//     (instances, escalate_when_all, warmup) is loaded the way the
//     appliance loads it: parsed and checked by rulefile and compiled to
//     the PromQL the appliance evaluates (warm-up only where the file sets
//     it, as with rules.warmup unset; alerts carry the priority label the
//     default severity map gives), so that warm-up holds and instance
//     counts can be tested with input series (process_start_time_seconds,
//     up);
//   - a test file may list rule_packs: embedded packs by name (Options.Pack),
//     always compiled as the appliance compiles them (their warm-up is on,
//     as in the appliance).
//
// A rule file without extensions is what Prometheus loads, and is loaded
// exactly as Prometheus loads it (rulefmt), so a plain file gives
// promtool's verdicts: its alerts carry no priority label, which the
// appliance adds when it runs the file.
//
// # Caveats
//
// The samples live in Prometheus' in-memory TSDB, not in the appliance's
// VictoriaMetrics tiers: test times start at the Unix epoch, which the
// tiers' retention would drop. promtool's --diff, --debug and JUnit output
// are not implemented; --run and --ignore-unknown-fields are.
package unittest
