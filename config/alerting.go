package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
	"github.com/prometheus/alertmanager/timeinterval"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
)

// AlertingConfig is the alerting section: Alertmanager's route tree,
// receivers, inhibit rules and time intervals (same keys, same meaning),
// plus the daily digest for P2 and the outbox's retry policy.
//
// An empty section is a working setup: the route tree of DefaultRoute (P0 to
// the receiver "pager", P1 to "chat", P2 to the digest) and the inhibit rule
// of DefaultInhibitRules. Receivers named by the default tree that are not
// defined are not an error: the notifier warns once that alerts route to
// them, and drops what would go to them.
type AlertingConfig struct {
	Route         *Route          `yaml:"route,omitempty"`
	Receivers     []*Receiver     `yaml:"receivers,omitempty"`
	InhibitRules  []*InhibitRule  `yaml:"inhibit_rules,omitempty"`
	TimeIntervals []*TimeInterval `yaml:"time_intervals,omitempty"`
	Digest        DigestConfig    `yaml:"digest,omitempty"`
	Outbox        OutboxConfig    `yaml:"outbox,omitempty"`
	// Templates replace the default title and text of notifications.
	Templates MessageTemplates `yaml:"templates,omitempty"`
	// SeverityMap maps severity label values to the priority label
	// (P0, P1, P2) that routing reads, over DefaultSeverityMap.
	SeverityMap map[string]string `yaml:"severity_map,omitempty"`
	// DefaultSeverity is the priority of rules and alerts without a
	// severity label (default P1).
	DefaultSeverity string `yaml:"default_severity,omitempty"`
	// SeverityLabels are the labels whose value severity_map reads, the
	// first one present (default [severity]); e.g. [severity, level] for
	// rule sets that write level: critical, or priority for those that
	// write priority: high.
	SeverityLabels []string `yaml:"severity_labels,omitempty"`

	// Global is an alertmanager.yml's global section: defaults of the
	// receivers (smtp_*, slack_api_url, http_config) and resolve_timeout.
	Global *AlertmanagerGlobal `yaml:"global,omitempty"`
	// MuteTimeIntervals is Alertmanager's older name of time_intervals.
	MuteTimeIntervals []*TimeInterval `yaml:"mute_time_intervals,omitempty"`
	// Alertmanagers and AlertRelabelConfigs are prometheus.yml's: the
	// firing alerts of the rules are also sent to these Alertmanagers,
	// as Prometheus sends them.
	Alertmanagers       []*promconfig.AlertmanagerConfig `yaml:"alertmanagers,omitempty"`
	AlertRelabelConfigs []*relabel.Config                `yaml:"alert_relabel_configs,omitempty"`

	notes []string // what is mapped and ignored, for `appliance check`
	// external is global.external_labels, which Prometheus adds to the
	// alerts it sends to alerting.alertmanagers (ExternalLabels).
	external labels.Labels
}

// ExternalLabels returns global.external_labels of the file the section
// was loaded from.
func (c AlertingConfig) ExternalLabels() labels.Labels { return c.external }

// MessageTemplates are Go text/template for the title and the text of
// every alert notification (notify/message.Data is what they see); empty
// keeps the default. config does not parse them: the notifier does, and
// `appliance check` and the command's loading report their errors at the
// line of the key (see Config.KeyLine).
type MessageTemplates struct {
	Title string `yaml:"title,omitempty"`
	Text  string `yaml:"text,omitempty"`
	// Files are Alertmanager's templates: template file globs, relative
	// to the config file (alerting.templates written as a list, as in an
	// alertmanager.yml, or the files key). Their named templates may be
	// called from Title and Text and from the title and text of
	// slack_configs and email_configs.
	Files []string `yaml:"files,omitempty"`
}

// DigestConfig is alerting.digest: when and to whom the daily digest of P2
// alerts (and of routes with digest: true) goes.
type DigestConfig struct {
	// At is the local time of day, "HH:MM".
	At string `yaml:"at,omitempty"`
	// Timezone is an IANA zone name such as "Asia/Shanghai"; default UTC.
	Timezone  string   `yaml:"timezone,omitempty"`
	Receivers []string `yaml:"receivers,omitempty"`
}

// DefaultDigestConfig is the digest when the section leaves keys out.
// Receivers is left empty: DigestReceivers gives "chat" then, and an
// undefined "chat" is only an error when it was written down.
var DefaultDigestConfig = DigestConfig{At: "09:00", Timezone: "UTC"}

// defaultDigestReceivers are the digest's receivers when none are set.
var defaultDigestReceivers = []string{"chat"}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *DigestConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = DefaultDigestConfig
	type plain DigestConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if _, _, err := c.Clock(); err != nil {
		return err
	}
	if _, err := c.Location(); err != nil {
		return err
	}
	return nil
}

// Clock returns the hour and minute of At.
func (c DigestConfig) Clock() (hour, minute int, err error) {
	at := c.At
	if at == "" {
		at = DefaultDigestConfig.At
	}
	t, err := time.Parse("15:04", at)
	if err != nil {
		return 0, 0, fmt.Errorf("digest time %q is not HH:MM (24-hour clock, e.g. \"09:00\")", at)
	}
	return t.Hour(), t.Minute(), nil
}

// Location returns the time zone of the digest.
func (c DigestConfig) Location() (*time.Location, error) {
	if c.Timezone == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		return nil, fmt.Errorf("unknown digest timezone %q: use an IANA name such as \"Europe/Berlin\"", c.Timezone)
	}
	return loc, nil
}

// DigestReceivers returns Receivers, or the default when none are set.
func (c DigestConfig) DigestReceivers() []string {
	if len(c.Receivers) == 0 {
		return defaultDigestReceivers
	}
	return c.Receivers
}

// OutboxConfig is alerting.outbox: how a notification that a receiver did
// not accept is retried.
type OutboxConfig struct {
	// GiveUpAfter is the age after which a notification that was never
	// accepted is marked failed and dropped from the outbox.
	GiveUpAfter model.Duration `yaml:"give_up_after,omitempty"`
	// MinBackoff and MaxBackoff bound the doubling wait between attempts.
	MinBackoff model.Duration `yaml:"min_backoff,omitempty"`
	MaxBackoff model.Duration `yaml:"max_backoff,omitempty"`
}

// DefaultOutboxConfig retries for a day: a receiver that is down over a
// night still gets what happened in it, the morning after.
var DefaultOutboxConfig = OutboxConfig{
	GiveUpAfter: model.Duration(24 * time.Hour),
	MinBackoff:  model.Duration(5 * time.Second),
	MaxBackoff:  model.Duration(5 * time.Minute),
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *OutboxConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = DefaultOutboxConfig
	type plain OutboxConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff {
		return fmt.Errorf("outbox max_backoff %q must be at least min_backoff %q, and both positive", c.MaxBackoff, c.MinBackoff)
	}
	if c.GiveUpAfter < c.MaxBackoff {
		return fmt.Errorf("outbox give_up_after %q must be at least max_backoff %q", c.GiveUpAfter, c.MaxBackoff)
	}
	return nil
}

// Matchers are Alertmanager matchers as a list of strings, e.g.
// `severity="P0"` or `job=~"vllm|tgi"`.
type Matchers amlabels.Matchers

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *Matchers) UnmarshalYAML(unmarshal func(any) error) error {
	var lines []string
	if err := unmarshal(&lines); err != nil {
		return err
	}
	for _, line := range lines {
		pm, err := amlabels.ParseMatchers(line)
		if err != nil {
			return fmt.Errorf("invalid matcher %q: %w", line, err)
		}
		*m = append(*m, pm...)
	}
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (m Matchers) MarshalYAML() (any, error) {
	out := make([]string, len(m))
	for i, x := range m {
		out[i] = x.String()
	}
	return out, nil
}

// Matches reports whether every matcher matches lset.
func (m Matchers) Matches(lset model.LabelSet) bool { return amlabels.Matchers(m).Matches(lset) }

// Route is a node of the route tree, as in Alertmanager. Unset timing keys
// are inherited from the parent; Digest sends the route's alerts to the
// daily digest instead of a receiver.
type Route struct {
	Receiver            string          `yaml:"receiver,omitempty"`
	GroupBy             []string        `yaml:"group_by,omitempty"`
	Matchers            Matchers        `yaml:"matchers,omitempty"`
	Continue            bool            `yaml:"continue,omitempty"`
	GroupWait           *model.Duration `yaml:"group_wait,omitempty"`
	GroupInterval       *model.Duration `yaml:"group_interval,omitempty"`
	RepeatInterval      *model.Duration `yaml:"repeat_interval,omitempty"`
	MuteTimeIntervals   []string        `yaml:"mute_time_intervals,omitempty"`
	ActiveTimeIntervals []string        `yaml:"active_time_intervals,omitempty"`
	Digest              bool            `yaml:"digest,omitempty"`
	Routes              []*Route        `yaml:"routes,omitempty"`
	// Match and MatchRe are Alertmanager's deprecated matchers, added to
	// Matchers when read.
	Match   map[string]string `yaml:"match,omitempty"`
	MatchRe map[string]string `yaml:"match_re,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Route) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Route
	if err := unmarshal((*plain)(r)); err != nil {
		return err
	}
	m, err := matchMap(r.Match, r.MatchRe)
	if err != nil {
		return err
	}
	r.Matchers = append(r.Matchers, m...)
	r.Match, r.MatchRe = nil, nil
	seen := map[string]bool{}
	for _, l := range r.GroupBy {
		if l == "..." {
			if len(r.GroupBy) > 1 {
				return fmt.Errorf("group_by: %q must be the only entry", l)
			}
			continue
		}
		if !model.LabelName(l).IsValid() {
			return fmt.Errorf("group_by: invalid label name %q", l)
		}
		if seen[l] {
			return fmt.Errorf("group_by: duplicated label %q", l)
		}
		seen[l] = true
	}
	for _, d := range []struct {
		key string
		v   *model.Duration
	}{{"group_interval", r.GroupInterval}, {"repeat_interval", r.RepeatInterval}} {
		if d.v != nil && *d.v <= 0 {
			return fmt.Errorf("%s %q must be positive", d.key, d.v.String())
		}
	}
	return nil
}

func dur(d time.Duration) *model.Duration { v := model.Duration(d); return &v }

// DefaultRoute is the route tree of an empty route: P0 pages at once and
// repeats every 30 minutes, P1 goes to the team chat and repeats every 4
// hours, P2 goes to the daily digest.
func DefaultRoute() *Route {
	mustMatchers := func(s string) Matchers {
		m, err := amlabels.ParseMatchers(s)
		if err != nil {
			panic(err)
		}
		return Matchers(m)
	}
	return &Route{
		GroupBy:        []string{"alertname", "job"},
		GroupWait:      dur(30 * time.Second),
		GroupInterval:  dur(5 * time.Minute),
		RepeatInterval: dur(4 * time.Hour),
		Routes: []*Route{
			{Receiver: "pager", Matchers: mustMatchers(`priority="P0"`), GroupWait: dur(10 * time.Second), RepeatInterval: dur(30 * time.Minute)},
			{Receiver: "chat", Matchers: mustMatchers(`priority="P1"`), GroupWait: dur(30 * time.Second), RepeatInterval: dur(4 * time.Hour)},
			{Matchers: mustMatchers(`priority="P2"`), Digest: true},
		},
	}
}

// DefaultInhibitRules: a firing P0 mutes the P1 and P2 alerts of the same
// job. Alertmanager treats a label missing on both sides as equal; the
// job!="" matchers leave alerts without a job alone.
func DefaultInhibitRules() []*InhibitRule {
	src, _ := amlabels.ParseMatchers(`priority="P0",job!=""`)
	tgt, _ := amlabels.ParseMatchers(`priority=~"P1|P2",job!=""`)
	return []*InhibitRule{{SourceMatchers: Matchers(src), TargetMatchers: Matchers(tgt), Equal: []string{"job"}}}
}

// InhibitRule mutes alerts matching TargetMatchers while an alert matching
// SourceMatchers fires with the same values of the Equal labels.
type InhibitRule struct {
	SourceMatchers Matchers `yaml:"source_matchers,omitempty"`
	TargetMatchers Matchers `yaml:"target_matchers,omitempty"`
	Equal          []string `yaml:"equal,omitempty"`
	// Alertmanager's deprecated forms, added to the matchers when read.
	SourceMatch   map[string]string `yaml:"source_match,omitempty"`
	SourceMatchRe map[string]string `yaml:"source_match_re,omitempty"`
	TargetMatch   map[string]string `yaml:"target_match,omitempty"`
	TargetMatchRe map[string]string `yaml:"target_match_re,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *InhibitRule) UnmarshalYAML(unmarshal func(any) error) error {
	type plain InhibitRule
	if err := unmarshal((*plain)(r)); err != nil {
		return err
	}
	src, err := matchMap(r.SourceMatch, r.SourceMatchRe)
	if err != nil {
		return err
	}
	tgt, err := matchMap(r.TargetMatch, r.TargetMatchRe)
	if err != nil {
		return err
	}
	r.SourceMatchers = append(r.SourceMatchers, src...)
	r.TargetMatchers = append(r.TargetMatchers, tgt...)
	r.SourceMatch, r.SourceMatchRe, r.TargetMatch, r.TargetMatchRe = nil, nil, nil, nil
	for _, l := range r.Equal {
		if !model.LabelName(l).IsValid() {
			return fmt.Errorf("inhibit rule equal: invalid label name %q", l)
		}
	}
	return nil
}

// TimeInterval is a named list of Alertmanager time intervals (times,
// weekdays, days_of_month, months, years, location).
type TimeInterval struct {
	Name          string                      `yaml:"name"`
	TimeIntervals []timeinterval.TimeInterval `yaml:"time_intervals"`
}

// Receiver is a named set of integrations, as in Alertmanager.
type Receiver struct {
	Name                string                `yaml:"name"`
	WebhookConfigs      []*WebhookConfig      `yaml:"webhook_configs,omitempty"`
	SlackConfigs        []*SlackConfig        `yaml:"slack_configs,omitempty"`
	DingTalkConfigs     []*DingTalkConfig     `yaml:"dingtalk_configs,omitempty"`
	WeComConfigs        []*WeComConfig        `yaml:"wecom_configs,omitempty"`
	FeishuConfigs       []*FeishuConfig       `yaml:"feishu_configs,omitempty"`
	EmailConfigs        []*EmailConfig        `yaml:"email_configs,omitempty"`
	SMSConfigs          []*HTTPGatewayConfig  `yaml:"sms_configs,omitempty"`
	VoiceConfigs        []*HTTPGatewayConfig  `yaml:"voice_configs,omitempty"`
	AlertmanagerConfigs []*AlertmanagerConfig `yaml:"alertmanager_configs,omitempty"`
	// Other holds Alertmanager's integrations the appliance does not
	// have (pagerduty_configs, ...): ignored, with a note.
	Other map[string]any `yaml:",inline"`
}

// NotifierConfig is what every integration config shares.
type NotifierConfig struct {
	// SendResolved also notifies when the alerts of a group resolve;
	// default true, as for Alertmanager's webhook.
	SendResolved *bool `yaml:"send_resolved,omitempty"`
	// HTTPConfig is Alertmanager's http_config: TLS, proxy_url,
	// basic_auth, authorization (bearer), oauth2 of the integration's
	// requests; alerting.global.http_config when unset.
	HTTPConfig *commoncfg.HTTPClientConfig `yaml:"http_config,omitempty"`
}

// Resolved reports whether resolved notifications are sent.
func (c NotifierConfig) Resolved() bool { return c.SendResolved == nil || *c.SendResolved }

// checkSecretURL checks a URL that may carry a token without putting the
// URL into the error.
func checkSecretURL(key string, s commoncfg.Secret) error {
	if s == "" {
		return fmt.Errorf("%s is required", key)
	}
	u, err := url.Parse(string(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s is not an absolute http or https URL (the value is not shown: it may hold a token)", key)
	}
	return nil
}

// WebhookConfig posts Alertmanager's webhook payload (version 4) to URL.
type WebhookConfig struct {
	NotifierConfig `yaml:",inline"`
	URL            commoncfg.Secret `yaml:"url"`
	// MaxAlerts caps the alerts in one payload (0: all), as in Alertmanager.
	MaxAlerts uint64 `yaml:"max_alerts,omitempty"`
	// Other holds Alertmanager's keys the appliance does not use
	// (url_file, timeout): ignored, with a note.
	Other map[string]any `yaml:",inline"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *WebhookConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain WebhookConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if err := checkOther(c.Other, amWebhookKeys); err != nil {
		return err
	}
	return checkSecretURL("webhook_configs url", c.URL)
}

// SlackConfig posts to a Slack incoming webhook.
type SlackConfig struct {
	NotifierConfig `yaml:",inline"`
	APIURL         commoncfg.Secret `yaml:"api_url"`
	Channel        string           `yaml:"channel,omitempty"`
	Username       string           `yaml:"username,omitempty"`
	// Title and Text are Alertmanager's: templates of the message's title
	// and text for this integration (over the alerting.templates files),
	// instead of the appliance's.
	Title string `yaml:"title,omitempty"`
	Text  string `yaml:"text,omitempty"`
	// Other holds Alertmanager's Slack keys the appliance does not use
	// (color, icon_emoji, fields, actions, ...): ignored, with a note.
	Other map[string]any `yaml:",inline"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *SlackConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain SlackConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if err := checkOther(c.Other, amSlackKeys); err != nil {
		return err
	}
	if c.APIURL == "" {
		// alerting.global.slack_api_url may give it (applyGlobal).
		return nil
	}
	return checkSecretURL("slack_configs api_url", c.APIURL)
}

// DingTalkConfig posts to a DingTalk group robot; Secret enables the
// robot's "additional signature" (加签) security setting.
type DingTalkConfig struct {
	NotifierConfig `yaml:",inline"`
	WebhookURL     commoncfg.Secret `yaml:"webhook_url"`
	Secret         commoncfg.Secret `yaml:"secret,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *DingTalkConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain DingTalkConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	return checkSecretURL("dingtalk_configs webhook_url", c.WebhookURL)
}

// WeComConfig posts to a WeCom (企业微信) group robot.
type WeComConfig struct {
	NotifierConfig `yaml:",inline"`
	WebhookURL     commoncfg.Secret `yaml:"webhook_url"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *WeComConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain WeComConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	return checkSecretURL("wecom_configs webhook_url", c.WebhookURL)
}

// FeishuConfig posts to a Feishu/Lark custom bot; Secret enables its
// signature verification.
type FeishuConfig struct {
	NotifierConfig `yaml:",inline"`
	WebhookURL     commoncfg.Secret `yaml:"webhook_url"`
	Secret         commoncfg.Secret `yaml:"secret,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *FeishuConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain FeishuConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	return checkSecretURL("feishu_configs webhook_url", c.WebhookURL)
}

// EmailConfig sends mail with Alertmanager's email_configs keys.
type EmailConfig struct {
	NotifierConfig `yaml:",inline"`
	To             string              `yaml:"to"`
	From           string              `yaml:"from"`
	Hello          string              `yaml:"hello,omitempty"`
	Smarthost      string              `yaml:"smarthost"`
	AuthUsername   string              `yaml:"auth_username,omitempty"`
	AuthPassword   commoncfg.Secret    `yaml:"auth_password,omitempty"`
	AuthSecret     commoncfg.Secret    `yaml:"auth_secret,omitempty"`
	AuthIdentity   string              `yaml:"auth_identity,omitempty"`
	Headers        map[string]string   `yaml:"headers,omitempty"`
	RequireTLS     *bool               `yaml:"require_tls,omitempty"`
	TLSConfig      commoncfg.TLSConfig `yaml:"tls_config,omitempty"`
	// Text is Alertmanager's: a template of the plain-text body for this
	// integration (over the alerting.templates files).
	Text string `yaml:"text,omitempty"`
	// Other holds Alertmanager's email keys the appliance does not use
	// (html, ...): ignored, with a note.
	Other map[string]any `yaml:",inline"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *EmailConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain EmailConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if err := checkOther(c.Other, amEmailKeys); err != nil {
		return err
	}
	if c.To == "" {
		return fmt.Errorf("email_configs: to is required")
	}
	// from and smarthost may come from alerting.global (applyGlobal).
	return nil
}

// check checks what alerting.global may fill.
func (c *EmailConfig) check() error {
	if c.To == "" || c.From == "" {
		return fmt.Errorf("email_configs: to and from are required")
	}
	if c.Smarthost == "" || !strings.Contains(c.Smarthost, ":") {
		return fmt.Errorf("email_configs: smarthost %q must be host:port", c.Smarthost)
	}
	return nil
}

// TLSRequired reports whether STARTTLS is required (default true, as in
// Alertmanager).
func (c *EmailConfig) TLSRequired() bool { return c.RequireTLS == nil || *c.RequireTLS }

// HTTPGatewayConfig is a templated HTTP request to an SMS or voice-call
// gateway (sms_configs, voice_configs). Body and header values are Go
// text/template over the notification (see notify/httpgateway).
type HTTPGatewayConfig struct {
	NotifierConfig `yaml:",inline"`
	URL            commoncfg.Secret            `yaml:"url"`
	Method         string                      `yaml:"method,omitempty"`
	Headers        map[string]commoncfg.Secret `yaml:"headers,omitempty"`
	Body           string                      `yaml:"body,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *HTTPGatewayConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain HTTPGatewayConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if c.Method == "" {
		c.Method = "POST"
	}
	c.Method = strings.ToUpper(c.Method)
	if !slices.Contains([]string{"GET", "POST", "PUT"}, c.Method) {
		return fmt.Errorf("sms/voice method %q: want GET, POST or PUT", c.Method)
	}
	return checkSecretURL("sms/voice url", c.URL)
}

// AlertmanagerConfig forwards alerts to an existing Alertmanager.
type AlertmanagerConfig struct {
	NotifierConfig `yaml:",inline"`
	URL            commoncfg.Secret `yaml:"url"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *AlertmanagerConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain AlertmanagerConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	return checkSecretURL("alertmanager_configs url", c.URL)
}

// UnmarshalYAML implements yaml.Unmarshaler: it applies the defaults and
// checks the references between the parts (receiver and time interval
// names).
func (c *AlertingConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain AlertingConfig
	*c = AlertingConfig{Digest: DefaultDigestConfig, Outbox: DefaultOutboxConfig}
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	c.TimeIntervals = append(c.TimeIntervals, c.MuteTimeIntervals...)
	c.MuteTimeIntervals = nil
	notes, err := c.applyGlobal()
	if err != nil {
		return err
	}
	c.notes = notes
	receivers := map[string]bool{}
	for _, r := range c.Receivers {
		if r == nil || r.Name == "" {
			return fieldErrorf([]string{"receivers"}, "a receiver has no name")
		}
		if receivers[r.Name] {
			return fmt.Errorf("receiver %q is defined twice", r.Name)
		}
		receivers[r.Name] = true
	}
	intervals := map[string]bool{}
	for _, ti := range c.TimeIntervals {
		if ti == nil || ti.Name == "" {
			return fieldErrorf([]string{"time_intervals"}, "a time interval has no name")
		}
		if intervals[ti.Name] {
			return fmt.Errorf("time interval %q is defined twice", ti.Name)
		}
		intervals[ti.Name] = true
	}
	if err := c.checkSeverities(); err != nil {
		return err
	}
	if c.Route == nil {
		c.Route = DefaultRoute()
	} else {
		if c.Route.Receiver == "" {
			return fieldErrorf([]string{"route"}, "the root route must name a receiver")
		}
		if len(c.Route.Matchers) > 0 {
			return fieldErrorf([]string{"route", "matchers"}, "the root route must not have matchers")
		}
		if err := checkRoute(c.Route, receivers, intervals); err != nil {
			return err
		}
	}
	if c.InhibitRules == nil {
		c.InhibitRules = DefaultInhibitRules()
	}
	for _, name := range c.Digest.Receivers {
		if !receivers[name] {
			return fieldErrorf([]string{"digest", "receivers"}, "digest receiver %q is not defined in receivers", name)
		}
	}
	return nil
}

func checkRoute(r *Route, receivers, intervals map[string]bool) error {
	if r.Receiver != "" && !receivers[r.Receiver] {
		return fmt.Errorf("route receiver %q is not defined in receivers", r.Receiver)
	}
	for _, n := range append(slices.Clone(r.MuteTimeIntervals), r.ActiveTimeIntervals...) {
		if !intervals[n] {
			return fmt.Errorf("time interval %q is not defined in time_intervals", n)
		}
	}
	for _, sub := range r.Routes {
		if err := checkRoute(sub, receivers, intervals); err != nil {
			return err
		}
	}
	return nil
}

// Receiver returns the receiver named name, or nil.
func (c *AlertingConfig) Receiver(name string) *Receiver {
	for _, r := range c.Receivers {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Resolved returns the section with its defaults applied, also when it was
// never decoded (the embedded default config).
func (c AlertingConfig) Resolved() AlertingConfig {
	if c.Route == nil {
		c.Route = DefaultRoute()
	}
	if c.InhibitRules == nil {
		c.InhibitRules = DefaultInhibitRules()
	}
	if c.Digest.At == "" {
		c.Digest = DefaultDigestConfig
	}
	if c.Outbox.MinBackoff == 0 {
		c.Outbox = DefaultOutboxConfig
	}
	return c
}
