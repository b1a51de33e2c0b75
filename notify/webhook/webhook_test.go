package webhook

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/message"
)

// The body is Alertmanager's webhook payload, version 4, field for field.
func TestVersion4Payload(t *testing.T) {
	var body, dedup, ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body, dedup, ctype = string(b), r.Header.Get(DedupHeader), r.Header.Get("Content-Type")
	}))
	defer srv.Close()
	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	m := &message.Message{
		Kind: message.KindAlerts, Receiver: "chat", Status: "firing", GroupKey: `0.1{severity="P1"}:{alertname="Slow"}`,
		GroupLabels: map[string]string{"alertname": "Slow"}, CommonLabels: map[string]string{"alertname": "Slow", "severity": "P1"},
		CommonAnnotations: map[string]string{}, ExternalURL: "http://box:9090", DedupKey: "abc",
		Alerts: []message.Alert{
			{Status: "firing", Labels: map[string]string{"alertname": "Slow", "severity": "P1", "instance": "a"}, Annotations: map[string]string{"summary": "p95 3s"}, StartsAt: start, EndsAt: start.Add(time.Hour), GeneratorURL: "http://box/g", Fingerprint: "f1"},
			{Status: "resolved", Labels: map[string]string{"alertname": "Slow", "severity": "P1", "instance": "b"}, Annotations: map[string]string{}, StartsAt: start, EndsAt: start.Add(time.Minute), Fingerprint: "f2"},
		},
	}
	n := New(&config.WebhookConfig{URL: commoncfg.Secret(srv.URL), MaxAlerts: 1}, nil)
	require.NoError(t, n.Notify(context.Background(), m))
	require.Equal(t, "abc", dedup)
	require.Equal(t, "application/json", ctype)
	require.JSONEq(t, `{
		"version": "4", "groupKey": "0.1{severity=\"P1\"}:{alertname=\"Slow\"}", "truncatedAlerts": 1,
		"status": "firing", "receiver": "chat",
		"groupLabels": {"alertname": "Slow"}, "commonLabels": {"alertname": "Slow", "severity": "P1"}, "commonAnnotations": {},
		"externalURL": "http://box:9090",
		"alerts": [{"status": "firing", "labels": {"alertname": "Slow", "severity": "P1", "instance": "a"}, "annotations": {"summary": "p95 3s"},
			"startsAt": "2026-03-02T10:00:00Z", "endsAt": "2026-03-02T11:00:00Z", "generatorURL": "http://box/g", "fingerprint": "f1"}]
	}`, body)
}
