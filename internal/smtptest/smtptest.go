package smtptest

import (
	"bufio"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Sink is an SMTP server (no TLS, no auth) that keeps the mails it is
// given. It stops, and waits for its connections, when the test ends.
type Sink struct {
	ln    net.Listener
	mu    sync.Mutex
	mails []string
}

// NewSink starts a Sink on a free loopback port.
func NewSink(t *testing.T) *Sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &Sink{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.serve(c) }()
		}
	}()
	return s
}

// Addr is the host:port the sink listens on (a smarthost).
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Mails returns the raw messages (headers and body) received so far, in
// order.
func (s *Sink) Mails() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mails)
}

func (s *Sink) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(c)
	w := func(line string) { _, _ = io.WriteString(c, line+"\r\n") }
	w("220 test ESMTP")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch strings.ToUpper(strings.Fields(line + " x")[0]) {
		case "EHLO", "HELO":
			w("250 test")
		case "MAIL", "RCPT", "RSET", "NOOP":
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
			s.mu.Lock()
			s.mails = append(s.mails, b.String())
			s.mu.Unlock()
			w("250 queued")
		case "QUIT":
			w("221 bye")
			return
		default:
			w("502 unknown")
		}
	}
}
