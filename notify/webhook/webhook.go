// Package webhook posts Alertmanager's webhook payload, version 4, so that
// every bridge written for Alertmanager's webhook_configs works unchanged.
// The dedup key of the notification goes in the X-Appliance-Dedup-Key
// header: a receiver that sees the same key twice got a resend after a
// crash between send and acknowledgement. The daily digest arrives as a
// payload with groupKey "digest" listing the alerts of the day.
package webhook

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// DedupHeader carries Message.DedupKey.
const DedupHeader = "X-Appliance-Dedup-Key"

// Payload is Alertmanager's webhook body (version 4).
type Payload struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   uint64            `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []message.Alert   `json:"alerts"`
}

// Notifier posts to one webhook.
type Notifier struct {
	conf   *config.WebhookConfig
	client *http.Client
}

// New returns a Notifier; client nil uses http.DefaultClient.
func New(c *config.WebhookConfig, client *http.Client) *Notifier {
	return &Notifier{conf: c, client: client}
}

// SendResolved implements message.Notifier.
func (n *Notifier) SendResolved() bool { return n.conf.Resolved() }

// NewPayload builds the version 4 payload of m, keeping at most maxAlerts
// alerts (0: all).
func NewPayload(m *message.Message, maxAlerts uint64) Payload {
	p := Payload{
		Version: "4", GroupKey: m.GroupKey, Status: m.Status, Receiver: m.Receiver,
		GroupLabels: nonNil(m.GroupLabels), CommonLabels: nonNil(m.CommonLabels), CommonAnnotations: nonNil(m.CommonAnnotations),
		ExternalURL: m.ExternalURL, Alerts: m.Alerts,
	}
	if p.Alerts == nil {
		p.Alerts = []message.Alert{}
	}
	if maxAlerts > 0 && uint64(len(p.Alerts)) > maxAlerts {
		p.TruncatedAlerts = uint64(len(p.Alerts)) - maxAlerts
		p.Alerts = p.Alerts[:maxAlerts]
	}
	return p
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// Notify implements message.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *message.Message) error {
	body, err := json.Marshal(NewPayload(m, n.conf.MaxAlerts))
	if err != nil {
		return deliver.Permanent(err)
	}
	h := deliver.JSON()
	h.Set(DedupHeader, m.DedupKey)
	_, err = deliver.Do(ctx, n.client, http.MethodPost, string(n.conf.URL), h, body)
	return err
}
