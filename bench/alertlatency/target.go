package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// flipTarget serves flip_value{n="1"} … {n="N"}, each 0 until flipped, and
// remembers when a scrape first got 1 for each.
type flipTarget struct {
	srv *http.Server
	ln  net.Listener

	mu      sync.Mutex
	flipped []bool      // index n-1
	seenAt  []time.Time // arrival of the first scrape answered with 1
	scrapes int
}

func newFlipTarget(n int) (*flipTarget, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the target: %w", err)
	}
	t := &flipTarget{ln: ln, flipped: make([]bool, n), seenAt: make([]time.Time, n)}
	t.srv = &http.Server{Handler: http.HandlerFunc(t.serve), ReadHeaderTimeout: 10 * time.Second}
	return t, nil
}

func (t *flipTarget) addr() string { return t.ln.Addr().String() }

func (t *flipTarget) serve(w http.ResponseWriter, _ *http.Request) {
	arrived := time.Now()
	var b strings.Builder
	b.WriteString("# TYPE flip_value gauge\n")
	t.mu.Lock()
	t.scrapes++
	for i, f := range t.flipped {
		v := 0
		if f {
			v = 1
			if t.seenAt[i].IsZero() {
				t.seenAt[i] = arrived
			}
		}
		fmt.Fprintf(&b, "flip_value{n=\"%d\"} %d\n", i+1, v)
	}
	t.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = io.WriteString(w, b.String())
}

func (t *flipTarget) flip(n int) {
	t.mu.Lock()
	t.flipped[n-1] = true
	t.mu.Unlock()
}

func (t *flipTarget) seen(n int) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seenAt[n-1]
}

// webhook receives Alertmanager's webhook payloads (the appliance sends the
// same shape) and signals the first firing alert of each n.
type webhook struct {
	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	received map[string]time.Time // n → receipt of its first firing alert
	arrived  chan string          // n, once per n
}

func newWebhook() (*webhook, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the webhook: %w", err)
	}
	h := &webhook{ln: ln, received: map[string]time.Time{}, arrived: make(chan string, 1024)}
	h.srv = &http.Server{Handler: http.HandlerFunc(h.serve), ReadHeaderTimeout: 10 * time.Second}
	return h, nil
}

func (h *webhook) url() string { return "http://" + h.ln.Addr().String() + "/hook" }

func (h *webhook) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	var p struct {
		Alerts []struct {
			Status string            `json:"status"`
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	for _, a := range p.Alerts {
		n := a.Labels["n"]
		if a.Status != "firing" || a.Labels["alertname"] != "Flipped" || n == "" {
			continue
		}
		if _, ok := h.received[n]; !ok {
			h.received[n] = at
			select {
			case h.arrived <- n:
			default:
			}
		}
	}
	h.mu.Unlock()
}

func (h *webhook) receivedAt(n string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.received[n]
	return t, ok
}

// serveBoth runs the target's and the webhook's servers until stop is
// called; stop waits for both to return.
func serveBoth(t *flipTarget, h *webhook) (stop func()) {
	var wg sync.WaitGroup
	for _, s := range []struct {
		srv *http.Server
		ln  net.Listener
	}{{t.srv, t.ln}, {h.srv, h.ln}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.srv.Serve(s.ln)
		}()
	}
	return func() {
		_ = t.srv.Close()
		_ = h.srv.Close()
		wg.Wait()
	}
}
