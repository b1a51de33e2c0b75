// Package wecom posts to a WeCom (企业微信) group robot as a markdown
// message (https://developer.work.weixin.qq.com/document/path/91770): POST
// webhook_url (https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=...)
// with {"msgtype":"markdown","markdown":{"content":...}}. WeCom answers
// {"errcode":0,"errmsg":"ok"}; content is limited to 4096 bytes.
package wecom

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// MaxContent is WeCom's limit on markdown content, in bytes.
const MaxContent = 4096

// Notifier posts to one robot.
type Notifier struct {
	conf   *config.WeComConfig
	client *http.Client
}

// New returns a Notifier; client nil uses http.DefaultClient.
func New(c *config.WeComConfig, client *http.Client) *Notifier {
	return &Notifier{conf: c, client: client}
}

// SendResolved implements message.Notifier.
func (n *Notifier) SendResolved() bool { return n.conf.Resolved() }

// Markdown is WeCom's markdown message.
type Markdown struct {
	MsgType  string `json:"msgtype"`
	Markdown struct {
		Content string `json:"content"`
	} `json:"markdown"`
}

// Notify implements message.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *message.Message) error {
	var req Markdown
	req.MsgType = "markdown"
	content := "### " + m.Title + "\n" + m.Text
	if len(content) > MaxContent {
		cut := MaxContent - len("\n…")
		for cut > 0 && content[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		content = content[:cut] + "\n…"
	}
	req.Markdown.Content = content
	b, err := deliver.PostJSON(ctx, n.client, string(n.conf.WebhookURL), req)
	if err != nil {
		return err
	}
	var a struct {
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("wecom answered with something that is not its JSON: %w", err)
	}
	if a.ErrCode != 0 {
		if a.ErrCode == 45009 { // rate limited: 20 messages a minute per robot
			return fmt.Errorf("wecom rate limit: errcode %d: %s", a.ErrCode, a.ErrMsg)
		}
		return deliver.Permanent(fmt.Errorf("wecom refused the message: errcode %d: %s", a.ErrCode, a.ErrMsg))
	}
	return nil
}
