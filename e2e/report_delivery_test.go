package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// smtpSink is a minimal SMTP server (no TLS, no auth) that keeps the
// mails it is given.
type smtpSink struct {
	ln    net.Listener
	mu    sync.Mutex
	mails []string
}

func newSMTPSink(t *testing.T) *smtpSink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &smtpSink{ln: ln}
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

func (s *smtpSink) serve(c net.Conn) {
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

func (s *smtpSink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mails)
}

// reportHook is a webhook receiver that answers 503 while down and counts
// the attempts it refused.
type reportHook struct {
	srv     *httptest.Server
	mu      sync.Mutex
	down    bool
	refused int
	got     []reportPayload
}

type reportPayload struct {
	GroupKey          string            `json:"groupKey"`
	Receiver          string            `json:"receiver"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
}

func newReportHook(t *testing.T) *reportHook {
	t.Helper()
	h := &reportHook{down: true}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.down {
			h.refused++
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		var p reportPayload
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("webhook body: %v: %s", err, b)
		}
		h.got = append(h.got, p)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *reportHook) setDown(d bool) { h.mu.Lock(); h.down = d; h.mu.Unlock() }

func (h *reportHook) refusals() int { h.mu.Lock(); defer h.mu.Unlock(); return h.refused }

func (h *reportHook) payloads() []reportPayload {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

// mailParts reads a multipart/alternative mail: its subject and its parts
// by content type.
func mailParts(t *testing.T, raw string) (string, map[string]string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(raw))
	require.NoError(t, err)
	subj, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	require.NoError(t, err)
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/alternative", mt)
	parts := map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(p)
		require.NoError(t, err)
		parts[strings.Split(p.Header.Get("Content-Type"), ";")[0]] = string(body)
	}
	return subj, parts
}

// TestScheduledReportDeliveredEndToEnd: the running binary sends the
// weekly report at its scheduled time through notify's outbox, to an
// SMTP server (a multipart/alternative mail with the HTML and the
// Markdown text part) and to a webhook receiver that answers 503 at that
// time: it arrives once the receiver answers 200, once; a restart sends
// it again to no one.
//
// The schedule is the real one: day is today's weekday (UTC) at 00:00,
// so last week's report fell due at midnight, before the appliance
// started; the scheduler catches up with the latest week due and not
// sent, at its first tick (slo.Scheduler).
func TestScheduledReportDeliveredEndToEnd(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	smtp := newSMTPSink(t)
	hook := newReportHook(t)

	now := time.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	monday := today.AddDate(0, 0, -((int(today.Weekday()) + 6) % 7))
	lastWeekEnd := monday
	year, wk := lastWeekEnd.Add(-time.Hour).ISOWeek()
	week := fmt.Sprintf("%d-W%02d", year, wk)

	base := fmt.Sprintf(`scrape_configs: []
storage: {retention: {raw: 15d}}
slos:
  - name: chat-latency
    kind: latency
    histogram: vllm:e2e_request_latency_seconds
    selector: '{job="vllm"}'
    by: [model_name]
    threshold: 1.5s
    objective: 99%%
    window: 7d
alerting:
  outbox: {min_backoff: 1s, max_backoff: 2s}
  receivers:
    - name: chat
      webhook_configs: [{url: "%s/report"}]
    - name: email-team
      email_configs: [{to: team@example.com, from: appliance@example.com, smarthost: "%s", require_tls: false}]
web: {external_url: "http://box.lab:9090/"}
`, hook.srv.URL, smtp.ln.Addr().String())

	// Last week's traffic, pushed into a first run without a schedule: the
	// final two hours of the week, 1% of requests slower than 1.5 s.
	cfg := writeConfig(t, dir, base)
	p := start(t, cfg, data)
	var b strings.Builder
	b.WriteString("# TYPE vllm:e2e_request_latency_seconds histogram\n")
	for i := 0; i <= 120; i++ {
		ts := lastWeekEnd.Add(-time.Duration(121-i) * time.Minute).UnixMilli()
		n := float64(i) * 100
		for _, bk := range []struct {
			le    string
			share float64
		}{{"1.0", 0.9}, {"1.5", 0.99}, {"+Inf", 1}} {
			fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_bucket{job=\"vllm\",instance=\"a\",model_name=\"m\",le=%q} %g %d\n", bk.le, n*bk.share, ts)
		}
		fmt.Fprintf(&b, "vllm:e2e_request_latency_seconds_count{job=\"vllm\",instance=\"a\",model_name=\"m\"} %g %d\n", n, ts)
	}
	code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(b.String()), nil)
	require.Equal(t, http.StatusNoContent, code, body)
	code, _ = p.stop()
	require.Equal(t, 0, code)
	require.Empty(t, smtp.got(), "no schedule, no report")

	// The schedule; the webhook receiver is down when the report is due.
	day := strings.ToLower(today.Weekday().String())
	writeConfig(t, dir, base+fmt.Sprintf("reports:\n  weekly: {day: %s, at: \"00:00\", timezone: UTC, receivers: [chat, email-team]}\n", day))
	p = start(t, cfg, data)
	eventually(t, 60*time.Second, "the report's mail", func() bool { return len(smtp.got()) == 1 })
	eventually(t, 30*time.Second, "the webhook's first attempt (refused)", func() bool { return hook.refusals() >= 1 })
	require.Empty(t, hook.payloads())

	subj, parts := mailParts(t, smtp.got()[0])
	require.Equal(t, "SLO report "+week+": 1 of 1 SLOs met", subj)
	require.Contains(t, parts, "text/plain")
	require.Contains(t, parts, "text/html")
	require.Contains(t, parts["text/plain"], "# SLO report "+week)
	require.Contains(t, parts["text/plain"], "| vllm | chat-latency | model_name=m | 99% | 99.000% |")
	require.Contains(t, parts["text/html"], "<table")
	require.Contains(t, parts["text/html"], "99.000%")
	require.NotContains(t, parts["text/html"], "<svg", "mail clients drop inline SVG")
	require.Less(t, len(parts["text/html"]), 100<<10)

	// The receiver is back: the outbox's retry delivers the report, once.
	hook.setDown(false)
	eventually(t, 30*time.Second, "the report at the webhook receiver", func() bool { return len(hook.payloads()) == 1 })
	ps := hook.payloads()
	require.Equal(t, "report:"+week, ps[0].GroupKey)
	require.Equal(t, "chat", ps[0].Receiver)
	require.Equal(t, "SLO report "+week+": 1 of 1 SLOs met", ps[0].CommonAnnotations["summary"])
	require.Contains(t, ps[0].CommonAnnotations["description"], "http://box.lab:9090/reports/"+week+".html")

	code, r := p.get("/api/v1/appliance/reports", nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(r.Data), `"week":"`+week+`"`)
	code, _ = p.stop()
	require.Equal(t, 0, code)

	// A restart: the scheduler's first tick finds the week sent. "Send
	// now" after it is the barrier: what the outbox delivers after it
	// was enqueued after the tick.
	p = start(t, cfg, data)
	code, body = p.post("/api/v1/appliance/reports/"+week+"/send", "application/json", nil, nil)
	require.Equal(t, http.StatusAccepted, code, body)
	eventually(t, 60*time.Second, "the report sent on demand", func() bool { return len(hook.payloads()) == 2 && len(smtp.got()) == 2 })
	ps = hook.payloads()
	require.Equal(t, "report:"+week, ps[0].GroupKey)
	require.True(t, strings.HasPrefix(ps[1].GroupKey, "report:"+week+":now:"), ps[1].GroupKey)
	require.Equal(t, 1, strings.Count(p.Output(), "weekly report handed to the outbox"), "only the send on demand after the restart")
	code, _ = p.stop()
	require.Equal(t, 0, code)
	require.Len(t, hook.payloads(), 2)
	require.Len(t, smtp.got(), 2)
}
