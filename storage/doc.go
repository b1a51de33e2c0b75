// Package storage is the appliance's embedded time-series store and the only
// importer of VictoriaMetrics' lib/ packages.
//
// # Basics
//
// A DB stores float samples in VictoriaMetrics' lib/storage engine and
// exposes them through Prometheus' own interfaces, so that Prometheus'
// scrape manager and remote-write receiver (storage.AppendableV2), its rules
// manager (storage.Appendable), its PromQL engine and its web/api/v1
// (storage.SampleAndChunkQueryable, storage.ExemplarQueryable and
// TSDBAdminStats) work on it unchanged.
//
// Layout under Options.Path:
//
//	tsdb/raw/   raw samples, kept for Options.RetentionRaw (default 7 days)
//	tsdb/1m/    1-minute rollups (a later issue; not created yet)
//	tsdb/5m/    5-minute rollups (a later issue; not created yet)
//	state.db    bbolt file for state that is not a time series; every
//	            package has its own bucket (this one: "storage.metadata",
//	            metric family metadata)
//
// Metric metadata (type, help, unit) is kept per metric family, up to four
// variants each, in memory and in state.db, so /api/v1/metadata survives a
// restart.
//
// # Concurrency
//
// DB methods are safe for concurrent use. An appender (from AppenderV2 or
// Appender) belongs to one goroutine and must not be used after Commit or
// Rollback, as Prometheus' storage.Appender documents. Appenders buffer their
// samples in memory; Commit writes them to VictoriaMetrics in one call, and
// Rollback drops them.
//
// # Durability
//
// A committed sample is searchable within about a second (or at once after
// Flush) and on disk within VictoriaMetrics' flush interval of a few seconds:
// after kill -9, everything but the last few seconds is there. Close writes
// everything.
//
// # Caveats
//
// Precision. VictoriaMetrics stores values as decimals with one exponent per
// block of a series (up to 8k samples). A value keeps about 18 minus
// log10(largest/value) significant digits, where largest is the largest
// absolute value in its block: at least 12 digits while a series stays
// within six orders of magnitude, fewer for the small values of a series
// that also holds huge ones. Tests compare with a relative tolerance of 1e-12.
//
// NaN. Prometheus' staleness marker (value.StaleNaN) is stored and read back
// bit for bit. Any other NaN (a summary quantile without observations, for
// example) cannot be stored: Append accepts it, drops it and counts it as
// appliance_storage_append_errors_total{reason="nan"}. ±Inf are stored.
//
// Time range. A sample older than the raw retention or more than two days
// ahead is refused with storage.ErrOutOfBounds (the scrape loop counts those
// and goes on) and counted as reason="out_of_bounds". VictoriaMetrics itself
// would drop such rows silently, with a rate-limited log line.
//
// Native histograms are refused with storage.ErrNativeHistogramsDisabled;
// exemplars and start timestamps are accepted and not stored; the
// ExemplarQuerier finds nothing.
//
// Duplicates. Samples with the same timestamp in one series are merged at
// query time with VictoriaMetrics' rule: the largest value wins, and a
// staleness marker only when all of them are markers.
//
// Regexps in matchers are anchored as in Prometheus, but `.` does not match a
// newline inside a label value (Prometheus compiles with (?s)).
//
// Deleting. Delete removes whole series only; a time range that does not
// cover all the data kept returns ErrNotSupported. Snapshot is not supported.
//
// Process-wide state. VictoriaMetrics registers its flags on
// flag.CommandLine and keeps global caches and a global logger. The first
// Open sets them, once per process: the cache budget (Options.MemoryBudget),
// WARN level, and its log lines go to the Logger of the DB opened last. The
// appliance never parses flag.CommandLine, so none of those flags reaches its
// command line.
package storage
