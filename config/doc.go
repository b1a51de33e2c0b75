// Package config loads, validates and defaults the appliance's one YAML file.
//
// # Schema
//
// The top level has these sections; any other key, at any depth, is an
// error:
//
//	global:               # Prometheus' global section, every key it accepts
//	  scrape_interval: 15s        # default 15s (Prometheus' built-in is 1m)
//	  scrape_timeout: 10s         # default min(10s, scrape_interval)
//	  evaluation_interval: 15s    # default 15s
//	  external_labels: {box: gpu-01}   # values may use ${ENV_VAR}
//	storage:
//	  path: data                  # relative to the working directory, like --data
//	  retention: {raw: 7d, 1m: 30d, 5m: 90d}
//	  memory_budget: 512MiB       # 0 or absent: sized from the box's memory
//	  min_free_disk: 100MB        # below it ingest answers 503; 0 or absent: 100MB
//	query:                        # Prometheus' defaults for its --query.* flags
//	  timeout: 2m
//	  max_samples: 50000000
//	  max_concurrency: 20
//	  lookback_delta: 5m
//	  split_parallelism: 0        # long range queries run as parts on this many cores; 0: all (≤4), 1: off
//	scrape_configs: [...]         # Prometheus' scrape_configs, unchanged
//	scrape_config_files: [...]    # globs of files holding more scrape_configs
//	rule_files: [...]             # globs of Prometheus rule files
//	rule_packs: [vllm, gpu]       # embedded packs: see rules.PackNames
//	web:
//	  listen_address: ":9090"     # --listen overrides
//	  external_url: ""
//	  basic_auth_users: {admin: <bcrypt hash>}
//	  tls_server_config: {cert_file: ..., key_file: ..., client_ca_file: ..., client_auth_type: ..., min_version: TLS12, cipher_suites: [...]}
//	  max_request_body_bytes: 32MiB   # remote write and import bodies
//	  max_connections: 512        # lowered to half the open files limit
//	  read_timeout: 1m            # a whole request, body included
//	  write_timeout: 0            # 0: query.timeout + 1m
//	  idle_timeout: 2m            # keep-alive connections
//	ui:
//	  dashboards_dir: dashboards  # user dashboards (YAML/JSON), relative to this file (ui.go)
//
// The sections alerting (alerting.go), probes (probes.go), collectors and
// autodetect (collectors.go), slos and reports (slo.go) are defined in
// their own files. Whether an SLO's threshold is a bucket bound of its
// histogram needs the data, so package slo checks it (appliance check
// calls it). remote_write entries are Prometheus' own type plus
// max_disk_bytes, the bound of each remote's on-disk queue (remote_write.go).
//
// Scrape configs are Prometheus' own type (promconfig.ScrapeConfig) and get
// the global defaults exactly as in Prometheus' Config.UnmarshalYAML:
// scrape_interval, scrape_timeout (never above the interval), limits,
// protocols; job names must be unique, also across scrape_config_files.
// Static, file and HTTP service discovery are registered; other *_sd_configs
// keys are unknown.
//
// Retention tiers must satisfy 0 < raw <= 1m <= 5m, so that a coarser tier
// always covers what a finer one dropped. A tier left out defaults to the
// larger of its default and the finer tier: "raw: 60d" alone gives 1m 60d.
// Sizes (Bytes) take B, KB, MB, GB, TB (powers of 1000) and KiB, MiB, GiB,
// TiB (powers of 1024).
//
// Relative paths (rule_files, scrape_config_files, TLS and credential files,
// file_sd files) are resolved against the directory of the configuration
// file. Files of web.tls_server_config must exist when the file is loaded;
// files of scrape configs are checked by Check only, since a target whose
// files are missing fails alone at scrape time. A rule_files glob that
// matches nothing is fine, as in Prometheus.
//
// Secrets (passwords, bearer tokens, password hashes) are
// prometheus/common/config.Secret values, which print as <secret>: String
// is safe for /api/v1/status/config.
//
// # Errors
//
// Every error is an *Error that prints as "file:line: message"; Load and
// LoadFile join several with errors.Join, Check returns them as a slice.
// All problems are reported, not just the first: each section, and each
// scrape config, is decoded on its own.
//
// Lines come from parsing the file once with yaml v3 into a node tree.
// Values are decoded with yaml v2 in strict mode, the library Prometheus'
// types are written for, one subtree at a time; yaml v2's own errors ("line
// N" of the re-encoded subtree) are mapped back through the node tree, and
// errors of UnmarshalYAML and Validate methods, which carry no line, are
// placed at the key or value they are about (the value a message quotes, the
// key it names, or the item itself). Errors in rule files carry the line
// inside the rule file, as reported by Prometheus' rulefmt (RuleFileError).
//
// # A leaf
//
// config imports no stage package. What only a stage can judge, the
// stage's own validator judges, called by cmd/appliance (as promtool's
// checks live in its command): rule files (rules/rulefile), rule pack names
// (rules.PackNames) and message templates (notify/message). config gives
// the command the lines to place those errors at: KeyLine, RulePackLine,
// RuleFilesResolved, ErrorAt.
//
// # Caveats
//
// A Config returned by Load is shared read-only; reload replaces it. yaml
// v3 reports some syntax errors at the line where the enclosing collection
// starts, e.g. an unclosed [ is reported at the line of the [.
package config
