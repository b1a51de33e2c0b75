package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aiserve/appliance/config"
)

// maxHTTPBody bounds what an http probe reads of a body to match
// expect_body; the rest is discarded unread (blackbox_exporter reads all,
// with body_size_limit; a health endpoint has no business being larger).
const maxHTTPBody = 1 << 20

type httpProber struct {
	cfg    *config.ProbeConfig
	client *http.Client
	expect *regexp.Regexp
}

func newHTTPProber(cfg *config.ProbeConfig, client *http.Client) (*httpProber, error) {
	p := &httpProber{cfg: cfg, client: client}
	if cfg.ExpectBody != "" {
		re, err := regexp.Compile(cfg.ExpectBody)
		if err != nil {
			return nil, fmt.Errorf("probe %s: expect_body: %w", cfg.Name, err)
		}
		p.expect = re
	}
	return p, nil
}

// Probe sends one request and times its phases the way blackbox_exporter
// does: resolve (DNS), connect (TCP), tls (handshake), processing (request
// written to first response byte) and transfer (first byte to the end of
// the body).
func (p *httpProber) Probe(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.cfg.Timeout))
	defer cancel()

	var tm struct {
		dnsStart, dnsDone, connStart, connDone, tlsStart, tlsDone, wrote, firstByte time.Time
	}
	trace := &httptrace.ClientTrace{
		DNSStart:             func(httptrace.DNSStartInfo) { tm.dnsStart = time.Now() },
		DNSDone:              func(httptrace.DNSDoneInfo) { tm.dnsDone = time.Now() },
		ConnectStart:         func(string, string) { tm.connStart = time.Now() },
		ConnectDone:          func(string, string, error) { tm.connDone = time.Now() },
		TLSHandshakeStart:    func() { tm.tlsStart = time.Now() },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { tm.tlsDone = time.Now() },
		WroteRequest:         func(httptrace.WroteRequestInfo) { tm.wrote = time.Now() },
		GotFirstResponseByte: func() { tm.firstByte = time.Now() },
	}
	var body io.Reader
	if p.cfg.Body != "" {
		body = strings.NewReader(p.cfg.Body)
	}
	req, err := newRequest(httptrace.WithClientTrace(ctx, trace), p.cfg, p.cfg.Method, body)
	if err != nil {
		return fail(Result{}, ReasonConnection, fmt.Errorf("build request: %w", err))
	}

	start := time.Now()
	var r Result
	phases := func(end time.Time) map[string]time.Duration {
		span := func(a, b time.Time) time.Duration {
			if a.IsZero() || b.IsZero() || b.Before(a) {
				return 0
			}
			return b.Sub(a)
		}
		return map[string]time.Duration{
			"resolve":    span(tm.dnsStart, tm.dnsDone),
			"connect":    span(tm.connStart, tm.connDone),
			"tls":        span(tm.tlsStart, tm.tlsDone),
			"processing": span(tm.wrote, tm.firstByte),
			"transfer":   span(tm.firstByte, end),
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		r.Duration = time.Since(start)
		r.Phases = phases(time.Now())
		return fail(r, classify(ctx, err), fmt.Errorf("%s %s: %w", p.cfg.Method, redactURL(p.cfg.URL), err))
	}
	defer resp.Body.Close()
	r.StatusCode = resp.StatusCode
	if resp.TLS != nil {
		for _, c := range resp.TLS.PeerCertificates {
			if r.CertExpiry.IsZero() || c.NotAfter.Before(r.CertExpiry) {
				r.CertExpiry = c.NotAfter
			}
		}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody))
	end := time.Now()
	r.Duration = end.Sub(start)
	r.Phases = phases(end)
	if err != nil {
		return fail(r, classify(ctx, err), fmt.Errorf("read body of %s: %w", redactURL(p.cfg.URL), err))
	}
	if !p.statusOK(resp.StatusCode) {
		want := "2xx"
		if len(p.cfg.ExpectStatus) > 0 {
			want = fmt.Sprint(p.cfg.ExpectStatus)
		}
		return fail(r, ReasonHTTPStatus, fmt.Errorf("%s answered %d, want %s", redactURL(p.cfg.URL), resp.StatusCode, want))
	}
	if p.expect != nil && !p.expect.Match(b) {
		return fail(r, ReasonBody, fmt.Errorf("body of %s does not match expect_body %q", redactURL(p.cfg.URL), p.cfg.ExpectBody))
	}
	r.Success = true
	return r
}

func (p *httpProber) statusOK(code int) bool {
	if len(p.cfg.ExpectStatus) == 0 {
		return code >= 200 && code < 300
	}
	return slices.Contains(p.cfg.ExpectStatus, code)
}
