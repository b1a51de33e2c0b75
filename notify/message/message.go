// Package message is what a notification carries from the notifier to a
// receiver: the alerts of one group (or the daily digest), already rendered
// into a title and a text, and the interface every receiver implements.
//
// A Message is written to the outbox as JSON before it is sent, so that a
// restart sends the same bytes with the same dedup key: receivers must
// render from the Message only, never from state that may have changed.
package message

import (
	"context"
	"time"
)

// Kinds of message.
const (
	KindAlerts = "alerts" // the alerts of one aggregation group
	KindDigest = "digest" // the daily digest
	KindTest   = "test"   // appliance notify test
	KindReport = "report" // the weekly SLO report
)

// Alert is one alert in a message, with the fields of Alertmanager's
// webhook payload.
type Alert struct {
	Status       string            `json:"status"` // "firing" or "resolved"
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Alerts are the alerts of a message; templates call .Alerts.Firing and
// .Alerts.Resolved as in Alertmanager's.
type Alerts []Alert

// Firing returns the firing alerts.
func (as Alerts) Firing() Alerts { return as.with("firing") }

// Resolved returns the resolved alerts.
func (as Alerts) Resolved() Alerts { return as.with("resolved") }

func (as Alerts) with(status string) Alerts {
	var out Alerts
	for _, a := range as {
		if a.Status == status {
			out = append(out, a)
		}
	}
	return out
}

// Message is one notification to one receiver.
type Message struct {
	Kind     string `json:"kind"`
	Receiver string `json:"receiver"`
	// Status is "firing" if any alert fires, else "resolved".
	Status            string            `json:"status"`
	GroupKey          string            `json:"groupKey"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            Alerts            `json:"alerts"`
	// DedupKey is the same on every attempt of this notification, also
	// after a restart; receivers that can pass it on do (a header).
	DedupKey string `json:"dedupKey"`
	// Title and Text are the rendered message (Text is Markdown that
	// reads as plain text too).
	Title string    `json:"title"`
	Text  string    `json:"text"`
	HTML  string    `json:"html,omitempty"`
	At    time.Time `json:"at"`
}

// Severity returns the common severity label, or "".
func (m *Message) Severity() string { return m.CommonLabels["severity"] }

// Notifier delivers messages to one integration of a receiver (one
// webhook_configs entry, one dingtalk_configs entry, ...).
//
// Notify may be called concurrently for different messages. An error means
// the message was not accepted; wrap it with deliver.Permanent when a retry
// cannot help (the receiver rejected the request as malformed). Errors
// must not contain secrets (URLs with tokens, passwords).
type Notifier interface {
	Notify(ctx context.Context, m *Message) error
	// SendResolved reports whether resolved notifications go to it.
	SendResolved() bool
}
