package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// vllmVersion is what GET /version reports: the metric set is 0.11's.
const vllmVersion = "0.11.0"

const maxRequestBody = 1 << 20

var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// ServeHTTP routes one request. While the instance is down everything but
// /demo/control answers 503.
func (in *Instance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/demo/control" {
		in.serveControl(w, r)
		return
	}
	if in.isDown.Load() {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "demo instance is down (POST /demo/control {\"down\": false} brings it back)", http.StatusServiceUnavailable)
		return
	}
	switch r.URL.Path {
	case "/metrics":
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		in.serveMetrics(w)
	case "/health":
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		w.WriteHeader(http.StatusOK)
	case "/version":
		if !allowMethod(w, r, http.MethodGet) {
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"version": vllmVersion})
	case "/v1/models":
		if !allowMethod(w, r, http.MethodGet) {
			in.recordHTTP(r.URL.Path, r.Method, http.StatusMethodNotAllowed, 0, 0, 0)
			return
		}
		start := time.Now()
		n := in.serveModels(w)
		in.recordHTTP(r.URL.Path, r.Method, http.StatusOK, 0, float64(n), time.Since(start).Seconds())
	case "/v1/chat/completions", "/v1/completions":
		if !allowMethod(w, r, http.MethodPost) {
			in.recordHTTP(r.URL.Path, r.Method, http.StatusMethodNotAllowed, 0, 0, 0)
			return
		}
		in.serveCompletion(w, r, r.URL.Path == "/v1/chat/completions")
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		in.recordHTTP("none", r.Method, http.StatusNotFound, 0, 22, 0)
	}
}

func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", method)
	writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
	return false
}

// recordHTTP adds one real request to the http_* families.
func (in *Instance) recordHTTP(handler, method string, status int, reqSize, respSize, dur float64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.advanceLocked(in.opts.Now())
	in.http.record(in.createdNow(), handler, method, strconv.Itoa(status/100)+"xx", reqSize, respSize, dur, 1)
}

func (in *Instance) serveMetrics(w http.ResponseWriter) {
	bp := bodyPool.Get().(*[]byte)
	body := in.AppendMetrics((*bp)[:0])
	h := w.Header()
	h.Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
	*bp = body
	bodyPool.Put(bp)
}

type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Root        string `json:"root"`
	Parent      *int   `json:"parent"`
	MaxModelLen int    `json:"max_model_len"`
}

func (in *Instance) serveModels(w http.ResponseWriter) int {
	created := in.opts.Now().Unix()
	list := struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}{Object: "list"}
	for _, name := range in.Models() {
		list.Data = append(list.Data, modelCard{ID: name, Object: "model", Created: created,
			OwnedBy: "vllm", Root: name, MaxModelLen: maxModelLen})
	}
	return writeJSON(w, http.StatusOK, list)
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return 0
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return len(b)
}

// ControlRequest is the body of POST /demo/control. Absent fields leave
// the setting alone. The control endpoint works while the instance is down.
type ControlRequest struct {
	Slow *float64 `json:"slow,omitempty"`
	// Queue is a standing backlog of requests per model (SetQueue).
	Queue *float64 `json:"queue,omitempty"`
	// DecodeSlow slows the decode phase alone (SetDecodeSlow).
	DecodeSlow   *float64 `json:"decode_slow,omitempty"`
	Down         *bool    `json:"down,omitempty"`
	Restart      bool     `json:"restart,omitempty"`
	FirstTokenMS *float64 `json:"first_token_ms,omitempty"`
	PerTokenMS   *float64 `json:"per_token_ms,omitempty"`
}

// ControlState is the answer of GET and POST /demo/control.
type ControlState struct {
	Instance         int      `json:"instance"`
	Addr             string   `json:"addr"`
	Models           []string `json:"models"`
	Slow             float64  `json:"slow"`
	Queue            float64  `json:"queue"`
	DecodeSlow       float64  `json:"decode_slow"`
	Down             bool     `json:"down"`
	FirstTokenMS     float64  `json:"first_token_ms"`
	PerTokenMS       float64  `json:"per_token_ms"`
	ProcessStartTime float64  `json:"process_start_time_seconds"`
}

func (in *Instance) controlState() ControlState {
	in.mu.Lock()
	defer in.mu.Unlock()
	return ControlState{
		Instance: in.index, Addr: in.addr, Models: in.Models(), Slow: in.slow, Queue: in.backlog, DecodeSlow: in.decodeSlow, Down: in.down,
		FirstTokenMS: float64(in.firstToken) / 1e6, PerTokenMS: float64(in.perToken) / 1e6,
		ProcessStartTime: in.proc.start,
	}
}

func (in *Instance) serveControl(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, in.controlState())
		return
	case http.MethodPost:
	default:
		allowMethod(w, r, http.MethodPost)
		return
	}
	var req ControlRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{
			"error": fmt.Sprintf("cannot parse control request: %v; expected e.g. {\"slow\": 3}, {\"queue\": 20}, {\"decode_slow\": 3}, {\"down\": true}, {\"restart\": true}, {\"first_token_ms\": 300, \"per_token_ms\": 20}", err)})
		return
	}
	bad := func(f *float64) bool { return f != nil && (*f < 0 || math.IsNaN(*f) || math.IsInf(*f, 0)) }
	if req.Slow != nil && !(*req.Slow > 0) || req.DecodeSlow != nil && !(*req.DecodeSlow > 0) ||
		bad(req.Slow) || bad(req.DecodeSlow) || bad(req.Queue) || bad(req.FirstTokenMS) || bad(req.PerTokenMS) {
		writeJSON(w, http.StatusBadRequest, map[string]string{
			"error": "slow and decode_slow must be positive numbers and queue, first_token_ms, per_token_ms non-negative"})
		return
	}
	if req.Restart {
		in.Restart()
	}
	if req.Slow != nil {
		in.SetSlow(*req.Slow)
	}
	if req.Queue != nil {
		in.SetQueue(*req.Queue)
	}
	if req.DecodeSlow != nil {
		in.SetDecodeSlow(*req.DecodeSlow)
	}
	if req.FirstTokenMS != nil || req.PerTokenMS != nil {
		in.mu.Lock()
		first, per := in.firstToken, in.perToken
		in.mu.Unlock()
		if req.FirstTokenMS != nil {
			first = time.Duration(*req.FirstTokenMS * float64(time.Millisecond))
		}
		if req.PerTokenMS != nil {
			per = time.Duration(*req.PerTokenMS * float64(time.Millisecond))
		}
		in.SetStreamDelays(first, per)
	}
	if req.Down != nil {
		in.SetDown(*req.Down)
	}
	writeJSON(w, http.StatusOK, in.controlState())
}
