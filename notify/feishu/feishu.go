// Package feishu posts to a Feishu (飞书) / Lark custom bot as a text
// message. With a secret (the bot's 签名校验 setting) the body carries a
// signature as Feishu documents
// (https://open.feishu.cn/document/client-docs/bot-v3/add-custom-bot):
//
//	string_to_sign = timestamp + "\n" + secret    (timestamp in seconds)
//	sign = base64(HmacSHA256(key=string_to_sign, message=""))
//	{"timestamp": "<timestamp>", "sign": "<sign>", "msg_type": "text", "content": {"text": ...}}
//
// Feishu answers {"code":0,"msg":"success"}; any other code is a rejection.
package feishu

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// Notifier posts to one bot.
type Notifier struct {
	conf   *config.FeishuConfig
	client *http.Client
	now    func() time.Time
}

// New returns a Notifier; client nil uses http.DefaultClient, now nil
// time.Now (Feishu rejects timestamps more than an hour off).
func New(c *config.FeishuConfig, client *http.Client, now func() time.Time) *Notifier {
	if now == nil {
		now = time.Now
	}
	return &Notifier{conf: c, client: client, now: now}
}

// SendResolved implements message.Notifier.
func (n *Notifier) SendResolved() bool { return n.conf.Resolved() }

// Sign returns Feishu's signature of timestamp (seconds).
func Sign(timestamp int64, secret string) string {
	mac := hmac.New(sha256.New, []byte(strconv.FormatInt(timestamp, 10)+"\n"+secret))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Request is the bot's text message.
type Request struct {
	Timestamp string `json:"timestamp,omitempty"`
	Sign      string `json:"sign,omitempty"`
	MsgType   string `json:"msg_type"`
	Content   struct {
		Text string `json:"text"`
	} `json:"content"`
}

// Notify implements message.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *message.Message) error {
	req := Request{MsgType: "text"}
	req.Content.Text = m.Title + "\n\n" + m.Text
	if n.conf.Secret != "" {
		ts := n.now().Unix()
		req.Timestamp = strconv.FormatInt(ts, 10)
		req.Sign = Sign(ts, string(n.conf.Secret))
	}
	b, err := deliver.PostJSON(ctx, n.client, string(n.conf.WebhookURL), req)
	if err != nil {
		return err
	}
	var a struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("feishu answered with something that is not its JSON: %w", err)
	}
	if a.Code != 0 {
		if a.Code == 11232 { // frequency limited
			return fmt.Errorf("feishu rate limit: code %d: %s", a.Code, a.Msg)
		}
		return deliver.Permanent(fmt.Errorf("feishu refused the message: code %d: %s", a.Code, a.Msg))
	}
	return nil
}
