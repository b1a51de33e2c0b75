package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
)

// This file reads what a Prometheus user already has: the rest of a whole
// prometheus.yml (remote_read, storage.tsdb, tracing, otlp, runtime,
// alerting.alertmanagers) and an alertmanager.yml pasted under alerting
// as is (global, file templates, http_config, match/match_re,
// source_match/target_match, mute_time_intervals). What is mapped or
// ignored is said in notes that `appliance check` prints and the appliance
// logs at start (Config.Warnings).

// tsdbNotes maps Prometheus' storage.tsdb: retention.time becomes the raw
// tier's retention (returned; nil when unset); the rest is noted.
func tsdbNotes(t *promconfig.TSDBConfig) ([]string, *model.Duration) {
	var (
		notes []string
		raw   *model.Duration
	)
	if r := t.Retention; r != nil {
		if r.Time > 0 {
			d := r.Time
			raw = &d
			notes = append(notes, fmt.Sprintf("storage.tsdb.retention.time %s is mapped to storage.retention.raw (the 1m and 5m tiers keep at least as long)", r.Time))
		}
		if r.Size > 0 {
			notes = append(notes, fmt.Sprintf("storage.tsdb.retention.size %s is not enforced: the appliance bounds its disk with storage.min_free_disk and the tiers' retention", r.Size))
		}
		if r.Percentage > 0 {
			notes = append(notes, "storage.tsdb.retention.percentage is ignored: the appliance bounds its disk with storage.min_free_disk")
		}
	}
	if t.OutOfOrderTimeWindow > 0 {
		notes = append(notes, "storage.tsdb.out_of_order_time_window is ignored: the storage takes samples in any order")
	}
	return notes, raw
}

// RemoteReadConfigs is the remote_read section, parsed as Prometheus does.
// Queries and rules read these endpoints besides the local storage
// (query.RemoteRead); a note says so.
type RemoteReadConfigs []*promconfig.RemoteReadConfig

// AlertmanagerGlobal is the global section of an alertmanager.yml: the
// defaults of the receivers' configs.
type AlertmanagerGlobal struct {
	ResolveTimeout   model.Duration              `yaml:"resolve_timeout,omitempty"`
	HTTPConfig       *commoncfg.HTTPClientConfig `yaml:"http_config,omitempty"`
	SMTPFrom         string                      `yaml:"smtp_from,omitempty"`
	SMTPHello        string                      `yaml:"smtp_hello,omitempty"`
	SMTPSmarthost    string                      `yaml:"smtp_smarthost,omitempty"`
	SMTPAuthUsername string                      `yaml:"smtp_auth_username,omitempty"`
	SMTPAuthPassword commoncfg.Secret            `yaml:"smtp_auth_password,omitempty"`
	SMTPAuthSecret   commoncfg.Secret            `yaml:"smtp_auth_secret,omitempty"`
	SMTPAuthIdentity string                      `yaml:"smtp_auth_identity,omitempty"`
	SMTPRequireTLS   *bool                       `yaml:"smtp_require_tls,omitempty"`
	SlackAPIURL      commoncfg.Secret            `yaml:"slack_api_url,omitempty"`
	// The keys of the integrations the appliance does not have (wechat_*,
	// pagerduty_url, opsgenie_*, ...), kept to name them in a note.
	Other map[string]any `yaml:",inline"`
}

// DefaultResolveTimeout is Alertmanager's resolve_timeout: an alert posted
// without an end resolves if it is not posted again within it.
const DefaultResolveTimeout = 5 * time.Minute

// ResolveTimeout returns alerting.global.resolve_timeout or its default.
func (c AlertingConfig) ResolveTimeout() time.Duration {
	if c.Global != nil && c.Global.ResolveTimeout > 0 {
		return time.Duration(c.Global.ResolveTimeout)
	}
	return DefaultResolveTimeout
}

// UnmarshalYAML implements yaml.Unmarshaler: message templates are either
// the appliance's mapping (title, text) or Alertmanager's list of template
// files (globs).
func (t *MessageTemplates) UnmarshalYAML(unmarshal func(any) error) error {
	var files []string
	if err := unmarshal(&files); err == nil {
		*t = MessageTemplates{Files: files}
		return nil
	}
	type plain MessageTemplates
	return unmarshal((*plain)(t))
}

// matchMap turns Alertmanager's deprecated match / match_re maps into
// matchers, sorted by label name.
func matchMap(eq, re map[string]string) (Matchers, error) {
	var out Matchers
	for _, k := range slices.Sorted(maps.Keys(eq)) {
		m, err := amlabels.NewMatcher(amlabels.MatchEqual, k, eq[k])
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	for _, k := range slices.Sorted(maps.Keys(re)) {
		m, err := amlabels.NewMatcher(amlabels.MatchRegexp, k, re[k])
		if err != nil {
			return nil, fmt.Errorf("match_re %s: %w", k, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// Alertmanager's keys of the integrations that the appliance accepts and
// does not use; any other unknown key is an error.
var (
	amWebhookKeys = []string{"url_file", "timeout"}
	amSlackKeys   = []string{"api_url_file", "color", "title_link", "pretext", "fields", "short_fields", "footer", "fallback", "callback_id", "icon_emoji", "icon_url", "image_url", "thumb_url", "link_names", "mrkdwn_in", "actions", "update_message", "app_token", "app_token_file", "app_url", "message_text", "timeout"}
	amEmailKeys   = []string{"html", "auth_password_file", "threading", "force_implicit_tls"}
)

// checkOther refuses the keys of other that are not Alertmanager's.
func checkOther(other map[string]any, known []string) error {
	for _, k := range slices.Sorted(maps.Keys(other)) {
		if !slices.Contains(known, k) {
			return fmt.Errorf("unknown field %q", k)
		}
	}
	return nil
}

// unsupportedIntegrations names the integrations of Alertmanager the
// appliance does not have; a receiver may list them and they are ignored
// with a note.
func unsupportedIntegration(key string) bool {
	return strings.HasSuffix(key, "_configs")
}

// applyGlobal fills the receivers' configs from alerting.global, checks
// what only then can be checked (a Slack URL, the email from and
// smarthost), and returns notes on what is ignored.
func (c *AlertingConfig) applyGlobal() ([]string, error) {
	g := c.Global
	if g == nil {
		g = &AlertmanagerGlobal{}
	}
	var notes []string
	for _, k := range slices.Sorted(maps.Keys(g.Other)) {
		notes = append(notes, fmt.Sprintf("alerting.global.%s is ignored: the appliance has no integration that uses it", k))
	}
	if g.ResolveTimeout > 0 {
		notes = append(notes, fmt.Sprintf("alerting.global.resolve_timeout %s is mapped: alerts posted without an end resolve after it", g.ResolveTimeout))
	}
	for _, r := range c.Receivers {
		if r == nil {
			continue // reported by UnmarshalYAML
		}
		for _, k := range slices.Sorted(maps.Keys(r.Other)) {
			if !unsupportedIntegration(k) {
				return nil, fieldErrorf([]string{"receivers"}, "receiver %q: unknown field %q", r.Name, k)
			}
			notes = append(notes, fmt.Sprintf("receiver %q: %s is not supported by the appliance and is ignored", r.Name, k))
		}
		ignored := func(typ string, other map[string]any) {
			if len(other) > 0 {
				notes = append(notes, fmt.Sprintf("receiver %q: %s keys %s are ignored", r.Name, typ, strings.Join(slices.Sorted(maps.Keys(other)), ", ")))
			}
		}
		for _, x := range r.WebhookConfigs {
			ignored("webhook_configs", x.Other)
		}
		for _, x := range r.SlackConfigs {
			ignored("slack_configs", x.Other)
			if x.APIURL == "" {
				x.APIURL = g.SlackAPIURL
			}
			if err := checkSecretURL("slack_configs api_url (or alerting.global.slack_api_url)", x.APIURL); err != nil {
				return nil, err
			}
		}
		for _, x := range r.EmailConfigs {
			ignored("email_configs", x.Other)
			x.From = cmpOr(x.From, g.SMTPFrom)
			x.Smarthost = cmpOr(x.Smarthost, g.SMTPSmarthost)
			x.Hello = cmpOr(x.Hello, g.SMTPHello)
			x.AuthUsername = cmpOr(x.AuthUsername, g.SMTPAuthUsername)
			x.AuthPassword = cmpOr(x.AuthPassword, g.SMTPAuthPassword)
			x.AuthSecret = cmpOr(x.AuthSecret, g.SMTPAuthSecret)
			x.AuthIdentity = cmpOr(x.AuthIdentity, g.SMTPAuthIdentity)
			if x.RequireTLS == nil {
				x.RequireTLS = g.SMTPRequireTLS
			}
			if err := x.check(); err != nil {
				return nil, err
			}
		}
		if g.HTTPConfig != nil {
			for _, n := range r.notifierConfigs() {
				if n.HTTPConfig == nil {
					n.HTTPConfig = g.HTTPConfig
				}
			}
		}
	}
	for _, n := range c.allNotifierConfigs() {
		if n.HTTPConfig != nil {
			if err := n.HTTPConfig.Validate(); err != nil {
				return nil, fmt.Errorf("http_config: %w", err)
			}
		}
	}
	if len(c.Templates.Files) > 0 {
		notes = append(notes, fmt.Sprintf("alerting.templates: %d template file pattern(s) are read; their templates may be called from the title and text of slack_configs, the text of email_configs, and alerting.templates title and text (with templates: {files: [...], title: ..., text: ...})", len(c.Templates.Files)))
	}
	if len(c.Alertmanagers) > 0 {
		notes = append(notes, fmt.Sprintf("alerting.alertmanagers: the firing alerts of the rules are also sent to %d Alertmanager config(s), besides the appliance's own routing", len(c.Alertmanagers)))
	}
	return notes, nil
}

func cmpOr[T comparable](a, b T) T {
	var zero T
	if a != zero {
		return a
	}
	return b
}

// notifierConfigs returns the shared part of every HTTP integration of r.
func (r *Receiver) notifierConfigs() []*NotifierConfig {
	out := appendShared(nil, r.WebhookConfigs)
	out = appendShared(out, r.SlackConfigs)
	out = appendShared(out, r.DingTalkConfigs)
	out = appendShared(out, r.WeComConfigs)
	out = appendShared(out, r.FeishuConfigs)
	out = appendShared(out, r.SMSConfigs)
	out = appendShared(out, r.VoiceConfigs)
	return appendShared(out, r.AlertmanagerConfigs)
}

// shared returns c itself; an integration config that embeds
// NotifierConfig has it as a method, which appendShared calls.
func (c *NotifierConfig) shared() *NotifierConfig { return c }

// appendShared appends the NotifierConfig of each of xs to out.
func appendShared[T interface{ shared() *NotifierConfig }](out []*NotifierConfig, xs []T) []*NotifierConfig {
	for _, x := range xs {
		out = append(out, x.shared())
	}
	return out
}

func (c *AlertingConfig) allNotifierConfigs() []*NotifierConfig {
	var out []*NotifierConfig
	for _, r := range c.Receivers {
		if r != nil {
			out = append(out, r.notifierConfigs()...)
		}
	}
	return out
}

// topNotes are the notes on the top-level sections of a prometheus.yml
// that the appliance reads differently from Prometheus or does not act on.
func (c *Config) topNotes() []string {
	var notes []string
	if n := len(c.RemoteRead); n > 0 {
		notes = append(notes, fmt.Sprintf("remote_read: %d endpoint(s) are read by queries and rules besides the local storage (read_recent false: only before the raw tier's retention); series, labels, federate and remote read answer from the local storage only", n))
	}
	if c.Tracing != nil {
		notes = append(notes, "tracing is accepted and ignored: the appliance exports no traces")
	}
	if c.OTLP != nil {
		notes = append(notes, "otlp is accepted and ignored: the appliance has no OTLP receiver")
	}
	if c.Runtime != nil {
		notes = append(notes, "runtime is accepted and ignored: the Go runtime keeps its defaults (gogc is not applied)")
	}
	return notes
}
