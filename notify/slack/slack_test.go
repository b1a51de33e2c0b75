package slack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	commoncfg "github.com/prometheus/common/config"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

func TestIncomingWebhook(t *testing.T) {
	var path, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		path, body = r.URL.Path, string(b)
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	n := New(&config.SlackConfig{APIURL: commoncfg.Secret(srv.URL + "/services/T000/B000/XXXX"), Channel: "#oncall", Username: "appliance"}, nil)
	require.NoError(t, n.Notify(context.Background(), &message.Message{Status: "firing", Title: "[FIRING:1] P1 Slow", Text: "p95 is 3s"}))
	require.Equal(t, "/services/T000/B000/XXXX", path)
	require.JSONEq(t, `{"channel":"#oncall","username":"appliance","text":"[FIRING:1] P1 Slow",
		"attachments":[{"title":"[FIRING:1] P1 Slow","text":"p95 is 3s","color":"danger","fallback":"[FIRING:1] P1 Slow","mrkdwn_in":["text"]}]}`, body)
}

func TestRejected(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "invalid_token", http.StatusForbidden)
	}))
	defer srv.Close()
	n := New(&config.SlackConfig{APIURL: commoncfg.Secret(srv.URL + "/services/T000/B000/XXXX")}, nil)
	err := n.Notify(context.Background(), &message.Message{Title: "t"})
	require.True(t, deliver.IsPermanent(err))
	require.NotContains(t, err.Error(), "XXXX")
}
