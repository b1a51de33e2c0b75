package email

import (
	"bufio"
	"context"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/notify/deliver"
	"github.com/aiserve/appliance/notify/message"
)

// smtpServer is a minimal SMTP server (RFC 5321 without TLS) that keeps
// what it received.
type smtpServer struct {
	ln       net.Listener
	startTLS bool // advertise STARTTLS (it cannot do it)

	mu   sync.Mutex
	auth string
	from string
	to   []string
	data string
}

func newSMTPServer(t *testing.T) *smtpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &smtpServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *smtpServer) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	w := func(line string) { _, _ = io.WriteString(c, line+"\r\n") }
	w("220 test ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		cmd := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		s.mu.Lock()
		switch cmd {
		case "EHLO", "HELO":
			w("250-test")
			if s.startTLS {
				w("250-STARTTLS")
			}
			w("250 AUTH PLAIN")
		case "AUTH":
			parts := strings.Fields(line)
			b, _ := base64.StdEncoding.DecodeString(parts[2])
			s.auth = string(b)
			w("235 ok")
		case "MAIL":
			s.from = line
			w("250 ok")
		case "RCPT":
			s.to = append(s.to, line)
			w("250 ok")
		case "DATA":
			w("354 go on")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil || l == ".\r\n" {
					break
				}
				b.WriteString(strings.TrimPrefix(l, "."))
			}
			s.data = b.String()
			w("250 queued")
		case "QUIT":
			w("221 bye")
			s.mu.Unlock()
			return
		default:
			w("502 unknown")
		}
		s.mu.Unlock()
	}
}

func TestMailArrives(t *testing.T) {
	s := newSMTPServer(t)
	noTLS := false
	c := &config.EmailConfig{
		To: "oncall@example.com, lead@example.com", From: "appliance@example.com", Smarthost: s.ln.Addr().String(),
		AuthUsername: "appliance", AuthPassword: "pw", RequireTLS: &noTLS, Headers: map[string]string{"X-Team": "ml"},
	}
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	m := &message.Message{
		Kind: message.KindAlerts, Status: "firing", DedupKey: "k1", At: now,
		CommonLabels: map[string]string{"alertname": "Slow", "severity": "P1"},
		Alerts:       []message.Alert{{Status: "firing", Labels: map[string]string{"alertname": "Slow", "severity": "P1", "instance": "gpu1"}, Annotations: map[string]string{"summary": "p95 latency 3.2s"}, StartsAt: now.Add(-5 * time.Minute)}},
	}
	require.NoError(t, message.Render(m))
	require.NoError(t, New(c, func() time.Time { return now }).Notify(context.Background(), m))

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, "\x00appliance\x00pw", s.auth)
	require.Equal(t, "MAIL FROM:<appliance@example.com>", strings.Fields(s.from)[0]+" "+strings.Fields(s.from)[1])
	require.Equal(t, []string{"RCPT TO:<oncall@example.com>", "RCPT TO:<lead@example.com>"}, s.to)

	msg, err := mail.ReadMessage(strings.NewReader(s.data))
	require.NoError(t, err)
	subj, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	require.NoError(t, err)
	require.Equal(t, "[FIRING:1] P1 Slow", subj)
	require.Equal(t, "ml", msg.Header.Get("X-Team"))
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/alternative", mt)
	mr := multipart.NewReader(msg.Body, params["boundary"])
	parts := map[string]string{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		b, _ := io.ReadAll(p) // multipart decodes quoted-printable
		parts[strings.Split(p.Header.Get("Content-Type"), ";")[0]] = string(b)
	}
	require.Contains(t, parts["text/plain"], "p95 latency 3.2s")
	require.Contains(t, parts["text/plain"], "instance: gpu1")
	require.Contains(t, parts["text/html"], "<h3>p95 latency 3.2s (firing)</h3>")
}

func TestRequireTLSRefusesPlainRelay(t *testing.T) {
	s := newSMTPServer(t)
	c := &config.EmailConfig{To: "a@example.com", From: "b@example.com", Smarthost: s.ln.Addr().String(), AuthPassword: "pw"}
	err := New(c, nil).Notify(context.Background(), &message.Message{Title: "t"})
	require.Error(t, err)
	require.True(t, deliver.IsPermanent(err))
	require.Contains(t, err.Error(), "STARTTLS")
	require.NotContains(t, err.Error(), "pw")
}
