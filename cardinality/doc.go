// Package cardinality answers "which series are filling the store, and who
// sends them?": the top metrics by series, the labels with the most values,
// the top label="value" pairs, each scrape target's series against its
// sample_limit and the growth since yesterday (Analyzer.Report, served as
// GET /api/v1/appliance/cardinality and drawn on /cardinality); and it
// flags labels whose values look like ids (UUIDs, long hex or digit
// strings, long tokens) or that have more than MaxLabelValues values for
// one metric, with the metric and the target (job, instance) that sends
// them.
//
// Writer runs the check every interval and writes each flag as the series
//
//	appliance_cardinality_warning{metric, label, job, instance, reason} = values
//
// (reason "id_like" or "too_many_values", values the label's distinct
// values for that metric and target), with a staleness marker once a flag
// is gone; the rule pack "targets" alerts on it (P2).
//
// The figures come from the raw tier's per-day index (storage.DayStatus,
// what /api/v1/status/tsdb reads) and from label-value searches over the
// last hour; the hard limit itself is the storage's (storage.max_series,
// storage.SeriesLimit).
package cardinality
