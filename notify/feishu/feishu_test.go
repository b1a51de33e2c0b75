package feishu

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// Feishu's documented signature: HmacSHA256 keyed by "timestamp\nsecret"
// over an empty message, base64, in the JSON body with the timestamp in
// seconds as a string.
func TestSignedText(t *testing.T) {
	const secret = "demo-secret"
	now := time.Unix(1599360473, 0)
	var path, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		path, body = r.URL.Path, string(b)
		_, _ = w.Write([]byte(`{"code":0,"msg":"success","data":{}}`))
	}))
	defer srv.Close()
	n := New(&config.FeishuConfig{WebhookURL: commoncfg.Secret(srv.URL + "/open-apis/bot/v2/hook/abc-123"), Secret: secret}, nil, func() time.Time { return now })
	require.NoError(t, n.Notify(context.Background(), &message.Message{Title: "[FIRING:1] P1 Slow", Text: "p95 is 3s"}))
	require.Equal(t, "/open-apis/bot/v2/hook/abc-123", path)
	mac := hmac.New(sha256.New, []byte("1599360473\n"+secret))
	sign := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	require.JSONEq(t, `{"timestamp":"1599360473","sign":"`+sign+`","msg_type":"text","content":{"text":"[FIRING:1] P1 Slow\n\np95 is 3s"}}`, body)
}

func TestCodeIsARejection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"code":19021,"msg":"sign match fail or timestamp is not within one hour from current time"}`))
	}))
	defer srv.Close()
	n := New(&config.FeishuConfig{WebhookURL: commoncfg.Secret(srv.URL + "/open-apis/bot/v2/hook/abc-123"), Secret: "x"}, nil, nil)
	err := n.Notify(context.Background(), &message.Message{Title: "t"})
	require.True(t, deliver.IsPermanent(err))
	require.Contains(t, err.Error(), "19021")
	require.NotContains(t, err.Error(), "abc-123")
}
