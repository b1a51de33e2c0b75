// Package slo turns the slos section of the configuration into recording
// and burn-rate alerting rules, and writes the weekly SLO report.
//
// # Basics
//
// An SLO is latency (good = requests of a histogram at or under a
// threshold that is one of its bucket bounds) or availability (probe
// success, or good and total counters). Rules returns one rule group per
// SLO, named slo:<name>, for the rules part to load beside the rule files:
//
//   - slo:sli_error:ratio_rate<w> for w in 5m, 30m, 1h, 2h, 6h, 1d and 3d:
//     the share of bad events over w, one series per value of the SLO's
//     `by` labels, with the label slo;
//   - slo:objective:ratio, the objective;
//   - SLOBudgetBurnFast (severity P0) when both the 1h and 5m, or both the
//     6h and 30m, error ratios exceed factor × (1 − objective), and
//     SLOBudgetBurnSlow (P1) for the pairs 1d/2h and 3d/6h: the
//     multi-window, multi-burn-rate alerts of the SRE workbook (chapter 5).
//     The factor is the share of the budget the long window may spend
//     (2%, 5%, 10%, 10% for 28d and 30d windows; Sloth's 8%, 12.5%, 20%,
//     42% for 7d) × window / long window, so a steady burn at the budget
//     rate never alerts and 14.4× pages within minutes on a 30d window.
//
// Warming instances (appliance_instance_warming == 1) are left out of
// every ratio, so an instance that is starting holds these alerts as it
// holds any other.
//
// Compute computes the weekly report of an ISO week in a zone through a
// Source (the query engine over the tiers, or a running appliance's API),
// and RenderHTML (self-contained: inline CSS and SVG), RenderEmailHTML
// (tables and inline styles only, for mail clients), RenderMarkdown (chat,
// and the mail's text part) and RenderJSON write it. The same report
// always renders to the same bytes: numbers have a fixed format, lists a
// fixed order, and the clock is the Report's GeneratedAt, which for a
// week is its scheduled send time (ReportTime).
//
// The report lists the week's releases (ReportOptions.Releases: the
// annotations tagged release of the state file, or through APISource the
// running appliance's GET /api/v1/appliance/annotations) with each
// latency SLO's P95 over ReleaseWindow before and after, narrowed to the
// release's job, instance and the SLO's by labels where it names them.
//
// Archive keeps rendered reports in the state file (bucket slo_reports);
// Reporter serves them, computing the weeks not archived; Scheduler sends
// the due week once through an Outbox (notify's EnqueueOnce, whose key is
// written in the same transaction as the messages, so a restart never
// sends a week twice) and catches up after downtime. Statuses is the
// /slo page's list: budget left and burn rate per window, worst first.
//
// # Caveats
//
// A threshold is matched to the histogram's `le` values by number, never
// by text: Prometheus 3 writes le="1.0" where older servers wrote le="1",
// and TGI writes 0.00015000000000000001. Bounds resolves the text the
// data uses; CheckBounds refuses a threshold that is no bound, naming the
// nearest ones. Without data the rules match the usual spellings of the
// number with a regular expression.
//
// The raw tier keeps 7 days, so the report reads last week from the 1m
// tier. Counters and buckets stay exact there (the rollups keep the last
// value with resets handled); probe latency quantiles are computed from
// rollups of a gauge and are marked approximate (≈).
package slo
