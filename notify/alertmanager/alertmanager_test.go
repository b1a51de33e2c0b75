package alertmanager

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

func TestForwardsPostableAlerts(t *testing.T) {
	var path, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		path, body = r.URL.Path, string(b)
	}))
	defer srv.Close()
	n := New(&config.AlertmanagerConfig{URL: commoncfg.Secret(srv.URL + "/am/")}, nil)
	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	m := &message.Message{Kind: message.KindAlerts, Alerts: []message.Alert{{
		Status: "firing", Labels: map[string]string{"alertname": "Slow", "severity": "P1"}, Annotations: map[string]string{"summary": "s"},
		StartsAt: start, EndsAt: start.Add(time.Hour), GeneratorURL: "http://box/graph",
	}}}
	require.NoError(t, n.Notify(context.Background(), m))
	require.Equal(t, "/am/api/v2/alerts", path)
	require.JSONEq(t, `[{"labels":{"alertname":"Slow","severity":"P1"},"annotations":{"summary":"s"},"startsAt":"2026-03-02T10:00:00Z","endsAt":"2026-03-02T11:00:00Z","generatorURL":"http://box/graph"}]`, body)

	path = ""
	require.NoError(t, n.Notify(context.Background(), &message.Message{Kind: message.KindDigest}))
	require.Empty(t, path, "digests are not forwarded")
}
