// Package email sends a notification as a mail with a plain text and an
// HTML part, with Alertmanager's email_configs keys: smarthost, from, to
// (comma separated), hello, auth_username/auth_password (PLAIN),
// auth_secret (CRAM-MD5), require_tls (STARTTLS, default true) and
// tls_config. Port 465 speaks TLS from the first byte (SMTPS).
package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// Notifier sends to one email_configs entry.
type Notifier struct {
	conf *config.EmailConfig
	now  func() time.Time
}

// New returns a Notifier; now nil uses time.Now (for the Date header).
func New(c *config.EmailConfig, now func() time.Time) *Notifier {
	if now == nil {
		now = time.Now
	}
	return &Notifier{conf: c, now: now}
}

// SendResolved implements message.Notifier.
func (n *Notifier) SendResolved() bool { return n.conf.Resolved() }

// Notify implements message.Notifier.
func (n *Notifier) Notify(ctx context.Context, m *message.Message) error {
	host, port, err := net.SplitHostPort(n.conf.Smarthost)
	if err != nil {
		return deliver.Permanent(fmt.Errorf("invalid smarthost %q: %w", n.conf.Smarthost, err))
	}
	tlsCfg, err := commoncfg.NewTLSConfig(&n.conf.TLSConfig)
	if err != nil {
		return deliver.Permanent(fmt.Errorf("email tls_config: %w", err))
	}
	if tlsCfg.ServerName == "" {
		tlsCfg.ServerName = host
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deliver.Timeout)
		defer cancel()
	}
	var d net.Dialer
	var conn net.Conn
	if port == "465" {
		conn, err = (&tls.Dialer{NetDialer: &d, Config: tlsCfg}).DialContext(ctx, "tcp", n.conf.Smarthost)
	} else {
		conn, err = d.DialContext(ctx, "tcp", n.conf.Smarthost)
	}
	if err != nil {
		return fmt.Errorf("connect to smarthost %s: %w", n.conf.Smarthost, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp greeting from %s: %w", n.conf.Smarthost, err)
	}
	defer c.Close()
	if n.conf.Hello != "" {
		if err := c.Hello(n.conf.Hello); err != nil {
			return fmt.Errorf("smtp hello: %w", err)
		}
	}
	if port != "465" {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsCfg); err != nil {
				return fmt.Errorf("smtp starttls: %w", err)
			}
		} else if n.conf.TLSRequired() {
			return deliver.Permanent(fmt.Errorf("smarthost %s does not offer STARTTLS and require_tls is true (set require_tls: false for a trusted local relay)", n.conf.Smarthost))
		}
	}
	if err := n.auth(c, host); err != nil {
		return err
	}
	from, err := mail.ParseAddress(n.conf.From)
	if err != nil {
		return deliver.Permanent(fmt.Errorf("invalid from address %q: %w", n.conf.From, err))
	}
	to, err := mail.ParseAddressList(n.conf.To)
	if err != nil {
		return deliver.Permanent(fmt.Errorf("invalid to address %q: %w", n.conf.To, err))
	}
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	for _, a := range to {
		if err := c.Rcpt(a.Address); err != nil {
			return fmt.Errorf("smtp RCPT TO %s: %w", a.Address, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	body, err := Compose(n.conf, m, n.now())
	if err != nil {
		return deliver.Permanent(err)
	}
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("smtp write message: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp end of message: %w", err)
	}
	return c.Quit()
}

func (n *Notifier) auth(c *smtp.Client, host string) error {
	if n.conf.AuthUsername == "" && n.conf.AuthSecret == "" {
		return nil
	}
	ok, mechs := c.Extension("AUTH")
	if !ok {
		return deliver.Permanent(errors.New("auth_username is set but the smarthost offers no AUTH"))
	}
	var a smtp.Auth
	switch {
	case strings.Contains(mechs, "CRAM-MD5") && n.conf.AuthSecret != "":
		a = smtp.CRAMMD5Auth(n.conf.AuthUsername, string(n.conf.AuthSecret))
	case strings.Contains(mechs, "PLAIN") && n.conf.AuthPassword != "":
		a = smtp.PlainAuth(n.conf.AuthIdentity, n.conf.AuthUsername, string(n.conf.AuthPassword), host)
	default:
		return deliver.Permanent(fmt.Errorf("no supported auth mechanism in %q", mechs))
	}
	if err := c.Auth(a); err != nil {
		// The server's answer does not echo the password.
		return deliver.Permanent(fmt.Errorf("smtp auth as %q: %w", n.conf.AuthUsername, err))
	}
	return nil
}

// Compose builds the mail: headers, then a multipart/alternative body with
// the text and the HTML rendering of m.
func Compose(c *config.EmailConfig, m *message.Message, now time.Time) ([]byte, error) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	hdr := map[string]string{
		"From":         c.From,
		"To":           c.To,
		"Subject":      mime.QEncoding.Encode("utf-8", m.Title),
		"Date":         now.Format(time.RFC1123Z),
		"Message-Id":   fmt.Sprintf("<%s@appliance>", strings.ReplaceAll(m.DedupKey, "/", "-")),
		"MIME-Version": "1.0",
		"Content-Type": "multipart/alternative; boundary=" + mw.Boundary(),
	}
	for k, v := range c.Headers {
		hdr[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	var head bytes.Buffer
	for _, k := range []string{"From", "To", "Subject", "Date", "Message-Id", "MIME-Version", "Content-Type"} {
		fmt.Fprintf(&head, "%s: %s\r\n", k, hdr[k])
		delete(hdr, k)
	}
	for k, v := range hdr {
		fmt.Fprintf(&head, "%s: %s\r\n", k, mime.QEncoding.Encode("utf-8", v))
	}
	head.WriteString("\r\n")
	for _, part := range []struct{ ctype, body string }{{"text/plain; charset=UTF-8", m.Text}, {"text/html; charset=UTF-8", m.HTML}} {
		if part.body == "" {
			continue
		}
		w, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {part.ctype}, "Content-Transfer-Encoding": {"quoted-printable"}})
		if err != nil {
			return nil, err
		}
		qw := quotedprintable.NewWriter(w)
		if _, err := qw.Write([]byte(part.body)); err != nil {
			return nil, err
		}
		if err := qw.Close(); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	return append(head.Bytes(), b.Bytes()...), nil
}
