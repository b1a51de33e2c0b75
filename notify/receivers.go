package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	commoncfg "github.com/prometheus/common/config"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/alertmanager"
	"github.com/aiserve/appliance/notify/dingtalk"
	"github.com/aiserve/appliance/notify/email"
	"github.com/aiserve/appliance/notify/feishu"
	"github.com/aiserve/appliance/notify/httpgateway"
	"github.com/aiserve/appliance/notify/message"
	"github.com/aiserve/appliance/notify/slack"
	"github.com/aiserve/appliance/notify/webhook"
	"github.com/aiserve/appliance/notify/wecom"
)

// buildReceivers makes the integrations of every receiver.
func buildReceivers(c config.AlertingConfig, client *http.Client, now func() time.Time) (map[string][]*integration, error) {
	out := map[string][]*integration{}
	for _, r := range c.Receivers {
		var ints []*integration
		add := func(typ string, i int, n message.Notifier) {
			ints = append(ints, &integration{name: fmt.Sprintf("%s/%s/%d", r.Name, typ, i), receiver: r.Name, Notifier: n})
		}
		for i, x := range r.WebhookConfigs {
			cl, err := integrationClient(x.NotifierConfig, client)
			if err != nil {
				return nil, fmt.Errorf("receiver %q webhook_configs[%d]: %w", r.Name, i, err)
			}
			add("webhook", i, webhook.New(x, cl))
		}
		for i, x := range r.SlackConfigs {
			cl, err := integrationClient(x.NotifierConfig, client)
			if err != nil {
				return nil, fmt.Errorf("receiver %q slack_configs[%d]: %w", r.Name, i, err)
			}
			add("slack", i, slack.New(x, cl))
			if x.Title != "" || x.Text != "" {
				t, err := message.ParseTemplateFiles(x.Title, x.Text, c.Templates.Files)
				if err != nil {
					return nil, fmt.Errorf("receiver %q slack_configs[%d]: %w", r.Name, i, err)
				}
				ints[len(ints)-1].templates = t
			}
		}
		for i, x := range r.DingTalkConfigs {
			cl, err := integrationClient(x.NotifierConfig, client)
			if err != nil {
				return nil, fmt.Errorf("receiver %q dingtalk_configs[%d]: %w", r.Name, i, err)
			}
			add("dingtalk", i, dingtalk.New(x, cl, now))
		}
		for i, x := range r.WeComConfigs {
			cl, err := integrationClient(x.NotifierConfig, client)
			if err != nil {
				return nil, fmt.Errorf("receiver %q wecom_configs[%d]: %w", r.Name, i, err)
			}
			add("wecom", i, wecom.New(x, cl))
		}
		for i, x := range r.FeishuConfigs {
			cl, err := integrationClient(x.NotifierConfig, client)
			if err != nil {
				return nil, fmt.Errorf("receiver %q feishu_configs[%d]: %w", r.Name, i, err)
			}
			add("feishu", i, feishu.New(x, cl, now))
		}
		for i, x := range r.EmailConfigs {
			add("email", i, email.New(x, now))
			if x.Text != "" {
				t, err := message.ParseTemplateFiles(c.Templates.Title, x.Text, c.Templates.Files)
				if err != nil {
					return nil, fmt.Errorf("receiver %q email_configs[%d]: %w", r.Name, i, err)
				}
				ints[len(ints)-1].templates = t
			}
		}
		for typ, xs := range map[string][]*config.HTTPGatewayConfig{"sms": r.SMSConfigs, "voice": r.VoiceConfigs} {
			for i, x := range xs {
				cl, err := integrationClient(x.NotifierConfig, client)
				if err != nil {
					return nil, fmt.Errorf("receiver %q %s_configs[%d]: %w", r.Name, typ, i, err)
				}
				g, err := httpgateway.New(x, cl)
				if err != nil {
					return nil, fmt.Errorf("receiver %q %s_configs[%d]: %w", r.Name, typ, i, err)
				}
				add(typ, i, g)
			}
		}
		for i, x := range r.AlertmanagerConfigs {
			cl, err := integrationClient(x.NotifierConfig, client)
			if err != nil {
				return nil, fmt.Errorf("receiver %q alertmanager_configs[%d]: %w", r.Name, i, err)
			}
			add("alertmanager", i, alertmanager.New(x, cl))
		}
		out[r.Name] = ints
	}
	return out, nil
}

// integrationClient is the client of an integration: its http_config's
// (TLS, proxy, auth), else the notifier's.
func integrationClient(c config.NotifierConfig, def *http.Client) (*http.Client, error) {
	if c.HTTPConfig == nil {
		return def, nil
	}
	cl, err := commoncfg.NewClientFromConfig(*c.HTTPConfig, "appliance")
	if err != nil {
		return nil, fmt.Errorf("http_config: %w", err)
	}
	if def != nil {
		cl.Timeout = def.Timeout
	}
	return cl, nil
}

// TestReceiver sends a test message straight to every integration of the
// receiver named name, without the outbox (for `appliance notify test`,
// which must not open the state file of a running appliance). It returns
// the errors of the integrations that did not accept it.
func TestReceiver(ctx context.Context, c config.AlertingConfig, name, externalURL string, client *http.Client, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	if client == nil {
		client = &http.Client{}
	}
	rc := c.Receiver(name)
	if rc == nil {
		return fmt.Errorf("no receiver named %q in alerting.receivers", name)
	}
	recv, err := buildReceivers(config.AlertingConfig{Receivers: []*config.Receiver{rc}}, client, now)
	if err != nil {
		return err
	}
	ints := recv[name]
	if len(ints) == 0 {
		return fmt.Errorf("receiver %q has no integrations to test", name)
	}
	t := now()
	a := message.Alert{
		Status: "firing", Labels: map[string]string{"alertname": "ApplianceNotifyTest", "severity": "P2"},
		Annotations: map[string]string{"summary": "Test notification from the appliance", "description": "If you read this, the receiver " + name + " works."},
		StartsAt:    t, Fingerprint: "0000000000000000",
	}
	var errs []error
	for _, in := range ints {
		m := &message.Message{
			Kind: message.KindTest, Receiver: name, Status: "firing", GroupKey: "test", GroupLabels: map[string]string{"alertname": "ApplianceNotifyTest"},
			CommonLabels: a.Labels, CommonAnnotations: a.Annotations, ExternalURL: externalURL, Alerts: []message.Alert{a},
			DedupKey: fmt.Sprintf("test-%d", t.UnixNano()), At: t,
		}
		if err := message.Render(m); err != nil {
			return err
		}
		if err := in.Notify(ctx, m); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", in.name, err))
		}
	}
	return errors.Join(errs...)
}
