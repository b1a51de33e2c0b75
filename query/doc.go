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
// When the storage.Queryable of a query implements TierPlanner
// (storage.DB does), the engine asks it, before the query runs, how coarse
// the data it will read is, and adapts the query, since Prometheus' engine
// computes range windows and the lookback itself: range selectors shorter
// than two tier intervals are widened to two, the lookback delta becomes
// at least two intervals, and count_over_time becomes a sum of the stored
// per-window counts (see forTiers). The answer is then exactly the
// widened query's: on the 5m tier rate(x[5m]) answers rate(x[10m]). Rules
// evaluate over storage.DB.Raw, which is no TierPlanner, so their queries
// are never rewritten.
package query
