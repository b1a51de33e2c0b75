// Package dingtalk posts to a DingTalk group robot (自定义机器人) as a
// markdown message. With a secret (the robot's 加签 security setting) the
// request is signed as DingTalk documents
// (https://open.dingtalk.com/document/robots/customize-robot-security-settings):
//
//	string_to_sign = timestamp + "\n" + secret    (timestamp in milliseconds)
//	sign = urlencode(base64(HmacSHA256(key=secret, string_to_sign)))
//	POST webhook_url&timestamp=<timestamp>&sign=<sign>
//
// DingTalk answers HTTP 200 with {"errcode":0,"errmsg":"ok"}; any other
// errcode is a rejection.
package dingtalk

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// Notifier posts to one robot.
type Notifier struct {
	conf   *config.DingTalkConfig
	client *http.Client
	now    func() time.Time
}

// New returns a Notifier; client nil uses http.DefaultClient, now nil
// time.Now (the signature's timestamp must be within an hour of
// DingTalk's clock).
func New(c *config.DingTalkConfig, client *http.Client, now func() time.Time) *Notifier {
	if now == nil {
		now = time.Now
	}
	return &Notifier{conf: c, client: client, now: now}
}

// SendResolved implements message.Notifier.
func (n *Notifier) SendResolved() bool { return n.conf.Resolved() }

// Sign returns DingTalk's signature of timestamp (milliseconds), before URL
// encoding.
func Sign(timestampMillis int64, secret string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(timestampMillis, 10) + "\n" + secret))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Markdown is DingTalk's markdown message.
type Markdown struct {
	MsgType  string `json:"msgtype"`
	Markdown struct {
		Title string `json:"title"`
		Text  string `json:"text"`
	} `json:"markdown"`
}

type answer struct {
	ErrCode int    `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

// Notify implements message.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *message.Message) error {
	var req Markdown
	req.MsgType = "markdown"
	req.Markdown.Title = m.Title
	req.Markdown.Text = "### " + m.Title + "\n\n" + m.Text
	body, err := json.Marshal(req)
	if err != nil {
		return deliver.Permanent(err)
	}
	u, err := url.Parse(string(n.conf.WebhookURL))
	if err != nil {
		return deliver.Permanent(fmt.Errorf("invalid dingtalk webhook_url"))
	}
	if n.conf.Secret != "" {
		ts := n.now().UnixMilli()
		q := u.Query()
		q.Set("timestamp", strconv.FormatInt(ts, 10))
		q.Set("sign", Sign(ts, string(n.conf.Secret)))
		u.RawQuery = q.Encode()
	}
	b, err := deliver.Do(ctx, n.client, http.MethodPost, u.String(), deliver.JSON(), body)
	if err != nil {
		return err
	}
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("dingtalk answered with something that is not its JSON: %w", err)
	}
	if a.ErrCode != 0 {
		// 310000 is a bad signature or keyword; no retry fixes it.
		return deliver.Permanent(fmt.Errorf("dingtalk refused the message: errcode %d: %s", a.ErrCode, a.ErrMsg))
	}
	return nil
}
