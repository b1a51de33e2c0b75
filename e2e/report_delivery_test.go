package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/internal/smtptest"
)

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
	smtp := smtptest.NewSink(t)
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
`, hook.srv.URL, smtp.Addr())

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
	require.Empty(t, smtp.Mails(), "no schedule, no report")

	// The schedule; the webhook receiver is down when the report is due.
	day := strings.ToLower(today.Weekday().String())
	writeConfig(t, dir, base+fmt.Sprintf("reports:\n  weekly: {day: %s, at: \"00:00\", timezone: UTC, receivers: [chat, email-team]}\n", day))
	p = start(t, cfg, data)
	eventually(t, 60*time.Second, "the report's mail", func() bool { return len(smtp.Mails()) == 1 })
	eventually(t, 30*time.Second, "the webhook's first attempt (refused)", func() bool { return hook.refusals() >= 1 })
	require.Empty(t, hook.payloads())

	subj, parts := mailParts(t, smtp.Mails()[0])
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
	eventually(t, 60*time.Second, "the report sent on demand", func() bool { return len(hook.payloads()) == 2 && len(smtp.Mails()) == 2 })
	ps = hook.payloads()
	require.Equal(t, "report:"+week, ps[0].GroupKey)
	require.True(t, strings.HasPrefix(ps[1].GroupKey, "report:"+week+":now:"), ps[1].GroupKey)
	require.Equal(t, 1, strings.Count(p.Output(), "weekly report handed to the outbox"), "only the send on demand after the restart")
	code, _ = p.stop()
	require.Equal(t, 0, code)
	require.Len(t, hook.payloads(), 2)
	require.Len(t, smtp.Mails(), 2)
}

// annotationList reads GET /api/v1/appliance/annotations.
type annotationItem struct {
	ID     string            `json:"id"`
	Time   float64           `json:"time"`
	Kind   string            `json:"kind"`
	Text   string            `json:"text"`
	Tags   []string          `json:"tags"`
	Labels map[string]string `json:"labels"`
}

func releases(t *testing.T, p *proc, from, to time.Time) []annotationItem {
	t.Helper()
	code, r := p.get("/api/v1/appliance/annotations", url.Values{
		"from": {fmt.Sprint(from.Unix())}, "to": {fmt.Sprint(to.Unix())}, "tags": {"release"}})
	require.Equal(t, http.StatusOK, code, r.Error)
	var out []annotationItem
	require.NoError(t, json.Unmarshal(r.Data, &out))
	return out
}

// TestReleasesRecordedAndReported: through the running binary, a new
// value of a target's version label is recorded as a release, a deploy
// script posts one (bad bodies get 400 with the reason), both are listed
// by GET from the state file across a restart, none twice, and the
// weekly report lists them with the P95 before and after.
func TestReleasesRecordedAndReported(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := writeConfig(t, dir, sloConfig)
	p := start(t, cfg, data)

	now := time.Now().Truncate(time.Second)
	push := func(lines ...string) {
		t.Helper()
		code, body := p.post("/api/v1/import/prometheus", "text/plain", []byte(strings.Join(lines, "\n")+"\n"), nil)
		require.Equal(t, http.StatusNoContent, code, body)
	}
	version := func(v string) string {
		return fmt.Sprintf(`model_requests_total{job="vllm",instance="a",model="m",version=%q} 1 %d`, v, time.Now().UnixMilli())
	}
	// Two hours of requests: P95 at 1.0 s for the first hour and 1.5 s
	// for the second.
	var hist []string
	var cum [3]float64
	for i := 120; i >= 0; i-- {
		ts := now.Add(-time.Duration(i) * time.Minute).UnixMilli()
		share := [3]float64{95, 100, 100} // ≤1.0, ≤1.5, +Inf per 100 requests
		if i < 60 {
			share = [3]float64{90, 95, 100}
		}
		for j := range cum {
			cum[j] += share[j]
		}
		for j, le := range []string{"1.0", "1.5", "+Inf"} {
			hist = append(hist, fmt.Sprintf(`vllm:e2e_request_latency_seconds_bucket{job="vllm",instance="a",model_name="m",le=%q} %g %d`, le, cum[j], ts))
		}
	}
	push(append(hist, version("1"))...)
	eventually(t, 60*time.Second, "the release detector's baseline of vllm a", func() bool {
		for _, l := range strings.Split(p.Output(), "\n") {
			if strings.Contains(l, `msg="release detection follows a new target"`) && strings.Contains(l, " job=vllm instance=a ") {
				return true
			}
		}
		return false
	})
	push(version("2"))
	eventually(t, 60*time.Second, "the release of version 2", func() bool { return len(releases(t, p, now.Add(-time.Hour), now.Add(time.Hour))) == 1 })
	auto := releases(t, p, now.Add(-time.Hour), now.Add(time.Hour))[0]
	require.Equal(t, "release: vllm a m 2 (was 1)", auto.Text)
	require.Equal(t, "release", auto.Kind)
	require.Equal(t, map[string]string{"job": "vllm", "instance": "a", "model": "m", "version": "2", "previous_version": "1"}, auto.Labels)

	// A deploy script marks the release of an hour ago.
	deployAt := now.Add(-time.Hour)
	code, body := p.post("/api/v1/appliance/annotations", "application/json",
		[]byte(fmt.Sprintf(`{"time": %d, "text": "deploy m v2", "tags": ["release"], "labels": {"model_name": "m"}}`, deployAt.Unix())), nil)
	require.Equal(t, http.StatusOK, code, body)
	code, body = p.post("/api/v1/appliance/annotations", "application/json", []byte(`{"text": "no time"}`), nil)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "time is required")
	code, body = p.post("/api/v1/appliance/annotations", "application/json", []byte(`{"time": 1, "text": "x", "labels": {"a-b": "c"}}`), nil)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, `label name \"a-b\" is not a label name`)

	got := releases(t, p, now.Add(-2*time.Hour), now.Add(time.Hour))
	require.Len(t, got, 2)
	require.Equal(t, "deploy m v2", got[0].Text)
	require.Equal(t, float64(deployAt.Unix()), got[0].Time)

	// The weekly report of the deploy's week lists both, with P95 the
	// day before and after the deploy.
	year, wk := deployAt.UTC().ISOWeek()
	week := fmt.Sprintf("%d-W%02d", year, wk)
	out, err := exec.Command(binary, "report", "--config", cfg, "--week", week, "--timezone", "UTC", "--url", "http://"+p.addr, "--format", "json").CombinedOutput()
	require.NoError(t, err, string(out))
	var rep struct {
		Releases []struct {
			Text    string `json:"text"`
			Latency []struct {
				SLO    string   `json:"slo"`
				Before *float64 `json:"p95_before"`
				After  *float64 `json:"p95_after"`
			} `json:"latency"`
		} `json:"releases"`
	}
	require.NoError(t, json.Unmarshal(out, &rep), string(out))
	require.Len(t, rep.Releases, 2, string(out))
	dep := rep.Releases[0]
	require.Equal(t, "deploy m v2", dep.Text)
	require.Len(t, dep.Latency, 1)
	require.NotNil(t, dep.Latency[0].Before)
	require.NotNil(t, dep.Latency[0].After)
	require.InDelta(t, 1.0, *dep.Latency[0].Before, 0.01, "P95 the hour before")
	require.InDelta(t, 1.5, *dep.Latency[0].After, 0.01, "P95 the hour after")

	// A restart: both are still listed, from the state file; version 3 is
	// the next release, and version 2 was not recorded again before it.
	code, _ = p.stop()
	require.Equal(t, 0, code)
	p = start(t, cfg, data)
	require.Len(t, releases(t, p, now.Add(-2*time.Hour), now.Add(time.Hour)), 2)
	push(version("3"))
	eventually(t, 60*time.Second, "the release of version 3", func() bool {
		return len(releases(t, p, now.Add(-2*time.Hour), time.Now().Add(time.Hour))) >= 3
	})
	got = releases(t, p, now.Add(-2*time.Hour), time.Now().Add(time.Hour))
	require.Len(t, got, 3)
	require.Equal(t, "release: vllm a m 3 (was 1, 2)", got[2].Text, "pushed series of version 1 are still within the lookback")
}
