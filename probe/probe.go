package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	commoncfg "github.com/prometheus/common/config"

	"github.com/aiserve/appliance/config"
)

// Reasons a probe run failed, the value of the reason label of
// probe_success.
const (
	ReasonTimeout    = "timeout"          // no complete answer within the timeout
	ReasonConnection = "connection"       // no connection: refused, reset, DNS, TLS handshake
	ReasonHTTPStatus = "http_status"      // a status code that was not expected
	ReasonNoToken    = "no_token"         // headers came, no generated text within the timeout or before the end
	ReasonMalformed  = "malformed_stream" // a stream that is not SSE/NDJSON of the expected JSON, or ends early
	ReasonBody       = "body_mismatch"    // the body did not match expect_body
)

// Phases of an HTTP request, the phase label of
// probe_http_duration_seconds (blackbox_exporter's).
var Phases = []string{"resolve", "connect", "tls", "processing", "transfer"}

// Result is what one probe run found.
type Result struct {
	Success bool
	// Reason is one of the Reason constants when Success is false.
	Reason string
	// Err tells the operator what went wrong; nil on success.
	Err error
	// Duration is the whole request, from before the connection to the
	// last byte (llm: to the end of the stream).
	Duration time.Duration
	// StatusCode is 0 when no response came.
	StatusCode int
	// Phases holds the duration of each of Phases (http probes only).
	Phases map[string]time.Duration
	// CertExpiry is the earliest NotAfter of the server's certificates;
	// zero without TLS.
	CertExpiry time.Time

	// LLM probes. HasTTFT is set when a first token came, or when the
	// headers came and no token did (then TTFT is how long the probe
	// waited, the timeout).
	HasTTFT bool
	TTFT    time.Duration
	// TPOT is the mean gap between output tokens after the first; set
	// when OutputTokens > 1.
	TPOT time.Duration
	// OutputTokens is the usage the server reported, or else the number
	// of events that carried text.
	OutputTokens int
}

// TokensPerSecond is the output tokens over the whole request, the rate a
// user sees.
func (r *Result) TokensPerSecond() float64 {
	if r.OutputTokens == 0 || r.Duration <= 0 {
		return 0
	}
	return float64(r.OutputTokens) / r.Duration.Seconds()
}

func fail(r Result, reason string, err error) Result {
	r.Success, r.Reason, r.Err = false, reason, err
	return r
}

// Prober runs one probe. Probe may be called again after it returned; it
// is not safe for concurrent use (the Manager runs one request at a time
// per probe, which is the point: a probe must never pile load onto a
// struggling server).
type Prober interface {
	Probe(ctx context.Context) Result
}

// NewProber builds the prober for cfg, which must come from config.Load
// (defaults applied, valid). It opens no connection.
func NewProber(cfg *config.ProbeConfig) (Prober, error) {
	client, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	switch cfg.Kind {
	case config.ProbeKindHTTP:
		return newHTTPProber(cfg, client)
	case config.ProbeKindLLM:
		return newLLMProber(cfg, client)
	}
	return nil, fmt.Errorf("probe %s: unknown kind %q", cfg.Name, cfg.Kind)
}

// newClient returns a client that opens a new connection for every request
// (like blackbox_exporter, so connect and TLS times are measured each run)
// and ignores proxy variables (a probe measures the server, not a proxy).
// Redirects are followed, as blackbox_exporter does by default, up to Go's
// limit of 10.
func newClient(cfg *config.ProbeConfig) (*http.Client, error) {
	tlsCfg, err := commoncfg.NewTLSConfig(&cfg.TLSConfig)
	if err != nil {
		return nil, fmt.Errorf("probe %s: tls_config: %w", cfg.Name, err)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{KeepAlive: -1}).DialContext,
		TLSClientConfig:     tlsCfg,
		DisableKeepAlives:   true,
		DisableCompression:  true,
		MaxIdleConns:        1,
		TLSHandshakeTimeout: time.Duration(cfg.Timeout),
	}
	return &http.Client{Transport: tr}, nil
}

func newRequest(ctx context.Context, cfg *config.ProbeConfig, method string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, cfg.URL, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "appliance-probe/1")
	for k, v := range cfg.Headers {
		if http.CanonicalHeaderKey(k) == "Host" {
			req.Host = string(v)
			continue
		}
		req.Header.Set(k, string(v))
	}
	return req, nil
}

// classify turns the error of a request or a body read into a reason.
// ctx is the probe run's context.
func classify(ctx context.Context, err error) string {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return ReasonTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ReasonTimeout
	}
	return ReasonConnection
}

// redactURL strips a password from a URL for errors and logs.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return u.Redacted()
}
