// Package pipeline reads the pipelines of the config (config.PipelineConfig):
// chains of segments, each measured on its own device (camera → edge
// upload, edge inference, edge → cloud sync, cloud analysis), whose
// devices often push their series (/api/v1/write,
// /api/v1/import/prometheus) from behind NAT.
//
// For each segment it reads, through PromQL only, the mean time per item
// and the P95 over time and over the whole range, with package explain's
// breakdown (explain.Breakdown: each segment is a phase), and the
// transfer counters the config names (bytes, retries, failures) as their
// increase over the range. Means add up and percentiles do not, so a
// segment's share of the chain is its mean over the sum of the segments'
// means, and the slowest segment is the one with the largest mean; the
// P95s stand alone.
//
// A segment is a histogram (mean = rate(_sum) / rate(_count), P95 from
// the buckets, summed over the series the selector picks) or a gauge of
// seconds (mean = its average over time and series, P95 = the highest
// series' 95th percentile over time).
package pipeline
