package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// TestPrometheusYMLSections: the sections of a whole prometheus.yml that
// the appliance reads are accepted; storage.tsdb.retention.time is the
// raw tier's retention, and the warnings name what is mapped and ignored.
func TestPrometheusYMLSections(t *testing.T) {
	cfg, err := Load([]byte(`
alerting:
  alert_relabel_configs:
    - regex: replica
      action: labeldrop
  alertmanagers:
    - scheme: https
      path_prefix: /am
      timeout: 5s
      basic_auth: {username: prom, password: pw}
      static_configs:
        - targets: ['am1:9093', 'am2:9093']
remote_read:
  - url: http://lts:9201/read
storage:
  tsdb:
    retention:
      time: 60d
      size: 10GB
    out_of_order_time_window: 10m
tracing:
  endpoint: tempo:4317
otlp:
  promote_resource_attributes: [service.name]
runtime:
  gogc: 50
`), "prometheus.yml")
	require.NoError(t, err)
	require.Equal(t, model.Duration(60*24*time.Hour), cfg.Storage.Retention.Raw)
	require.Equal(t, model.Duration(60*24*time.Hour), cfg.Storage.Retention.OneMinute, "the coarser tiers keep at least as long")
	require.Equal(t, model.Duration(90*24*time.Hour), cfg.Storage.Retention.FiveMinute)
	require.Len(t, cfg.Alerting.Alertmanagers, 1)
	am := cfg.Alerting.Alertmanagers[0]
	require.Equal(t, "https", am.Scheme)
	require.Equal(t, "/am", am.PathPrefix)
	require.Equal(t, "prom", am.HTTPClientConfig.BasicAuth.Username)
	require.Len(t, cfg.Alerting.AlertRelabelConfigs, 1)
	require.Len(t, cfg.RemoteRead, 1)
	var ws []string
	for _, w := range cfg.Warnings() {
		ws = append(ws, w.Error())
	}
	require.Equal(t, []string{
		"prometheus.yml:2: warning: alerting.alertmanagers: the firing alerts of the rules are also sent to 1 Alertmanager config(s), besides the appliance's own routing",
		"prometheus.yml:15: warning: storage.tsdb.retention.time 60d is mapped to storage.retention.raw (the 1m and 5m tiers keep at least as long)",
		"prometheus.yml:15: warning: storage.tsdb.retention.size 10GiB is not enforced: the appliance bounds its disk with storage.min_free_disk and the tiers' retention",
		"prometheus.yml:15: warning: storage.tsdb.out_of_order_time_window is ignored: the storage takes samples in any order",
		"prometheus.yml:13: warning: remote_read: 1 endpoint(s) are read by queries and rules besides the local storage (read_recent false: only before the raw tier's retention); series, labels, federate and remote read answer from the local storage only",
		"prometheus.yml:21: warning: tracing is accepted and ignored: the appliance exports no traces",
		"prometheus.yml:23: warning: otlp is accepted and ignored: the appliance has no OTLP receiver",
		"prometheus.yml:25: warning: runtime is accepted and ignored: the Go runtime keeps its defaults (gogc is not applied)",
	}, ws)

	// storage.retention.raw, when set, wins over storage.tsdb.
	cfg, err = Load([]byte("storage:\n  retention: {raw: 10d}\n  tsdb: {retention: {time: 60d}}\n"), "x.yml")
	require.NoError(t, err)
	require.Equal(t, model.Duration(10*24*time.Hour), cfg.Storage.Retention.Raw)

}

// TestAlertmanagerYMLUnderAlerting: an alertmanager.yml pasted under
// alerting: loads as is; global fills the receivers, the deprecated
// match forms become matchers, the template files are relative to the
// config, and what the appliance has no use for is named in a warning.
func TestAlertmanagerYMLUnderAlerting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "appliance.yml")
	require.NoError(t, os.WriteFile(path, []byte(`
alerting:
  global:
    resolve_timeout: 2m
    smtp_smarthost: smtp.example.org:587
    smtp_from: am@example.org
    smtp_auth_username: am
    smtp_auth_password: s3cr3t
    slack_api_url: https://hooks.slack.com/services/T/B/X
    opsgenie_api_url: https://api.opsgenie.com/
    http_config:
      proxy_url: http://proxy.lab:3128
  templates: ['templates/*.tmpl']
  route:
    receiver: team
    routes:
      - match: {severity: critical, team: db}
        match_re: {service: "^(pg|mysql)$"}
        receiver: mail
  mute_time_intervals:
    - name: nights
      time_intervals: [{times: [{start_time: "22:00", end_time: "23:59"}]}]
  inhibit_rules:
    - source_match: {severity: critical}
      target_match_re: {severity: "warning|info"}
      equal: [instance]
  receivers:
    - name: team
      webhook_configs:
        - url: http://hook.lab/x
          http_config:
            bearer_token: tok
            tls_config: {insecure_skip_verify: true}
      slack_configs:
        - channel: '#alerts'
          title: '{{ template "lab.title" . }}'
          color: '{{ if eq .Status "firing" }}danger{{ else }}good{{ end }}'
          icon_emoji: ':fire:'
    - name: mail
      email_configs:
        - to: ops@example.org
    - name: pd
      pagerduty_configs:
        - routing_key: k
`), 0o644))
	cfg, err := LoadFile(path)
	require.NoError(t, err)
	a := cfg.Alerting
	require.Equal(t, 2*time.Minute, a.ResolveTimeout())
	require.Equal(t, []string{filepath.Join(dir, "templates/*.tmpl")}, a.Templates.Files)
	sub := a.Route.Routes[0]
	require.Equal(t, `[severity="critical" team="db" service=~"^(pg|mysql)$"]`, matchersString(sub.Matchers))
	require.True(t, sub.Matchers.Matches(model.LabelSet{"severity": "critical", "team": "db", "service": "pg"}))
	require.False(t, sub.Matchers.Matches(model.LabelSet{"severity": "critical", "team": "db", "service": "redis"}))
	require.Len(t, a.TimeIntervals, 1, "mute_time_intervals is time_intervals")
	ir := a.InhibitRules[0]
	require.True(t, ir.SourceMatchers.Matches(model.LabelSet{"severity": "critical"}))
	require.True(t, ir.TargetMatchers.Matches(model.LabelSet{"severity": "info"}))
	require.False(t, ir.TargetMatchers.Matches(model.LabelSet{"severity": "critical"}))
	team := a.Receiver("team")
	require.Equal(t, "https://hooks.slack.com/services/T/B/X", string(team.SlackConfigs[0].APIURL), "slack_api_url from global")
	require.Equal(t, `{{ template "lab.title" . }}`, team.SlackConfigs[0].Title)
	wh := team.WebhookConfigs[0].HTTPConfig
	require.Equal(t, "tok", string(wh.Authorization.Credentials), "bearer_token is an authorization")
	require.True(t, wh.TLSConfig.InsecureSkipVerify)
	require.Equal(t, "http://proxy.lab:3128", team.SlackConfigs[0].HTTPConfig.ProxyURL.String(), "global http_config where the receiver has none")
	mail := a.Receiver("mail").EmailConfigs[0]
	require.Equal(t, "am@example.org", mail.From)
	require.Equal(t, "smtp.example.org:587", mail.Smarthost)
	require.Equal(t, "am", mail.AuthUsername)
	var ws []string
	for _, w := range cfg.Warnings() {
		ws = append(ws, w.Msg)
	}
	require.Equal(t, []string{
		"warning: alerting.global.opsgenie_api_url is ignored: the appliance has no integration that uses it",
		"warning: alerting.global.resolve_timeout 2m is mapped: alerts posted without an end resolve after it",
		`warning: receiver "team": slack_configs keys color, icon_emoji are ignored`,
		`warning: receiver "pd": pagerduty_configs is not supported by the appliance and is ignored`,
		"warning: alerting.templates: 1 template file pattern(s) are read; their templates may be called from the title and text of slack_configs, the text of email_configs, and alerting.templates title and text (with templates: {files: [...], title: ..., text: ...})",
	}, ws)
	require.NotContains(t, cfg.String(), "s3cr3t")

	// Still strict: an unknown key of a receiver is an error, and so is a
	// Slack config with no URL anywhere.
	_, err = Load([]byte("alerting:\n  route: {receiver: r}\n  receivers:\n    - name: r\n      webhok_configs: [{url: http://x}]\n      colour: red\n"), "x.yml")
	require.ErrorContains(t, err, `receiver "r": unknown field "colour"`)
	_, err = Load([]byte("alerting:\n  route: {receiver: r}\n  receivers:\n    - name: r\n      slack_configs: [{channel: x}]\n"), "x.yml")
	require.ErrorContains(t, err, "slack_configs api_url (or alerting.global.slack_api_url) is required")
	_, err = Load([]byte("alerting:\n  route: {receiver: r}\n  receivers:\n    - name: r\n      email_configs: [{to: a@b}]\n"), "x.yml")
	require.ErrorContains(t, err, "email_configs: to and from are required")

	// The appliance's own templates mapping still reads.
	cfg, err = Load([]byte("alerting:\n  templates: {title: 'T {{ .Name }}', files: [t/*.tmpl]}\n"), "x.yml")
	require.NoError(t, err)
	require.Equal(t, "T {{ .Name }}", cfg.Alerting.Templates.Title)
	require.Equal(t, []string{"t/*.tmpl"}, cfg.Alerting.Templates.Files)
}

func matchersString(m Matchers) string {
	var b strings.Builder
	b.WriteString("[")
	for i, x := range m {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(x.String())
	}
	b.WriteString("]")
	return b.String()
}
