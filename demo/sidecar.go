package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SidecarOptions configure a Sidecar.
type SidecarOptions struct {
	// Addr is the listen address, e.g. "127.0.0.1:0" for a free port.
	Addr string
	// Fleet is read for the GPU readings: the GPU works harder and runs
	// hotter as its instances are made slow (an overloaded GPU).
	Fleet *Fleet
	// Logger receives what the receiver would send.
	Logger *slog.Logger
	// Now is the clock of the readings' drift (default time.Now).
	Now func() time.Time
}

// Sidecar is the rest of the demo box next to the fleet, on one port:
//
//   - GET /metrics: one simulated NVIDIA H100 in DCGM exporter's names and
//     labels (as the fixture dcgm-exporter.prom), so that the hardware
//     page and the gpu rule pack have a GPU on any machine;
//   - POST /demo/receiver: an Alertmanager webhook that logs each alert it
//     would send (status, name, severity, summary) instead of sending it.
type Sidecar struct {
	opts     SidecarOptions
	ln       net.Listener
	received atomic.Int64
	mu       sync.Mutex
	// notified is closed and replaced on every message, for tests.
	notified chan struct{}
	started  atomic.Bool
}

// NewSidecar binds the listener; it starts nothing.
func NewSidecar(opts SidecarOptions) (*Sidecar, error) {
	if opts.Fleet == nil {
		return nil, errors.New("demo sidecar: no fleet")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("demo sidecar: listen on %s: %w", opts.Addr, err)
	}
	return &Sidecar{opts: opts, ln: ln, notified: make(chan struct{})}, nil
}

// Addr is the bound host:port.
func (s *Sidecar) Addr() string { return s.ln.Addr().String() }

// ReceiverURL is the webhook URL of the logging receiver.
func (s *Sidecar) ReceiverURL() string { return "http://" + s.Addr() + "/demo/receiver" }

// Received is the number of alerts the receiver logged.
func (s *Sidecar) Received() int64 { return s.received.Load() }

// Notified returns a channel closed at the next message the receiver logs.
func (s *Sidecar) Notified() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notified
}

// Run serves until ctx ends. It may be called once.
func (s *Sidecar) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("demo sidecar: Run called twice")
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("demo sidecar: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("demo sidecar: %w", err)
	}
	return nil
}

// ServeHTTP routes /metrics and /demo/receiver.
func (s *Sidecar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		body := s.AppendGPUMetrics(nil)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	case "/demo/receiver":
		if !allowMethod(w, r, http.MethodPost) {
			return
		}
		s.receive(w, r)
	default:
		http.NotFound(w, r)
	}
}

// webhookMessage is the part of Alertmanager's webhook payload the
// receiver logs.
type webhookMessage struct {
	Receiver string `json:"receiver"`
	Status   string `json:"status"`
	Alerts   []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"alerts"`
}

func (s *Sidecar) receive(w http.ResponseWriter, r *http.Request) {
	var msg webhookMessage
	if err := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody)).Decode(&msg); err != nil {
		http.Error(w, "not an Alertmanager webhook message: "+err.Error(), http.StatusBadRequest)
		return
	}
	for _, a := range msg.Alerts {
		s.opts.Logger.Info("demo receiver: would send", "receiver", msg.Receiver, "status", a.Status,
			"alertname", a.Labels["alertname"], "severity", a.Labels["severity"], "summary", a.Annotations["summary"])
	}
	s.received.Add(int64(len(msg.Alerts)))
	s.mu.Lock()
	close(s.notified)
	s.notified = make(chan struct{})
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// gpuLabels are the fixture's labels of the simulated GPU.
const gpuLabels = `gpu="0",UUID="GPU-5f3c2a9e-8b1d-4c7e-9a62-0d4e7b1f3a28",pci_bus_id="00000000:01:00.0",device="nvidia0",modelName="NVIDIA H100 PCIe",Hostname="demo-box",DCGM_FI_DRIVER_VERSION="570.172.08"`

// AppendGPUMetrics appends the GPU's readings in DCGM exporter's text
// format. Utilisation drifts over a 10-minute sine around 55 %; every
// unit of slow factor above 1 of the fleet's instances (on average) adds
// 15 points, capped at 100, and temperature and power follow utilisation.
func (s *Sidecar) AppendGPUMetrics(dst []byte) []byte {
	f := s.opts.Fleet
	excess := 0.0
	for i := range f.Len() {
		excess += max(0, f.Instance(i).Slow()-1)
	}
	if f.Len() > 0 {
		excess /= float64(f.Len())
	}
	t := float64(s.opts.Now().UnixNano()) / 1e9
	util := math.Min(100, 55+10*math.Sin(2*math.Pi*t/600)+15*excess)
	temp := 45 + 0.3*util
	power := 90 + 2.4*util
	used := 61000 + 150*util
	const total, reserved = 81559.0, 593.0
	smClock := 1755.0
	if temp > 85 {
		smClock = 1410
	}
	gauges := []struct {
		name, help string
		v          float64
	}{
		{"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", smClock},
		{"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", 1593},
		{"DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", temp + 7},
		{"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", math.Round(temp)},
		{"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", math.Round(power*100) / 100},
		{"DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W).", 350},
		{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", math.Round(util)},
		{"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", math.Round(util * 0.55)},
		{"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", math.Round(total - reserved - used)},
		{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", math.Round(used)},
		{"DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", reserved},
		{"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", 0},
	}
	var b strings.Builder
	for _, g := range gauges {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s{%s} %s\n", g.name, g.help, g.name, g.name, gpuLabels, strconv.FormatFloat(g.v, 'f', -1, 64))
	}
	return append(dst, b.String()...)
}
