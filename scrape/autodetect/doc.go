// Package autodetect finds the model servers and exporters on the box so
// that `appliance run` needs no config on a GPU box with vLLM.
//
// # Basics
//
// A Detector looks at localhost's usual ports (vLLM 8000, SGLang 30000,
// TGI 3000 and 80, Triton's metrics 8002, Ollama 11434, DCGM exporter 9400,
// node_exporter 9100; configurable) at start and every few minutes, and
// recognises each server by what it answers: the metric names of its
// /metrics page (vllm:*, sglang:*, tgi_*, nv_inference_*, DCGM_FI_*,
// node_exporter's), or for Ollama, which has no /metrics, GET /api/version.
// A port that answers anything else is left alone.
//
// What it finds reaches the scrape manager the way Prometheus' own
// discoveries do: the Detector is a scrape.JobSource that adds one job per
// kind (job vllm, sglang, tgi, triton, ollama, dcgm, node), each with a
// service discovery of its own that hands out the found targets. Their
// discoveredLabels in /api/v1/targets carry __meta_autodetect_detected,
// __meta_autodetect_kind, __meta_autodetect_port and
// __meta_autodetect_evidence. For each OpenAI-compatible server (vLLM,
// SGLang, TGI) it makes an llm probe named <kind>-<port>; for Ollama an
// http probe of /api/version (a generation request would load a model).
//
// # Caveats
//
// A found server stays a target while its port is down, so that a crash
// shows as up 0 rather than as a target that vanished. A server on a port
// the config file already scrapes (Options.Scraped) gets its probe but no
// second scrape job.
package autodetect
