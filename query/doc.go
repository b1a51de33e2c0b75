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
package query
