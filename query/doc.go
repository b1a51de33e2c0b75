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
// storage): the evaluator is Prometheus' code, but for the aggregation
// pushdown below, which gives its answers bit for bit.
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
// # Aggregation pushdown
//
// Prometheus' engine evaluates a range query step by step: at every step
// it copies each series' window into a buffer, calls the function, and
// hashes each result into its group. For the shapes
//
//	agg by|without (...) (fn(sel[w]))            agg: sum, min, max, count, avg
//	histogram_quantile(φ, agg by (le, ...) (fn(sel[w])))
//	fn(sel[w])                                   (not with delayed name removal)
//
// where fn is one of rate, increase, delta, irate, idelta, resets,
// changes, deriv and the min/max/sum/count/avg/stddev/stdvar/present
// _over_time functions, the pushdown (pushdown.go) evaluates the
// subexpression in one pass per series over its samples, a window of two
// indices sliding along the steps, and hands the result back to
// Prometheus' engine as precomputed series (one point per step, a stale
// marker where a step has none) read by a selector that replaces the
// subexpression in the query text, padded to its length so that every
// annotation keeps its position. The enclosing expression is still the
// engine's. Each window is evaluated by Prometheus' own function
// (promql.FunctionCalls), except three that are exact in constant time
// per step: max_over_time and min_over_time (a monotonic queue keeping
// the earliest of equal values, NaN skipped as the function skips it),
// and rate/increase of a window without a counter reset (the function's
// float operations on the first and last samples, in its order); where
// the step is at least the range, windows do not overlap and a scan of
// each window replaces the queue. Series are evaluated in batches, each
// series' values at every step on its own core (the engine evaluates a
// query on one), then folded one after another: groups fold values as
// the engine's aggregation does (the same Kahan sum, the
// same incremental mean, the same NaN rules, series in the storage's
// order), and histogram_quantile calls promql.BucketQuantile with the
// buckets in the order the engine's vector holds them. So the answer is
// the engine's bit for bit, which TestPushdownDifferential checks on
// random data (counter resets, gaps, staleness markers, NaN, ±Inf, ±0,
// several label sets) for about 190 queries over random ranges, steps
// and windows, on Prometheus' TSDB and on the appliance's storage, and
// TestPromQLCompliance with the pushdown on.
//
// Not pushed down, the engine's as before: instant queries, selectors
// with offset, `@`, anchored or smoothed, duration expressions,
// subqueries and everything inside them, aggregations with a parameter
// (topk, quantile, ...), grouping by __name__. A query is handed whole to
// the engine when its data holds a native histogram, its storage read
// fails, or a function gives two series the same labels once their
// names are dropped (the engine merges those, or fails); its
// histogram_quantile is left to the engine (over the pushed
// aggregation) when buckets must be forced monotonic, whose annotation
// the engine counts its own way. Options.NoPushdown turns it off.
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
