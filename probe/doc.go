// Package probe runs outside-in probes: black-box HTTP checks and LLM
// streaming requests, and writes what they see as series.
//
// # Basics
//
// An http probe sends one request and checks its status and body, like
// blackbox_exporter's http module, and writes blackbox_exporter's series:
// probe_success, probe_duration_seconds, probe_http_status_code,
// probe_http_duration_seconds{phase} and probe_ssl_earliest_cert_expiry.
//
// An llm probe sends a real, small, streaming generation request (OpenAI
// /v1/chat/completions or /v1/completions with stream:true, or Ollama's
// /api/generate and /api/chat NDJSON) and measures what a user waits for:
// the time to the first generated token (probe_ttft_seconds), the mean gap
// between the following tokens (probe_tpot_seconds), the whole request
// (probe_duration_seconds) and the output tokens (probe_output_tokens,
// from the server's usage when it sends one). blackbox_exporter stops its
// clock at the first response byte, which for a stream is the headers; here
// the clock stops at the first event that carries text, so vLLM's
// role-only first chunk does not count.
//
// Every series has the label probe="<name>". A failed run writes
// probe_success 0 with a reason label (timeout, connection, http_status,
// no_token, malformed_stream, body_mismatch).
//
// # Lifecycle
//
// NewManager starts nothing; Manager.Run runs every probe on its own
// interval until its context ends. Each run is one commit to the
// storage.AppendableV2. A series a run no longer writes, and every series
// of a probe that is removed on reload, gets a staleness marker, so
// queries stop showing it at once.
//
// # Caveats
//
// A probe sends one request at a time and opens a new connection for each
// run (so connect and TLS times are real). The probes rule pack is in
// rules/probes.yml of this package.
package probe
