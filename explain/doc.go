// Package explain answers "why is it slow, and where?" for one model
// service, from what storage holds, through PromQL only.
//
// Three questions, each one function over a Querier (the appliance's
// query engine in production, behind a two-method interface):
//
//   - Breakdown: the request split into the phases the engine exports
//     (vLLM: queue, prefill, decode; TGI: queue, inference; Triton: queue,
//     compute input, infer and output), plus the part outside the server
//     (the probes' end-to-end time minus the server's), as means over time
//     and each phase's P95. Means add up, percentiles do not, so the stack
//     is of means and the P95s stand alone.
//   - Explain: the window before a P95 rise (found in the P95 series, or
//     given as the time an alert fired) against the window after: which
//     phase grew and what share of the mean's change it carries, and the
//     signals that moved with it (requests waiting, KV cache, GPU, errors,
//     restarts, a version label), ranked by how far they moved against
//     their noise floor, each with its numbers and a chart link. It states
//     what the numbers show; with no phase metrics it says which are
//     missing.
//   - Compare: two distributions of one latency histogram (two values of
//     a version label, or two time windows), as CDFs from the buckets and
//     P50/P95/P99 from histogram_quantile with the deltas.
//
// What to query comes in a Spec: the caller (package ui/dashboard, from
// engines.yaml, the one map from engine to metric names) has chosen the
// metric names and written each measure and signal as a PromQL template
// whose only placeholder left is $__window, the averaging window.
//
// Finding the rise: the P95 series over the lookback (1 h by default, a
// point per 15 s, each over the last minute) is split where the level
// before and after differ most (a t-statistic of the two means against the
// series' noise, estimated from successive differences). The split is a
// rise when the statistic is at least 3 and the level after is 1.2× the
// level before or more; a second rise within the new level (a step up
// from a step up) is the one explained, as the most recent. The signals'
// level after is read over the last two steps (the gauges now). The after
// window starts one step before the first
// point of the new level (the requests that raised it were recorded
// there), the before window is up to 10 minutes before that; when the P95
// of the after window is not 1.1× the before window's, the step was a
// spike at the edge and the answer is steady. Given a
// time (an alert's start), the rise is looked for in the series up to it
// (an alert fires after its for: duration, after the latency rose); when
// there is none within 30 minutes before it, the windows are the 10
// minutes before and after the given time.
//
// Windows' means are ratios of rates (rate of _sum over rate of _count),
// so they are the exact means of the requests recorded in the window.
package explain
