// Package httpgateway sends sms_configs and voice_configs: one templated
// HTTP request to whatever SMS or voice-call gateway a site uses. The URL,
// each header value and the body are Go text/template over the Message
// (.Title, .Text, .Status, .Alerts, .CommonLabels, ...) with the functions
// of message.Funcs plus urlquery and json (a JSON string literal).
//
// A worked example for a Twilio-shaped API (form-encoded POST with basic
// auth), sending the title as the SMS text:
//
//	sms_configs:
//	  - url: https://api.twilio.com/2010-04-01/Accounts/ACXXXX/Messages.json
//	    method: POST
//	    headers:
//	      Authorization: Basic QUNYWFhYOnRva2Vu   # base64("ACXXXX:token")
//	      Content-Type: application/x-www-form-urlencoded
//	    body: 'To={{ urlquery "+15550100" }}&From={{ urlquery "+15550199" }}&Body={{ .Title | truncate 160 | urlquery }}'
//
// and for a JSON gateway:
//
//	voice_configs:
//	  - url: https://gateway.example.com/v1/call
//	    headers: {Content-Type: application/json, X-Api-Key: secret}
//	    body: '{"to": "+15550100", "tts": {{ .Title | json }}}'
package httpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"text/template"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// Notifier sends one templated request.
type Notifier struct {
	conf   *config.HTTPGatewayConfig
	client *http.Client
	url    *template.Template
	body   *template.Template
	hdrs   map[string]*template.Template
}

var funcs = func() template.FuncMap {
	f := maps.Clone(message.Funcs)
	f["urlquery"] = url.QueryEscape
	f["json"] = func(s string) (string, error) {
		b, err := json.Marshal(s)
		return string(b), err
	}
	return f
}()

// New parses the templates of c; client nil uses http.DefaultClient.
func New(c *config.HTTPGatewayConfig, client *http.Client) (*Notifier, error) {
	n := &Notifier{conf: c, client: client, hdrs: map[string]*template.Template{}}
	var err error
	// Template errors quote the template, which may hold a token: name
	// the key only.
	if n.url, err = template.New("url").Funcs(funcs).Parse(string(c.URL)); err != nil {
		return nil, fmt.Errorf("url is not a valid template")
	}
	if n.body, err = template.New("body").Funcs(funcs).Parse(c.Body); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	for k, v := range c.Headers {
		if n.hdrs[k], err = template.New(k).Funcs(funcs).Parse(string(v)); err != nil {
			return nil, fmt.Errorf("header %s is not a valid template", k)
		}
	}
	return n, nil
}

// SendResolved implements message.Notifier.
func (n *Notifier) SendResolved() bool { return n.conf.Resolved() }

func exec(t *template.Template, m *message.Message) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, m); err != nil {
		return "", deliver.Permanent(fmt.Errorf("template %s: cannot execute", t.Name()))
	}
	return b.String(), nil
}

// Request renders the request for m: URL, headers and body.
func (n *Notifier) Request(m *message.Message) (string, http.Header, []byte, error) {
	u, err := exec(n.url, m)
	if err != nil {
		return "", nil, nil, err
	}
	h := http.Header{}
	for k, t := range n.hdrs {
		v, err := exec(t, m)
		if err != nil {
			return "", nil, nil, err
		}
		h.Set(k, v)
	}
	body := ""
	if n.conf.Body != "" {
		if body, err = exec(n.body, m); err != nil {
			return "", nil, nil, err
		}
	} else if n.conf.Method != http.MethodGet {
		body = m.Title
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "text/plain; charset=utf-8")
		}
	}
	return u, h, []byte(body), nil
}

// Notify implements message.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *message.Message) error {
	u, h, body, err := n.Request(m)
	if err != nil {
		return err
	}
	_, err = deliver.Do(ctx, n.client, n.conf.Method, u, h, body)
	return err
}
