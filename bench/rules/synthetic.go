package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// syntheticRules is the number of synthetic rules: 200 minus the 13 of
	// the vllm, targets and gpu packs (as in rules/rules_timing_test.go).
	syntheticRules = 187
	// syntheticTargets is how many targets serve synthetic_requests_total;
	// each rule aggregates by instance, i.e. by target.
	syntheticTargets = 27
	// rulesPerGroup is how many synthetic rules share a group.
	rulesPerGroup = 20
)

// synthetic serves synthetic_requests_total{grp="g<i>",code="<c>"} for
// syntheticRules groups and codes codes on syntheticTargets listeners: one
// counter per (target, group, code), so that each synthetic rule reads
// syntheticTargets × codes series. It owns the goroutines serving the
// listeners; Close stops them.
type synthetic struct {
	codes   int
	start   time.Time
	now     func() time.Time
	lines   []string // series text without the value, one per (group, code)
	servers []*http.Server
	addrs   []string
	wg      sync.WaitGroup
}

// startSynthetic listens on syntheticTargets free loopback ports and serves
// until Close.
func startSynthetic(codes int, now func() time.Time) (*synthetic, error) {
	if codes < 1 {
		return nil, fmt.Errorf("synthetic targets: %d codes per group, want at least 1", codes)
	}
	s := &synthetic{codes: codes, now: now, start: now()}
	for g := range syntheticRules {
		for c := range codes {
			s.lines = append(s.lines, fmt.Sprintf("synthetic_requests_total{grp=\"g%d\",code=\"%d\"} ", g, 200+c))
		}
	}
	for range syntheticTargets {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(fmt.Errorf("synthetic targets: listen: %w", err), s.Close())
		}
		srv := &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
		s.servers = append(s.servers, srv)
		s.addrs = append(s.addrs, ln.Addr().String())
		s.wg.Go(func() { _ = srv.Serve(ln) })
	}
	return s, nil
}

// Targets returns the listeners' host:port.
func (s *synthetic) Targets() []string { return s.addrs }

// Series is how many series all targets expose.
func (s *synthetic) Series() int { return len(s.lines) * syntheticTargets }

// serve writes every counter: counter i grows by 1+i%13 a second, so rates
// differ between series but stay constant.
func (s *synthetic) serve(w http.ResponseWriter, _ *http.Request) {
	elapsed := float64(s.now().Sub(s.start).Milliseconds()) / 1000
	var b strings.Builder
	b.Grow(len(s.lines) * 64)
	b.WriteString("# TYPE synthetic_requests_total counter\n")
	for i, l := range s.lines {
		b.WriteString(l)
		b.WriteString(strconv.FormatFloat(elapsed*float64(1+i%13), 'f', 3, 64))
		b.WriteByte('\n')
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}

// Close stops every listener and waits for the serving goroutines. It is
// safe to call twice.
func (s *synthetic) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("synthetic targets: shut down: %w", err))
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// syntheticRuleFile is the synthetic rules: for each group g a rule on
// sum by (instance) (rate(synthetic_requests_total{grp="g<g>"}[5m])),
// recording for even g, alerting (never firing) for odd g, rulesPerGroup
// to a rule group.
func syntheticRuleFile() []byte {
	var b strings.Builder
	b.WriteString("groups:\n")
	for g := range syntheticRules {
		if g%rulesPerGroup == 0 {
			fmt.Fprintf(&b, "  - name: synthetic-%d\n    rules:\n", g/rulesPerGroup)
		}
		sel := fmt.Sprintf(`synthetic_requests_total{grp="g%d"}`, g)
		if g%2 == 0 {
			fmt.Fprintf(&b, "      - record: grp:synthetic_requests:rate5m_g%d\n        expr: sum by (instance) (rate(%s[5m]))\n", g, sel)
		} else {
			fmt.Fprintf(&b, "      - alert: SyntheticErrors%d\n        expr: sum by (instance) (rate(%s[5m])) > 1e9\n        for: 5m\n        labels: {severity: P2}\n", g, sel)
		}
	}
	return []byte(b.String())
}
