// Package query runs PromQL with Prometheus' own engine (promql.Engine) under
// the appliance's limits: a per-query timeout, a cap on the samples one query
// may hold in memory, and a cap on queries running at once.
//
// The engine reads whatever storage.Queryable the caller passes per query,
// so the HTTP API and the rule evaluator share one Engine and one set of
// limits. Queries beyond MaxConcurrent wait for a slot (as Prometheus' active
// query tracker makes them wait) until their context ends.
//
// Results match Prometheus' to the precision the storage keeps (see package
// storage): the evaluator is Prometheus' code, not a re-implementation.
//
// # Tiers
//
// Tier planning is package storage's (see its doc, "Who plans tiers"):
// which tier serves which part of a range, and how the query has to change
// for it. When the storage.Queryable of a query implements TierPlanner
// (storage.DB does), the engine parses the query, lets the planner adapt
// it (AdaptForTiers), and runs the adapted text with the lookback delta
// the planner asks for. The answer is then exactly the widened query's: on
// the 5m tier rate(x[5m]) answers rate(x[10m]), unless the planner read
// the 5m tier only because its whole windows give the 1m tier's answer
// (storage's exactTier), where nothing is widened. Rules evaluate over
// storage.DB.Raw, which is no TierPlanner, so their queries are never
// rewritten.
//
// # Step reads and split ranges
//
// A range query whose windows (a selector's range, or the lookback) are
// shorter than its step reads only the samples in them (stepread.go):
// the storage keeps just those when it implements StepSelecter
// (storage.DB does), any other Queryable's series are filtered on the
// way to the engine. A long range query runs as parts on every core
// (split.go). Neither changes an answer: TestPromQLCompliance runs
// Prometheus' own PromQL test files through both, every range query
// split.
//
// # Remote read
//
// RemoteRead (remoteread.go) adds prometheus.yml's remote_read endpoints
// to every query, after tier planning: the query's own Queryable is the
// primary, each endpoint a secondary whose failure is a warning of the
// answer (Prometheus' fanout semantics).
//
// # Hub mode
//
// RemoteQuery (remotequery.go, storage.remote_query) sends every query
// to a remote Prometheus HTTP API (Thanos Query, vmselect, Mimir)
// instead of the local storage, before tier planning and remote_read:
// the remote evaluates the PromQL. Its Queryable answers series, labels,
// label values and samples from the same remote, for what reads without
// PromQL.
package query
