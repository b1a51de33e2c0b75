package slo

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/aiserve/appliance/clock"
	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/internal/smtptest"
	"github.com/aiserve/appliance/notify"
	"github.com/aiserve/appliance/notify/message"
	"github.com/aiserve/appliance/notify/webhook"
	"github.com/aiserve/appliance/query"
)

// hookSink is a webhook receiver that can be down.
type hookSink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	down bool
	got  []webhook.Payload
}

func newHookSink(t *testing.T) *hookSink {
	h := &hookSink{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var p webhook.Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.got = append(h.got, p)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookSink) setDown(d bool) { h.mu.Lock(); h.down = d; h.mu.Unlock() }

func (h *hookSink) payloads() []webhook.Payload {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]webhook.Payload(nil), h.got...)
}

// TestScheduledReportDelivery: at Monday 09:00 Asia/Shanghai the report of
// the week that ended goes through notify's outbox to an SMTP server
// (HTML and text parts) and to a webhook receiver that is down then; it
// arrives once the receiver is back, once; a restart of the scheduler
// and of notify, and later ticks, send nothing again; the next week goes
// out a week later.
func TestScheduledReportDelivery(t *testing.T) {
	loc := shanghai(t)
	w, _ := ParseWeek("2026-W48")
	end := w.End(loc)
	q := loadTSDB(t, genReportData(w, loc, end.Add(-15*24*time.Hour), end.Add(8*24*time.Hour)))
	smtp := smtptest.NewSink(t)
	hook := newHookSink(t)
	cfg, err := config.Load([]byte(`
slos:
  - name: chat-latency
    kind: latency
    histogram: vllm:e2e_request_latency_seconds
    selector: '{job="vllm"}'
    by: [model_name]
    threshold: 1.5s
    objective: 99%
alerting:
  outbox: {min_backoff: 10s, max_backoff: 1m}
  receivers:
    - name: chat
      webhook_configs: [{url: "`+hook.srv.URL+`/chat"}]
    - name: email-team
      email_configs: [{to: team@example.com, from: appliance@example.com, smarthost: "`+smtp.Addr()+`", require_tls: false}]
web:
  external_url: http://box.lab:9090/
reports:
  weekly: {day: monday, at: "09:00", timezone: Asia/Shanghai, receivers: [chat, email-team]}
`), "appliance.yml")
	require.NoError(t, err)

	dbPath := filepath.Join(t.TempDir(), "state.db")
	clock := clock.NewFake(time.Date(2026, 11, 30, 8, 59, 0, 0, loc))
	engine := query.New(query.Options{}, nil, nil)
	type box struct {
		db    *bolt.DB
		n     *notify.Notifier
		sched *Scheduler
	}
	open := func() *box {
		db, err := bolt.Open(dbPath, 0o600, nil)
		require.NoError(t, err)
		n, err := notify.New(notify.Options{DB: db, Config: cfg.Alerting, Now: clock.Now, ExternalURL: cfg.Web.ExternalURL})
		require.NoError(t, err)
		archive, err := NewArchive(db)
		require.NoError(t, err)
		rp := &Reporter{
			Source: EngineSource{Engine: engine, Queryable: q}, Archive: archive,
			Options:  func() ReportOptions { return OptionsFor(cfg) },
			Schedule: func() *config.WeeklyReportConfig { return cfg.Reports.Weekly },
			Location: func() *time.Location { return Location(cfg, time.UTC) },
		}
		return &box{db: db, n: n, sched: &Scheduler{Reporter: rp, Archive: archive, Outbox: n, Config: func() *config.WeeklyReportConfig { return cfg.Reports.Weekly }, Now: clock.Now}}
	}
	ctx := context.Background()
	b := open()
	tick := func() {
		t.Helper()
		require.NoError(t, b.sched.Tick(ctx))
		require.NoError(t, b.n.Tick(ctx))
	}

	// Before the time: W47's report was due last Monday; mark it as sent
	// by a previous run so that only W48 is in question.
	require.NoError(t, b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketSent).Put([]byte("2026-W47"), []byte("x")) }))
	tick()
	require.Empty(t, smtp.Mails())
	require.Empty(t, hook.payloads())

	// 09:00: the mail goes out; the webhook is down.
	hook.setDown(true)
	clock.Set(time.Date(2026, 11, 30, 9, 0, 0, 0, loc))
	tick()
	mails := smtp.Mails()
	require.Len(t, mails, 1)
	msg, err := mail.ReadMessage(strings.NewReader(mails[0]))
	require.NoError(t, err)
	subj, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	require.NoError(t, err)
	require.Equal(t, "SLO report 2026-W48: 2 of 2 SLOs met", subj)
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
		body, _ := io.ReadAll(p)
		parts[strings.Split(p.Header.Get("Content-Type"), ";")[0]] = string(body)
	}
	require.Contains(t, parts["text/plain"], "| vllm | chat-latency | model_name=llama | 99% | 99.200% | 95.000% |")
	require.Contains(t, parts["text/html"], "99.200%")
	require.NotContains(t, parts["text/html"], "<svg")
	require.Less(t, len(parts["text/html"]), 100<<10)
	require.Empty(t, hook.payloads())

	// The receiver comes back; the outbox retries and it arrives, once.
	hook.setDown(false)
	for i := 0; i < 10; i++ {
		clock.Advance(15 * time.Second)
		tick()
	}
	ps := hook.payloads()
	require.Len(t, ps, 1)
	require.Equal(t, "report:2026-W48", ps[0].GroupKey)
	require.Equal(t, "SLO report 2026-W48: 2 of 2 SLOs met", ps[0].CommonAnnotations["summary"])
	require.Contains(t, ps[0].CommonAnnotations["description"], "Full report: http://box.lab:9090/reports/2026-W48.html")

	// A restart (new notifier and scheduler over the same state) and a
	// day of ticks send nothing again.
	require.NoError(t, b.db.Close())
	b = open()
	// A crash between the hand-off and the sent mark: the outbox takes
	// the same week only once.
	again, err := b.n.EnqueueOnce("report:2026-W48", []string{"chat"}, func(string) *message.Message { return &message.Message{Title: "again"} })
	require.NoError(t, err)
	require.False(t, again)
	for i := 0; i < 24; i++ {
		clock.Advance(time.Hour)
		tick()
	}
	require.Len(t, smtp.Mails(), 1)
	require.Len(t, hook.payloads(), 1)
	list, err := b.sched.Archive.List()
	require.NoError(t, err)
	require.Equal(t, "2026-W48", list[0].Week)
	require.NotNil(t, list[0].Sent)

	// Down over the next Monday 09:00: the report of W49 goes out at
	// the first tick after the restart, at 11:30.
	require.NoError(t, b.db.Close())
	clock.Set(time.Date(2026, 12, 7, 11, 30, 0, 0, loc))
	b = open()
	tick()
	require.Len(t, smtp.Mails(), 2)
	require.Len(t, hook.payloads(), 2)
	require.Equal(t, "report:2026-W49", hook.payloads()[1].GroupKey)

	// "Send now" sends a week again, on demand.
	require.NoError(t, b.sched.SendNow(ctx, "2026-W48"))
	require.NoError(t, b.n.Tick(ctx))
	require.Len(t, smtp.Mails(), 3)
	require.Len(t, hook.payloads(), 3)
	require.NoError(t, b.db.Close())
}

func TestDue(t *testing.T) {
	cfg, err := config.Load([]byte("alerting: {receivers: [{name: chat}]}\nreports:\n  weekly: {day: monday, at: \"09:00\", timezone: Europe/Berlin, receivers: [chat]}\n"), "c.yml")
	require.NoError(t, err)
	s := cfg.Reports.Weekly
	loc := s.Location()
	f := func(now time.Time, want string) {
		t.Helper()
		require.Equal(t, want, Due(now, s).String(), now.String())
	}
	f(time.Date(2026, 3, 30, 8, 59, 0, 0, loc), "2026-W12")
	f(time.Date(2026, 3, 30, 9, 0, 0, 0, loc), "2026-W13") // after the 167-hour week
	f(time.Date(2026, 4, 2, 12, 0, 0, 0, loc), "2026-W13")
	f(time.Date(2027, 1, 4, 9, 0, 0, 0, loc), "2026-W53")
	require.Equal(t, time.Date(2026, 3, 30, 9, 0, 0, 0, loc), ReportTime(Week{2026, 13}, s, loc))
}
