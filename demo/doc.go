// Package demo simulates a fleet of vLLM-like model servers on localhost.
//
// It serves three users: `appliance demo`, so a newcomer sees real-looking
// data within a minute; end-to-end tests of the real binary, which make an
// instance slow, down or restarted; and the scrape benchmark, which needs a
// few hundred cheap targets.
//
// # Basics
//
// NewFleet binds one listener per instance (instance i on BasePort+i, or
// random free ports with BasePort 0) and starts nothing; a taken port fails
// there with an error wrapping ErrPortInUse that names the address. Run
// serves until its context is done, ends streams in flight and returns.
// Targets lists the addresses in instance order.
//
// Each instance answers like vLLM 0.11 with a single API server:
//
//   - GET /metrics: the fixture vllm.prom's families, HELP, TYPE, label
//     sets and bucket boundaries, formatted like prometheus_client
//     (`2053.0`, `2.172179e+06`, `1.17e+010`), with the `_created` gauge
//     families kept, as in the fixture. Each served model is one
//     model_name child (engine="0") in every vllm: family. About 700 series
//     with two models and 390 with one (SeriesCount), so ~140 two-model
//     instances make 100,000 active series.
//   - POST /v1/chat/completions and /v1/completions, streaming
//     (Server-Sent Events in vLLM's shape: for chat a role-only first
//     chunk, one chunk per token, a finish chunk, the usage chunk when
//     stream_options.include_usage, then `data: [DONE]`) or not. The answer
//     is always max_tokens tokens (default 16), so finish_reason is
//     "length". Each request is recorded in the metrics with the times
//     measured on the wall clock.
//   - GET /v1/models, /health, /version.
//   - GET and POST /demo/control with ControlRequest, e.g. {"slow": 3},
//     {"queue": 20} (a standing backlog: requests waiting, KV cache full,
//     queue time up, prefill and decode unchanged), {"decode_slow": 3}
//     (the decode phase alone slower), {"down": true}, {"restart": true},
//     {"first_token_ms": 300, "per_token_ms": 20}. It keeps working while
//     the instance is down.
//
// The same controls are methods: Instance.SetSlow, SetQueue,
// SetDecodeSlow, SetDown, Restart, SetStreamDelays, and Fleet.SetAllSlow.
//
// # Showcase
//
// `appliance demo` runs the fleet as a showcase (showcase.go): a Sidecar
// on a free port serves one simulated NVIDIA GPU in DCGM exporter's names
// (busier and hotter as instances are slowed) and a webhook receiver that
// logs each alert it would send; ShowcaseConfig scrapes the fleet, the GPU
// and the appliance every 5 s, turns on the rule packs vllm, targets, gpu
// and probes plus the demo's own fast rule (ShowcaseRules, DemoProbeSlow),
// runs an llm probe against each instance with fixed stream delays well
// under its thresholds, and routes alerts to the logging receiver. POST
// /demo/control {"slow": 3} on an instance then puts its probe's TTFT
// above the threshold at the next run (amber) and fires DemoProbeSlow
// (P1, red) about 30 s later; the probes pack follows within minutes.
//
// # Simulation
//
// No goroutine runs per instance. The state advances lazily, under the
// instance's lock, when it is scraped or serves a request: from the last
// update to now (the injected clock, FleetOptions.Now) in steps of 5 s, each
// model gets a Poisson number of requests around RequestRate, shaped by a
// ±35 % sinusoid over 30 minutes and short spikes in about 4 % of the
// minutes. Every request draws prompt and output tokens, queue, prefill and
// inter-token times from log-normal distributions (TTFT median ~80 ms, ITL
// ~25 ms, e2e a few seconds at normal load), multiplied by the slow factor;
// running, waiting and KV-cache usage follow the load by Little's law. The
// work of one advance is capped: after a long gap at most 60 steps and 256
// sampled requests per model, each standing for an integer number of
// requests, and inter-token histograms are filled in bulk from the
// distribution's CDF. Histograms stay cumulative with +Inf equal to _count,
// request_success_total sums to the request histograms' counts, and
// counters only fall on Restart.
//
// Given the same Seed, options and sequence of clock readings and calls, the
// pages are byte-for-byte the same. The load curve (drift and spikes)
// depends only on the seed and the time.
//
// # Caveats
//
//   - Real vLLM serves one model per process; an instance with several
//     models puts one child per model in each family.
//   - The chat stream's role-only chunk is sent at once, before the
//     first-token delay, so a probe that stops its TTFT clock on the first
//     event instead of the first token shows a visibly wrong TTFT.
//   - Stream pacing uses the wall clock whatever FleetOptions.Now is; the
//     slow factor scales fixed stream delays too.
//   - No gzip on /metrics: on localhost it would cost the fleet CPU for
//     nothing.
//   - Requests to the real API while the clock does not move add to the
//     metrics alone, which is what tests of served requests rely on.
package demo
