// Package histconv stores native histograms as classic ones.
//
// The storage keeps float samples only (VictoriaMetrics has no native
// histogram type), so a native histogram that arrives by remote write
// (1.0 or 2.0, integer or float, exponential schemas -4..8 or the custom
// buckets schema -53) or by a scrape with scrape_native_histograms is
// written as the series a classic histogram has:
//
//	<name>_bucket{le="<bound>"}  cumulative count of observations <= bound
//	<name>_bucket{le="+Inf"}     all bucketed observations
//	<name>_count                 the histogram's count
//	<name>_sum                   the histogram's sum
//
// histogram_quantile, rate and the dashboard then work on them as on any
// classic histogram. The counts are exact at every emitted bound: each
// bound is a bucket boundary of the histogram's schema, and the
// cumulative count there is the sum of the buckets below it.
//
// # Which bounds
//
// A sparse histogram at schema 3 has 8 buckets per power of two, so a
// latency spread over 1 ms..100 s may populate ~130 of them, and the grid
// of all possible bounds is unbounded. A Converter emits:
//
//   - the upper bound of every populated bucket, and the lower bound of a
//     populated bucket whose lower neighbour is empty (the start of each
//     run), so that every populated native bucket is also a classic bucket
//     with the same two bounds: histogram_quantile's linear interpolation
//     then stays inside the native bucket the quantile falls in, and the
//     classic answer is within that bucket's width of the native one;
//   - +Inf;
//   - for the custom-bucket schema, every custom bound (the classic layout
//     the sender had, small and fixed).
//
// Bounds are kept stable per series: a Converter remembers, for each
// series, the bounds it emitted and keeps emitting them (with the exact
// cumulative count there) while the schema and zero threshold stay the
// same, so a bucket that empties in a gauge histogram, or a run that
// later merges with a neighbour, does not end a `_bucket` series. For a
// counter histogram the populated buckets only grow, so the set only
// grows. When the schema changes (a client lowering its resolution, which
// client_golang does when it reaches NativeHistogramMaxBucketNumber) the
// memory restarts from the new schema's bounds: old bounds are not on the
// new grid in general, and a bound whose count would be guessed is not
// emitted. The memory is bounded (MaxSeries, kept in two generations so
// that series not seen for a generation are forgotten).
//
// A histogram with more than MaxBuckets bounds is lowered in resolution
// (schema minus one, halving the buckets, as Prometheus'
// native_histogram_bucket_limit does) until it fits; remembered bounds
// are dropped first. So one series costs at most MaxBuckets+3 series.
//
// # Failures
//
// A histogram that fails validation (spans and buckets disagree, negative
// counts, an unknown schema) is dropped and counted in
// appliance_native_histograms_dropped_total{reason}; the appender returns
// no error for it, so the rest of a remote-write request or scrape is
// stored. The appender reports what it dropped (Appender.Dropped), so the
// HTTP ingest can refuse a request with 400 when nothing of it could be
// stored. Converted histograms are counted in
// appliance_native_histograms_converted_total.
//
// # Staleness and exemplars
//
// A stale marker for a native series (Prometheus' scrape loop writes a
// float stale NaN under the native series' labels when it disappears)
// becomes stale markers for every classic series it had. Exemplars of a
// native histogram are attached to the `_bucket` series whose bucket
// holds the exemplar's value, where a query over `_bucket` finds them.
package histconv
