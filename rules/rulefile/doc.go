// Package rulefile parses rule files: Prometheus' format plus the
// appliance's extensions, and compiles the extensions to plain PromQL so
// that Prometheus' rules manager evaluates the result unchanged.
//
// # Basics
//
// A rule file is what `promtool check rules` accepts, with these additions:
//
//   - every alerting rule carries the label severity: P0, P1 or P2 (in its
//     own labels or its group's);
//   - an alerting rule may say `instances: {min: N}`, `{ratio: R}` or
//     `{all: true}`, with an optional `by: [labels]` (default [instance]):
//     its expression must be a comparison (`X > 2`), evaluated per
//     instance, and the rule fires once per group (the expression's labels
//     without the `by` labels) when at least N, at least the share R, or all
//     of the group's instances breach. The breaching instances are listed in
//     the annotation breaching_instances;
//   - `escalate_when_all: P0` (with min or ratio) adds a second alerting
//     rule of the same name and that severity for "all instances breach";
//     the lower-severity rule also fires when all breach, so there is never
//     a moment with neither (notify inhibits the lower one);
//   - `warmup: 5m` on a group or a rule (default 5m, 0 switches it off):
//     an instance that started less than warmup ago raises no alert; once
//     the warm-up is over, an alert whose condition still holds goes
//     pending and fires after its `for`, like any other.
//
// Parse validates in stages, like a compiler: the file's structure first
// (unknown keys), then Prometheus' own checks (rulefmt), then the
// extensions. A stage with errors ends the check, so a broken file gives
// the errors a user fixes first.
//
// # Caveats
//
// This package imports none of the appliance's packages, so that config
// can check rule files with it. Warm-up matches instances by the label
// instance, the label appliance_instance_warming carries: an expression
// whose result has no instance label is never held.
package rulefile
