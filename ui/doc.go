// Package ui serves everything HTTP on the appliance's one port: it owns
// every route. No other package registers a handler on it; the stages expose
// what the routes need through small interfaces defined here, as
// Prometheus' web/api/v1 takes a RulesRetriever:
//
//   - Storage and Targets: the time-series store and the scrape manager;
//   - RulesRetriever (*rules.Manager): the rule groups and alerts for
//     /api/v1/rules and /api/v1/alerts, and the compiled alerting rules
//     whose extensions (sourceQuery, instances, escalated, warmup,
//     breachingInstances) are added to Prometheus' answers
//     (rules_api.go);
//   - NotifyRetriever (*notify.Notifier): alerts, groups, silences,
//     status, receivers and the delivery history behind Alertmanager's v2
//     API under /api/v2 (alertmanager_api.go), which amtool, Grafana and
//     Prometheus use;
//   - TierStatsSource (*storage.DB, Options.Tiers): /api/v1/status/tiers,
//     and with it max_source_resolution and the tiers used on the query
//     endpoints.
//
// Options has no slot for handlers or middleware from outside: a new
// route is added here.
//
// The stages keep their semantics (which alerts a filter selects, what a
// silence filter matches, which tier serves a query); ui keeps the paths,
// parameters, status codes and JSON. Tier planning is package storage's:
// ui only reads max_source_resolution into the request and reports the
// tiers used (X-Appliance-Tiers, the "tiers" field; tiers.go).
//
// The Prometheus-compatible API under /api/v1 is Prometheus' own
// web/api/v1 handler mounted on echo, so query, query_range, series, labels,
// label values, targets, status/* and the remote-write receiver answer with
// Prometheus' JSON, status codes and error format: Grafana's Prometheus data
// source and every Prometheus client work unchanged (query_range matrices
// are written by matrixCodec, byte for byte Prometheus' JSON, faster;
// jsoncodec.go). The appliance replaces
// a few endpoints where its model differs from Prometheus':
//
//   - /api/v1/status/config prints the appliance's whole config (secrets
//     redacted), not only the Prometheus part;
//   - /api/v1/metadata reads metadata kept by the storage per family, so
//     pushed series and targets that are gone still have it;
//   - /api/v1/import/prometheus takes the text format with optional
//     millisecond timestamps (VictoriaMetrics' path and semantics): the body
//     is parsed whole before anything is written, so a bad line is a 400
//     naming the line and nothing of the body is stored.
//
// In front of query_range, Options.RangeCache (package ui/rangecache)
// answers the past points of a grid answered before and asks the API only
// for the others.
//
// Next to them (federate.go, export.go): /federate as Prometheus serves it,
// so a Prometheus or Thanos can pull; /api/v1/export in VictoriaMetrics'
// JSON lines, raw tier only, written series by series; and /api/v1/import
// of those lines, committed in batches.
//
// Operations: the appliance's own /metrics, /-/healthy, /-/ready,
// /-/reload (POST or PUT), optional basic auth with bcrypt hashes (the same
// scheme as Prometheus' web config) and TLS.
//
// Request bodies of the ingest endpoints are limited to
// Options.MaxRequestBodyBytes, those of other requests to
// Options.OtherBodyBytes, by the decoded path (limits.go); a larger one is
// refused with 413 before anything is written. The server holds at most
// Options.MaxConnections connections, closing the one idle longest when
// full (connlimit.go), and times out slow reads, writes and idle
// keep-alives. Users and TLS files change on reload (webreload.go);
// bcrypt checks run one at a time (auth.go).
package ui
