// Package alertmanager forwards alerts to an existing Alertmanager: POST
// <url>/api/v2/alerts with its postable alerts (labels, annotations,
// startsAt, endsAt, generatorURL). That Alertmanager then groups and routes
// them itself; digests and test messages are not forwarded.
package alertmanager

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// Notifier forwards to one Alertmanager.
type Notifier struct {
	conf   *config.AlertmanagerConfig
	client *http.Client
}

// New returns a Notifier; client nil uses http.DefaultClient.
func New(c *config.AlertmanagerConfig, client *http.Client) *Notifier {
	return &Notifier{conf: c, client: client}
}

// SendResolved implements message.Notifier.
func (n *Notifier) SendResolved() bool { return n.conf.Resolved() }

// PostableAlert is an alert of Alertmanager's v2 API.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Notify implements message.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *message.Message) error {
	if m.Kind != message.KindAlerts {
		return nil
	}
	as := make([]PostableAlert, 0, len(m.Alerts))
	for _, a := range m.Alerts {
		as = append(as, PostableAlert{Labels: a.Labels, Annotations: a.Annotations, StartsAt: a.StartsAt, EndsAt: a.EndsAt, GeneratorURL: a.GeneratorURL})
	}
	u := strings.TrimSuffix(string(n.conf.URL), "/") + "/api/v2/alerts"
	_, err := deliver.PostJSON(ctx, n.client, u, as)
	return err
}
