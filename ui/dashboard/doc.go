// Package dashboard holds the built-in dashboard's definitions and chooses
// their panels from what the appliance stores.
//
// A dashboard is data (dashboards/*.yaml, embedded; more from the
// ui.dashboards_dir directory in the same format, YAML or JSON): rows of
// panels, each panel with its PromQL queries, unit, thresholds and kind.
// Queries name metrics by key, {{ttft}} or {{gpu.util}}, never by name:
// engines.yaml, the one map from engine to metric names, lists for every
// key the names of the engine's versions, newest first (vLLM 0.12's
// vllm:request_time_per_output_token_seconds, then 0.11's
// vllm:time_per_output_token_seconds). Resolve replaces each key by the
// first name that exists in storage (the label values of __name__ over
// the page's range); a query naming a key with no stored name is dropped
// and a panel left with no query is omitted, so a dashboard never shows a
// blank panel for a metric the box does not have.
//
// Services. Discover reads which model servers are scraped: the series of
// each engine's identifying metric (vllm:num_requests_running, ...) give
// the services, one per job x model (job alone for engines without a model
// label, such as TGI), their instances, and their probes: those whose URL
// points at one of the instances (and whose model, if any, is the
// service's), and those auto-detection made, named <job>-<port>. Ollama,
// which has no /metrics, is a service made of its probes.
//
// Placeholders. The server fills in $job (the service's job matcher),
// $instances (job and instances, for families without the model label,
// such as vLLM's http_requests_total) and $probes (the service's probes);
// the front-end fills in $sel, $__rate_interval, $__interval and $__range
// (see the contract in DESIGN.md / the dashboard contract).
//
// Units: s, ms, percent (0-100), ratio (a plain number: fractions 0-1 and
// multipliers), bytes, reqps, tokps, celsius, watts, mhz, short.
//
// Annotations reads warm-up spans (appliance_instance_warming), firing
// alerts (ALERTS) and restarts (changes of process_start_time_seconds)
// for the charts' overlays. AnnotationStore keeps the others in the state
// file (bucket annotations): those posted to the API (releases and
// notes, checked by Annotation.Validate) and the releases the
// ReleaseDetector records when a target serves a new version or, without
// a version label, starts a new process. The detector keeps what it last
// saw of each target in the same file (bucket
// annotations_release_targets), written with the releases in one
// transaction, so a release during downtime is recorded at the next
// start and none twice.
package dashboard
