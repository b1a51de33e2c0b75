package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/file"
	"github.com/stretchr/testify/require"
)

// badFiles maps every testdata/*.bad.yml to the errors Check must report,
// exactly and in order. Files whose errors a stage finds (rule files, rule
// pack names, templates) are cmd/appliance's tests: config imports no stage.
var badFiles = map[string][]string{
	"pipelines.bad.yml": {
		`testdata/pipelines.bad.yml:5: pipeline camera-to-cloud segment upload: histogram "edge_upload_seconds_bucket": give the base name without _bucket, _sum or _count`,
		"testdata/pipelines.bad.yml:9: pipeline camera-to-cloud segment inference: give histogram or duration, not both",
		`testdata/pipelines.bad.yml:12: pipeline camera-to-cloud segment sync: selector "device=\"cam1\"" must be label matchers in braces, e.g. {device=~"cam.*"}`,
		`testdata/pipelines.bad.yml:15: pipeline camera-to-cloud segment analysis: transfer bytes "cloud bytes" is not a metric name (a counter, e.g. edge_upload_bytes_total)`,
		`testdata/pipelines.bad.yml:16: pipeline camera-to-cloud: segment "analysis" is listed twice`,
		"testdata/pipelines.bad.yml:18: pipeline camera-to-cloud segment store: give histogram (a histogram's base name) or duration (a gauge of seconds)",
		`testdata/pipelines.bad.yml:19: pipeline name "bad name": want letters, digits, '-', '_' or '.' (it is the page /pipeline/<name>)`,
		"testdata/pipelines.bad.yml:22: pipeline empty: segments is empty; list the segments in order, each with a histogram or a duration",
		`testdata/pipelines.bad.yml:27: pipeline name "ok" is used twice (first at line 24)`,
	},
	"slos.bad.yml": {
		"testdata/slos.bad.yml:11: slo chat-latency: window 2w is not supported; use 7d, 28d or 30d",
		`testdata/slos.bad.yml:14: slo chat-availability: probe "chat" is not defined in probes`,
		"testdata/slos.bad.yml:18: slo errors: good: 1:23: parse error: unclosed left parenthesis",
		"testdata/slos.bad.yml:25: slo chat-latency: objective 101% must be above 0% and below 100%",
		`testdata/slos.bad.yml:28: slo ttft: histogram "vllm:time_to_first_token_seconds_bucket": give the name without _bucket or _count`,
		`testdata/slos.bad.yml:33: reports: weekly: day "mondag" is not a day of the week (monday ... sunday)`,
	},
	"bad-duration.bad.yml": {
		`testdata/bad-duration.bad.yml:3: unknown unit " seconds" in duration "5 seconds"`,
	},
	"bcrypt.bad.yml": {
		`testdata/bcrypt.bad.yml:4: basic_auth_users: the password of user "ops" is not a bcrypt hash (crypto/bcrypt: hashedSecret too short to be a bcrypted password); generate one with: htpasswd -nBC 10 "" | tr -d ':\n'`,
	},
	"duplicate-job.bad.yml": {
		`testdata/duplicate-job.bad.yml:5: found multiple scrape configs with job name "vllm" (first at testdata/duplicate-job.bad.yml:2)`,
	},
	"empty-job-name.bad.yml": {
		"testdata/empty-job-name.bad.yml:2: job_name is empty",
	},
	"global-timeout.bad.yml": {
		"testdata/global-timeout.bad.yml:2: global scrape timeout greater than scrape interval (scrape_interval defaults to 15s)",
	},
	"max-series.bad.yml": {
		"testdata/max-series.bad.yml:2: max_series must be 0 (no limit) or more",
	},
	"memory-budget.bad.yml": {
		`testdata/memory-budget.bad.yml:2: invalid size "512 megs": unknown unit "megs"; use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB`,
	},
	"query-split.bad.yml": {
		"testdata/query-split.bad.yml:3: query split_parallelism must be 0 (one part per core), 1 (no splitting) or more",
	},
	"remote-write.bad.yml": {
		"testdata/remote-write.bad.yml:4: remote write queue max_shards must be positive",
	},
	"remote-query.bad.yml": {
		`testdata/remote-query.bad.yml:3: remote_query url "ftp://thanos-query:10902": scheme must be http or https`,
	},
	"relabel-regex.bad.yml": {
		"testdata/relabel-regex.bad.yml:8: error parsing regexp: missing closing ): `^(?s:vllm:(num_requests.*)$`",
	},
	"retention-order.bad.yml": {
		"testdata/retention-order.bad.yml:5: retention 1m (1w) is shorter than retention raw (2w); a coarser tier must keep data at least as long as a finer one",
	},
	"scrape-timeout.bad.yml": {
		`testdata/scrape-timeout.bad.yml:6: scrape timeout greater than scrape interval for scrape config with job name "vllm"`,
	},
	"syntax.bad.yml": {
		"testdata/syntax.bad.yml:6: did not find expected ',' or ']'",
	},
	"target-address.bad.yml": {
		`testdata/target-address.bad.yml:6: "http://localhost:8001/metrics" is not a valid hostname`,
	},
	"tls-missing.bad.yml": {
		`testdata/tls-missing.bad.yml:4: cert_file "testdata/certs/missing.crt" does not exist (relative paths are resolved against the directory of the configuration file)`,
	},
	"unknown-scrape-key.bad.yml": {
		`testdata/unknown-scrape-key.bad.yml:6: unknown field "scrape_intreval"`,
	},
	"unknown-top-key.bad.yml": {
		`testdata/unknown-top-key.bad.yml:3: unknown field "scrape_config" (did you mean "scrape_configs"?)`,
	},
}

func errorStrings(errs []error) []string {
	var s []string
	for _, err := range errs {
		var e *Error
		if !errors.As(err, &e) {
			s = append(s, "not an *Error: "+err.Error())
			continue
		}
		s = append(s, e.Error())
	}
	return s
}

func TestCheckBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/*.bad.yml")
	require.NoError(t, err)
	require.Len(t, files, len(badFiles), "every testdata/*.bad.yml needs an entry in badFiles and vice versa")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, ok := badFiles[filepath.Base(f)]
			require.True(t, ok, "no expected errors for %s", f)
			_, errs := Check(f)
			require.Equal(t, want, errorStrings(errs))
		})
	}
}

func TestLoadFileBadFiles(t *testing.T) {
	// LoadFile reports the errors of the configuration file itself.
	_, err := LoadFile("testdata/scrape-timeout.bad.yml")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, Error{File: "testdata/scrape-timeout.bad.yml", Line: 6, Msg: `scrape timeout greater than scrape interval for scrape config with job name "vllm"`}, *e)
}

func TestLoadReportsEveryError(t *testing.T) {
	data := `
global:
  scrape_interval: 30s
scrape_configs:
  - job_name: vllm
    scrape_interval: 5x
    static_configs:
      - targets: [localhost:8000]
  - job_name: tgi
    scrape_timeout: 1m
    static_configs:
      - targets: [localhost:3000]
  - {job_name: triton, static_configs: [{targets: [localhost:8002]}], sample_limt: 10}
storage:
  retention: {raw: 0s}
remote_write: [{url: "http://x/api/v1/write", max_disk_bytes: 0}]
rule_packs: [vllm, vllm]
`
	_, err := Load([]byte(data), "box.yml")
	require.Equal(t, []string{
		`box.yml:6: unknown unit "x" in duration "5x"`,
		`box.yml:10: scrape timeout greater than scrape interval for scrape config with job name "tgi"`,
		`box.yml:13: unknown field "sample_limt"`,
		`box.yml:15: retention raw must be greater than 0`,
		`box.yml:16: remote_write http://x/api/v1/write: max_disk_bytes must be greater than 0`,
		`box.yml:17: rule pack "vllm" is listed twice`,
	}, errorStrings(flattenErrors(err)))
}

func TestLoadErrorLines(t *testing.T) {
	f := func(data, want string) {
		t.Helper()
		_, err := Load([]byte(data), "c.yml")
		require.Error(t, err)
		require.Equal(t, want, err.Error())
	}
	// Anchors and aliases: an error in aliased content points at the
	// anchor.
	f(`
common: &common
  scrape_interval: 1m
scrape_configs:
  - job_name: a
    static_configs: [{targets: [a:1]}]
`, `c.yml:2: unknown field "common"`)
	f(`
scrape_configs:
  - &base
    job_name: a
    scrape_interval: 10s
    static_configs: [{targets: [a:1]}]
  - <<: *base
    job_name: b
    scrape_timeout: 15s
`, `c.yml:9: scrape timeout greater than scrape interval for scrape config with job name "b"`)
	// Unknown keys deep inside a scrape config.
	f(`
scrape_configs:
  - job_name: a
    static_configs:
      - targets: [a:1]
        lables: {x: y}
`, `c.yml:6: unknown field "lables"`)
	f(`
scrape_configs:
  - job_name: a
    basic_auth: {username: u, password: p, pasword_file: /x}
    static_configs: [{targets: [a:1]}]
`, `c.yml:4: unknown field "pasword_file"`)
	f(`
scrape_configs:
  - job_name: a
    static_configs: [{targets: [a:1]}]
    relabel_configs:
      - source_labels: [__address__]
        target_label: shard
        action: hashmod
`, `c.yml:8: relabel configuration for hashmod requires non-zero modulus`)
	f(`
storage:
  path: data
  retention:
    raw: 7d
    1h: 30d
`, `c.yml:6: unknown field "1h"`)
	f("query:\n  max_samples: lots\n", "c.yml:2: cannot unmarshal !!str `lots` into int")
	f("query:\n  timeout: 0s\n", "c.yml:2: query timeout must be greater than 0")
	f("web:\n  listen_address: 9090\n", `c.yml:2: invalid listen_address "9090": address 9090: missing port in address`)
	f("web:\n  tls_server_config:\n    cert_file: a.crt\n", "c.yml:2: tls_server_config: key_file is required")
	f("global:\n  scrape_interval: 15s\nglobal: {}\n", "c.yml:3: global: section already defined at line 1")
	f("- a\n- b\n", "c.yml:1: the configuration must be a mapping of sections (global, storage, scrape_configs, ...)")
	f("global: {}\n---\nglobal: {}\n", "c.yml:2: a second YAML document (---) is not supported; keep one document per file")
	f("global:\n  scrape_interval: 15s\n   bad: indent\n", "c.yml:3: mapping values are not allowed in this context")
	f("rule_files: [rules/*/x.yml]\n", `c.yml:1: invalid rule file path "rules/*/x.yml": a glob (*) may only appear in the last path element`)
	f("scrape_configs:\n  job_name: a\n", "c.yml:2: scrape_configs must be a list of scrape configs")
}

func TestLoadGoodFile(t *testing.T) {
	cfg, err := LoadFile("testdata/good.yml")
	require.NoError(t, err)
	_, errs := Check("testdata/good.yml")
	require.Empty(t, errs)

	require.Equal(t, "gpu-01", cfg.Global.ExternalLabels.Get("box"))
	require.Equal(t, "lab-a", cfg.Global.ExternalLabels.Get("site"))
	require.Equal(t, StorageConfig{Path: "/var/lib/appliance", Retention: DefaultRetentionConfig, MemoryBudget: 512 << 20, Exemplars: DefaultExemplarsConfig, Cardinality: DefaultCardinalityConfig}, cfg.Storage)
	require.Equal(t, QueryConfig{Timeout: model.Duration(time.Minute), MaxSamples: 20_000_000, MaxConcurrency: 20, LookbackDelta: model.Duration(5 * time.Minute)}, cfg.Query)
	require.Equal(t, []string{"testdata/rules/*.rules.yml"}, cfg.RuleFiles)
	require.Equal(t, []string{"vllm", "gpu", "fastapi", "targets"}, cfg.RulePacks)
	require.Equal(t, ":9090", cfg.Web.ListenAddress)
	require.Equal(t, Bytes(64<<20), cfg.Web.MaxRequestBodyBytes)
	require.Contains(t, cfg.Web.BasicAuthUsers, "admin")

	jobs := map[string]*promconfig.ScrapeConfig{}
	for _, sc := range cfg.ScrapeConfigs {
		jobs[sc.JobName] = sc
	}
	require.Len(t, jobs, 5)
	require.Equal(t, "s3cret-gateway-pass", string(jobs["gateway"].HTTPClientConfig.BasicAuth.Password))
	require.Equal(t, "/internal/metrics", jobs["gateway"].MetricsPath)
	require.Len(t, jobs["node"].MetricRelabelConfigs, 1)
	// file_sd paths resolve against the configuration's directory.
	require.Equal(t, discovery.Configs{&file.SDConfig{Files: []string{"testdata/targets/*.json"}, RefreshInterval: model.Duration(time.Minute)}}, jobs["batch-workers"].ServiceDiscoveryConfigs)
	require.Len(t, jobs["vllm"].ServiceDiscoveryConfigs, 1)

	resolved, err := cfg.ScrapeConfigsResolved()
	require.NoError(t, err)
	require.Equal(t, cfg.ScrapeConfigs, resolved)
}

func TestStringRedactsSecrets(t *testing.T) {
	cfg, err := LoadFile("testdata/good.yml")
	require.NoError(t, err)
	s := cfg.String()
	require.NotContains(t, s, "s3cret-gateway-pass")
	require.NotContains(t, s, "$2a$10$")
	require.Contains(t, s, "password: <secret>")
	require.Contains(t, s, "admin: <secret>")
	require.Contains(t, s, "memory_budget: 512MiB")
	require.Contains(t, s, "job_name: batch-workers")

	// The Prometheus view redacts the same way.
	require.NotContains(t, cfg.PrometheusConfig().String(), "s3cret-gateway-pass")
}

func TestDefault(t *testing.T) {
	f := func(listen, target string) {
		t.Helper()
		cfg := Default(listen)
		require.Len(t, cfg.ScrapeConfigs, 1)
		sc := cfg.ScrapeConfigs[0]
		require.Equal(t, "appliance", sc.JobName)
		require.Equal(t, "/metrics", sc.MetricsPath)
		require.Equal(t, `{__address__="`+target+`"}`, staticTargets(t, sc)[0])
		require.Equal(t, model.Duration(15*time.Second), sc.ScrapeInterval)
		require.Equal(t, model.Duration(10*time.Second), sc.ScrapeTimeout)
		require.Equal(t, DefaultStorageConfig, cfg.Storage)
		require.Equal(t, DefaultQueryConfig, cfg.Query)
		if listen == "" {
			listen = ":9090"
		}
		require.Equal(t, listen, cfg.Web.ListenAddress)

		// What /api/v1/status/config prints loads back.
		_, err := Load([]byte(cfg.String()), "printed.yml")
		require.NoError(t, err)
	}
	f(":9090", "localhost:9090")
	f("", "localhost:9090")
	f("0.0.0.0:8080", "localhost:8080")
	f("[::]:8080", "localhost:8080")
	f("10.1.2.3:9000", "10.1.2.3:9000")
	f("gpu-01.lab:9090", "gpu-01.lab:9090")

	// Not an address: no self-scrape job, but still a configuration.
	cfg := Default(`bad"address`)
	require.Empty(t, cfg.ScrapeConfigs)
}

func staticTargets(t *testing.T, sc *promconfig.ScrapeConfig) []string {
	t.Helper()
	var out []string
	for _, c := range sc.ServiceDiscoveryConfigs {
		sc, ok := c.(discovery.StaticConfig)
		require.True(t, ok)
		for _, tg := range sc {
			for _, t := range tg.Targets {
				out = append(out, t.String())
			}
		}
	}
	return out
}

func TestGlobalDefaultsPropagate(t *testing.T) {
	type want struct{ globalInterval, globalTimeout, interval, timeout time.Duration }
	f := func(global, job string, w want) {
		t.Helper()
		data := "global: {" + global + "}\nscrape_configs:\n  - {job_name: a, static_configs: [{targets: [a:1]}]" + job + "}\n"
		cfg, err := Load([]byte(data), "c.yml")
		require.NoError(t, err)
		require.Equal(t, model.Duration(w.globalInterval), cfg.Global.ScrapeInterval, "global interval")
		require.Equal(t, model.Duration(w.globalTimeout), cfg.Global.ScrapeTimeout, "global timeout")
		sc := cfg.ScrapeConfigs[0]
		require.Equal(t, model.Duration(w.interval), sc.ScrapeInterval, "job interval")
		require.Equal(t, model.Duration(w.timeout), sc.ScrapeTimeout, "job timeout")
	}
	s := time.Second
	f("", "", want{15 * s, 10 * s, 15 * s, 10 * s})
	f("scrape_interval: 30s", "", want{30 * s, 10 * s, 30 * s, 10 * s})
	f("scrape_interval: 1m", "", want{60 * s, 10 * s, 60 * s, 10 * s}) // an explicit 1m is kept
	f("scrape_interval: 5s", "", want{5 * s, 5 * s, 5 * s, 5 * s})
	f("scrape_timeout: 3s", ", scrape_interval: 2s", want{15 * s, 3 * s, 2 * s, 2 * s})
	f("scrape_timeout: 12s", "", want{15 * s, 12 * s, 15 * s, 12 * s})
	f("", ", scrape_interval: 1m", want{15 * s, 10 * s, 60 * s, 10 * s})
	f("", ", scrape_interval: 1m, scrape_timeout: 45s", want{15 * s, 10 * s, 60 * s, 45 * s})

	// Limits propagate like Prometheus' Validate does.
	cfg, err := Load([]byte(`
global:
  sample_limit: 1000
  label_limit: 64
  body_size_limit: 10MB
  external_labels: {box: "${APPLIANCE_TEST_BOX}"}
scrape_configs:
  - job_name: a
    static_configs: [{targets: [a:1]}]
  - job_name: b
    sample_limit: 5
    static_configs: [{targets: [b:1]}]
`), "c.yml")
	require.NoError(t, err)
	require.Equal(t, model.Duration(15*time.Second), cfg.Global.EvaluationInterval)
	require.Equal(t, uint(1000), cfg.ScrapeConfigs[0].SampleLimit)
	require.Equal(t, uint(5), cfg.ScrapeConfigs[1].SampleLimit)
	require.Equal(t, uint(64), cfg.ScrapeConfigs[1].LabelLimit)
	require.Equal(t, cfg.Global.BodySizeLimit, cfg.ScrapeConfigs[0].BodySizeLimit)
	require.NotZero(t, cfg.ScrapeConfigs[0].BodySizeLimit)
}

func TestExternalLabelsExpandEnvironment(t *testing.T) {
	t.Setenv("APPLIANCE_TEST_BOX", "gpu-07")
	cfg, err := Load([]byte("global:\n  external_labels: {box: \"${APPLIANCE_TEST_BOX}\", cost: \"$$5\"}\n"), "c.yml")
	require.NoError(t, err)
	require.Equal(t, "gpu-07", cfg.Global.ExternalLabels.Get("box"))
	require.Equal(t, "$5", cfg.Global.ExternalLabels.Get("cost"))
}

func TestEmptyConfigIsDefaults(t *testing.T) {
	for _, data := range []string{"", "# nothing\n", "global:\nstorage:\n"} {
		cfg, err := Load([]byte(data), "c.yml")
		require.NoError(t, err)
		require.Equal(t, DefaultGlobalConfig.ScrapeInterval, cfg.Global.ScrapeInterval)
		require.Equal(t, DefaultStorageConfig, cfg.Storage)
		require.Equal(t, DefaultQueryConfig, cfg.Query)
		require.Equal(t, DefaultWebConfig, cfg.Web)
		require.Empty(t, cfg.ScrapeConfigs)
	}
}

func TestRetentionDefaultsFollowFinerTiers(t *testing.T) {
	f := func(retention string, raw, oneMinute, fiveMinute time.Duration) {
		t.Helper()
		cfg, err := Load([]byte("storage:\n  retention: {"+retention+"}\n"), "c.yml")
		require.NoError(t, err)
		require.Equal(t, RetentionConfig{model.Duration(raw), model.Duration(oneMinute), model.Duration(fiveMinute)}, cfg.Storage.Retention)
	}
	f("raw: 2d", 2*day, 30*day, 90*day)
	f("raw: 60d", 60*day, 60*day, 90*day)
	f("raw: 100d", 100*day, 100*day, 100*day)
	f("1m: 1y", 7*day, 365*day, 365*day)
	f("raw: 1d, 1m: 1d, 5m: 1d", day, day, day)
}

func TestBytes(t *testing.T) {
	f := func(s string, want Bytes, printed string) {
		t.Helper()
		got, err := ParseBytes(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, printed, got.String())
	}
	f("0", 0, "0")
	f("1234", 1234, "1234")
	f("512MiB", 512<<20, "512MiB")
	f("1.5GiB", 3<<29, "1536MiB")
	f("1GB", 1e9, "1GB")
	f("32 KB", 32000, "32KB")
	f("2TiB", 2<<40, "2TiB")
	f("10B", 10, "10")

	for _, s := range []string{"", "-1", "1XB", "MiB", "1.2.3MB", "99999999TiB"} {
		_, err := ParseBytes(s)
		require.Error(t, err, s)
	}
}

func TestPrometheusConfig(t *testing.T) {
	cfg, err := LoadFile("testdata/good.yml")
	require.NoError(t, err)
	pc := cfg.PrometheusConfig()
	require.Equal(t, cfg.Global, pc.GlobalConfig)
	require.Equal(t, cfg.RuleFiles, pc.RuleFiles)
	scs, err := pc.GetScrapeConfigs()
	require.NoError(t, err, "Prometheus' scrape manager calls GetScrapeConfigs")
	require.Equal(t, cfg.ScrapeConfigs, scs)
}

func TestScrapeConfigFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		return p
	}
	main := write("appliance.yml", `
scrape_config_files: [jobs/*.yml]
scrape_configs:
  - job_name: vllm
    static_configs: [{targets: [localhost:8000]}]
`)
	write("jobs/a.yml", `
scrape_configs:
  - job_name: tgi
    tls_config: {ca_file: ca.pem}
    static_configs: [{targets: [localhost:3000]}]
`)
	cfg, err := LoadFile(main)
	require.NoError(t, err)
	scs, err := cfg.ScrapeConfigsResolved()
	require.NoError(t, err)
	require.Len(t, scs, 2)
	require.Equal(t, "tgi", scs[1].JobName)
	require.Equal(t, model.Duration(15*time.Second), scs[1].ScrapeInterval)
	require.Equal(t, filepath.Join(dir, "jobs", "ca.pem"), scs[1].HTTPClientConfig.TLSConfig.CAFile)
	require.Len(t, cfg.ScrapeConfigs, 1, "ScrapeConfigsResolved does not modify the config")

	b := write("jobs/b.yml", `
scrape_configs:
  - job_name: vllm
    static_configs: [{targets: [localhost:8001]}]
  - job_name: triton
    scrape_interval: 5m
    scrape_timeout: 6m
    static_configs: [{targets: [localhost:8002]}]
`)
	_, err = cfg.ScrapeConfigsResolved()
	require.Equal(t, []string{
		b + `:3: found multiple scrape configs with job name "vllm" (first at ` + main + ":4)",
		b + `:7: scrape timeout greater than scrape interval for scrape config with job name "triton"`,
	}, errorStrings(flattenErrors(err)))
}

func TestCheckScrapeFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "appliance.yml")
	require.NoError(t, os.WriteFile(p, []byte(`
scrape_configs:
  - job_name: fastapi
    authorization:
      credentials_file: token
    static_configs: [{targets: [localhost:8080]}]
`), 0o644))
	_, err := LoadFile(p)
	require.NoError(t, err, "a missing credentials file fails only its target at scrape time")
	require.Equal(t, []string{
		p + `:5: job "fastapi": credentials_file "` + filepath.Join(dir, "token") + `" does not exist (relative paths are resolved against the directory of the configuration file)`,
	}, errorStrings(checkErrs(p)))
}

func checkErrs(path string) []error {
	_, errs := Check(path)
	return errs
}

func TestTLSServerConfig(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	p := filepath.Join(dir, "appliance.yml")
	require.NoError(t, os.WriteFile(p, []byte(`
web:
  listen_address: ":9443"
  tls_server_config:
    cert_file: server.crt
    key_file: server.key
`), 0o644))
	cfg, err := LoadFile(p)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "server.crt"), cfg.Web.TLSServerConfig.CertFile)
	tc, err := cfg.Web.TLSServerConfig.TLSConfig()
	require.NoError(t, err)
	require.Len(t, tc.Certificates, 1)

	// A key that does not belong to the certificate is refused at load.
	require.NoError(t, os.WriteFile(p, []byte(`
web:
  tls_server_config:
    cert_file: server.crt
    key_file: server.crt
`), 0o644))
	_, err = LoadFile(p)
	require.ErrorContains(t, err, p+":4: load TLS certificate")
}

func writeCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "appliance"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "server.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "server.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
}

// TestRemoteEntriesThatFailLeaveNoNil: a remote_write or remote_read
// entry that fails to decode is reported and dropped, so the stages'
// checks (appliance check) never see a nil entry.
func TestRemoteEntriesThatFailLeaveNoNil(t *testing.T) {
	for _, body := range []string{
		"remote_write:\n  - url: http://a/api/v1/write\n    queue_config: {max_shards: 0}\n  - url: http://b/api/v1/write\n",
		"remote_write:\n  - url: http://a/api/v1/write\n    bogus: 1\n",
		"remote_read:\n  - url: http://a/api/v1/read\n    bogus: 1\n  - url: http://b/api/v1/read\n",
	} {
		cfg, errs := load([]byte(body), "x.yml")
		require.NotEmpty(t, errs, body)
		require.NotNil(t, cfg, body)
		for _, c := range cfg.RemoteWrite {
			require.NotNil(t, c, body)
		}
		for _, c := range cfg.RemoteRead {
			require.NotNil(t, c, body)
		}
	}
}
