package httpgateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	commoncfg "github.com/prometheus/common/config"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/message"
)

// The Twilio-shaped example of the package doc, against a stand-in.
func TestTwilioShapedSMS(t *testing.T) {
	var r0 *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r0, body = r, string(b)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	n, err := New(&config.HTTPGatewayConfig{
		URL:    commoncfg.Secret(srv.URL + "/2010-04-01/Accounts/ACXXXX/Messages.json"),
		Method: "POST",
		Headers: map[string]commoncfg.Secret{
			"Authorization": "Basic QUNYWFhYOnRva2Vu",
			"Content-Type":  "application/x-www-form-urlencoded",
		},
		Body: `To={{ urlquery "+15550100" }}&From={{ urlquery "+15550199" }}&Body={{ .Title | truncate 160 | urlquery }}`,
	}, nil)
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), &message.Message{Title: "[FIRING:1] P0 Down (vllm) & more"}))
	require.Equal(t, http.MethodPost, r0.Method)
	require.Equal(t, "/2010-04-01/Accounts/ACXXXX/Messages.json", r0.URL.Path)
	require.Equal(t, "Basic QUNYWFhYOnRva2Vu", r0.Header.Get("Authorization"))
	form, err := url.ParseQuery(body)
	require.NoError(t, err)
	require.Equal(t, url.Values{"To": {"+15550100"}, "From": {"+15550199"}, "Body": {"[FIRING:1] P0 Down (vllm) & more"}}, form)
}

func TestJSONVoiceGateway(t *testing.T) {
	var body, key string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body, key = string(b), r.Header.Get("X-Api-Key")
	}))
	defer srv.Close()
	n, err := New(&config.HTTPGatewayConfig{
		URL: commoncfg.Secret(srv.URL + "/v1/call"), Method: "POST",
		Headers: map[string]commoncfg.Secret{"Content-Type": "application/json", "X-Api-Key": "k"},
		Body:    `{"to": "+15550100", "tts": {{ .Title | json }}}`,
	}, nil)
	require.NoError(t, err)
	require.NoError(t, n.Notify(context.Background(), &message.Message{Title: `P0 "Down" on vllm`}))
	require.Equal(t, "k", key)
	require.JSONEq(t, `{"to":"+15550100","tts":"P0 \"Down\" on vllm"}`, body)
}
