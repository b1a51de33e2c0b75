// Package slack posts to a Slack incoming webhook
// (https://api.slack.com/messaging/webhooks): a JSON body with text and
// one attachment coloured by status. Slack answers 200 "ok".
package slack

import (
	"context"
	"net/http"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// Notifier posts to one incoming webhook.
type Notifier struct {
	conf   *config.SlackConfig
	client *http.Client
}

// New returns a Notifier; client nil uses http.DefaultClient.
func New(c *config.SlackConfig, client *http.Client) *Notifier {
	return &Notifier{conf: c, client: client}
}

// SendResolved implements message.Notifier.
func (n *Notifier) SendResolved() bool { return n.conf.Resolved() }

// Attachment is a Slack message attachment.
type Attachment struct {
	Title    string   `json:"title"`
	Text     string   `json:"text"`
	Color    string   `json:"color"`
	Fallback string   `json:"fallback"`
	MrkdwnIn []string `json:"mrkdwn_in"`
}

// Request is the body Slack's incoming webhook takes.
type Request struct {
	Channel     string       `json:"channel,omitempty"`
	Username    string       `json:"username,omitempty"`
	Text        string       `json:"text"`
	Attachments []Attachment `json:"attachments"`
}

// Color is Slack's colour for a status: danger for firing, good for
// resolved.
func Color(m *message.Message) string {
	if m.Status == "firing" {
		return "danger"
	}
	return "good"
}

// Notify implements message.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *message.Message) error {
	req := Request{
		Channel: n.conf.Channel, Username: n.conf.Username, Text: m.Title,
		Attachments: []Attachment{{Title: m.Title, Text: m.Text, Color: Color(m), Fallback: m.Title, MrkdwnIn: []string{"text"}}},
	}
	_, err := deliver.PostJSON(ctx, n.client, string(n.conf.APIURL), req)
	return err
}
