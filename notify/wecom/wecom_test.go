package wecom

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	commoncfg "github.com/prometheus/common/config"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/message"
)

func TestMarkdown(t *testing.T) {
	var path, key, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		path, key, body = r.URL.Path, r.URL.Query().Get("key"), string(b)
		_, _ = w.Write([]byte(`{"errcode":0,"errmsg":"ok"}`))
	}))
	defer srv.Close()
	n := New(&config.WeComConfig{WebhookURL: commoncfg.Secret(srv.URL + "/cgi-bin/webhook/send?key=693a91f6-7xxx")}, nil)
	require.NoError(t, n.Notify(context.Background(), &message.Message{Title: "[FIRING:1] P1 Slow", Text: "p95 is 3s"}))
	require.Equal(t, "/cgi-bin/webhook/send", path)
	require.Equal(t, "693a91f6-7xxx", key)
	require.JSONEq(t, `{"msgtype":"markdown","markdown":{"content":"### [FIRING:1] P1 Slow\np95 is 3s"}}`, body)
}

func TestLongContentIsCutAtTheLimit(t *testing.T) {
	var content string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m Markdown
		_ = json.NewDecoder(r.Body).Decode(&m)
		content = m.Markdown.Content
		_, _ = w.Write([]byte(`{"errcode":0,"errmsg":"ok"}`))
	}))
	defer srv.Close()
	n := New(&config.WeComConfig{WebhookURL: commoncfg.Secret(srv.URL + "/?key=k")}, nil)
	require.NoError(t, n.Notify(context.Background(), &message.Message{Title: "t", Text: strings.Repeat("延迟", 2000)}))
	require.LessOrEqual(t, len(content), MaxContent)
	require.True(t, utf8.ValidString(content))
	require.True(t, strings.HasSuffix(content, "…"))
}

func TestErrcode(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"errcode":93000,"errmsg":"invalid webhook url"}`))
	}))
	defer srv.Close()
	n := New(&config.WeComConfig{WebhookURL: commoncfg.Secret(srv.URL + "/?key=topsecret")}, nil)
	err := n.Notify(context.Background(), &message.Message{Title: "t"})
	require.ErrorContains(t, err, "93000")
	require.NotContains(t, err.Error(), "topsecret")
}
