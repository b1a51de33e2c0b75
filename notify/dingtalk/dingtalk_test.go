package dingtalk

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// The request DingTalk documents for a robot with 加签: the signature of
// "timestamp\nsecret" keyed by the secret, base64 then URL-encoded, in the
// query next to access_token.
func TestSignedMarkdown(t *testing.T) {
	const secret = "SEC000000000000000000000000000000000000000000000000000000000000"
	now := time.UnixMilli(1700000000123)
	var got struct {
		path, rawQuery, ctype, body string
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.path, got.rawQuery, got.ctype, got.body = r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(b)
		_, _ = w.Write([]byte(`{"errcode":0,"errmsg":"ok"}`))
	}))
	defer srv.Close()
	n := New(&config.DingTalkConfig{WebhookURL: commoncfg.Secret(srv.URL + "/robot/send?access_token=tok123"), Secret: secret}, nil, func() time.Time { return now })
	m := &message.Message{Title: "[FIRING:1] P1 Slow (vllm)", Text: "p95 is 3s"}
	require.NoError(t, n.Notify(context.Background(), m))

	require.Equal(t, "/robot/send", got.path)
	q, err := url.ParseQuery(got.rawQuery)
	require.NoError(t, err)
	require.Equal(t, "tok123", q.Get("access_token"))
	require.Equal(t, "1700000000123", q.Get("timestamp"))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("1700000000123\n" + secret))
	require.Equal(t, base64.StdEncoding.EncodeToString(mac.Sum(nil)), q.Get("sign"))
	// The sign is URL-encoded in the raw query (base64 has + / =).
	require.Contains(t, got.rawQuery, "sign="+url.QueryEscape(q.Get("sign")))
	require.Equal(t, "application/json", got.ctype)
	require.JSONEq(t, `{"msgtype":"markdown","markdown":{"title":"[FIRING:1] P1 Slow (vllm)","text":"### [FIRING:1] P1 Slow (vllm)\n\np95 is 3s"}}`, got.body)
}

func TestErrcodeIsARejectionWithoutSecrets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"errcode":310000,"errmsg":"sign not match"}`))
	}))
	defer srv.Close()
	n := New(&config.DingTalkConfig{WebhookURL: commoncfg.Secret(srv.URL + "/robot/send?access_token=tok123"), Secret: "s3cr3t"}, nil, nil)
	err := n.Notify(context.Background(), &message.Message{Title: "t"})
	require.Error(t, err)
	require.True(t, deliver.IsPermanent(err))
	require.Contains(t, err.Error(), "310000")
	require.NotContains(t, err.Error(), "tok123")
	require.NotContains(t, err.Error(), "s3cr3t")

	// A robot that cannot be reached: net/http's error names the URL; ours
	// does not.
	n = New(&config.DingTalkConfig{WebhookURL: "http://127.0.0.1:1/robot/send?access_token=tok123"}, nil, nil)
	err = n.Notify(context.Background(), &message.Message{Title: "t"})
	require.Error(t, err)
	require.False(t, deliver.IsPermanent(err))
	require.NotContains(t, err.Error(), "tok123")
}
