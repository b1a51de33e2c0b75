package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
	"github.com/aiserve/appliance/demo"
	"github.com/aiserve/appliance/internal/pipenet"
)

// llmConfig returns a valid llm probe config for url.
func llmConfig(t *testing.T, url string, timeout time.Duration) *config.ProbeConfig {
	t.Helper()
	c := &config.ProbeConfig{Name: "chat", Kind: config.ProbeKindLLM, URL: url, Model: "m",
		Interval: model.Duration(time.Minute), Timeout: model.Duration(timeout)}
	require.NoError(t, yamlRoundTrip(c))
	return c
}

// yamlRoundTrip applies the config defaults the way Load does.
func yamlRoundTrip(c *config.ProbeConfig) error {
	cfg, err := config.Load([]byte(fmt.Sprintf("probes:\n  - {name: %q, kind: %q, url: %q, interval: %s, timeout: %s, model: %q}\n",
		c.Name, c.Kind, c.URL, c.Interval, c.Timeout, c.Model)), "")
	if err != nil {
		return err
	}
	*c = *cfg.Probes[0]
	return nil
}

func runProbe(t *testing.T, c *config.ProbeConfig) Result {
	t.Helper()
	p, err := NewProber(c)
	require.NoError(t, err)
	return p.Probe(context.Background())
}

// bubbleProbe runs one probe of c (llm or http) against h, both inside
// the synctest bubble the caller runs in (see package pipenet): time.Now,
// sleeps and timeouts are the bubble's, so every duration the probe
// measures is exact. c's URL only names the path; every connection goes
// to h.
func bubbleProbe(t *testing.T, h http.Handler, c *config.ProbeConfig) Result {
	t.Helper()
	srv := pipenet.Serve(t, h)
	p, err := NewProber(c)
	require.NoError(t, err)
	var client *http.Client
	switch p := p.(type) {
	case *llmProber:
		client = p.client
	case *httpProber:
		client = p.client
	default:
		t.Fatalf("no client to redirect in a %T", p)
	}
	client.Transport.(*http.Transport).DialContext = srv.Dial
	return p.Probe(context.Background())
}

// sseHandler streams a chat completion in vLLM's shape: the role-only chunk
// at once, then tokens at start+first+k*per, the finish chunk, the usage
// chunk and [DONE].
func sseHandler(t *testing.T, first, per time.Duration, tokens int) http.Handler {
	t.Helper()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var req struct {
			Stream    bool `json:"stream"`
			MaxTokens int  `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !req.Stream || req.MaxTokens != 16 {
			http.Error(w, fmt.Sprintf("bad request %+v %v", req, err), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		send := func(s string) {
			_, _ = io.WriteString(w, "data: "+s+"\n\n")
			_ = rc.Flush()
		}
		send(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
		for k := range tokens {
			time.Sleep(time.Until(start.Add(first + time.Duration(k)*per)))
			send(fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" w%d"},"finish_reason":null}]}`, k))
		}
		send(`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}`)
		send(fmt.Sprintf(`{"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"total_tokens":%d,"completion_tokens":%d}}`, tokens+9, tokens))
		send("[DONE]")
	})
}

// TestLLMProbeTTFTAndTPOT runs in a synctest bubble, so the server's
// pace is exact and so are the probe's measurements.
func TestLLMProbeTTFTAndTPOT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := sseHandler(t, 300*time.Millisecond, 20*time.Millisecond, 16)
		r := bubbleProbe(t, h, llmConfig(t, "http://vllm.test/v1/chat/completions", 10*time.Second))
		require.True(t, r.Success, "%s: %v", r.Reason, r.Err)
		require.Equal(t, 200, r.StatusCode)
		require.True(t, r.HasTTFT)
		// The role-only chunk comes at once; counting it would give 0.
		require.Equal(t, 300*time.Millisecond, r.TTFT)
		require.Equal(t, 20*time.Millisecond, r.TPOT)
		require.Equal(t, 16, r.OutputTokens)
		require.Equal(t, 300*time.Millisecond+15*20*time.Millisecond, r.Duration)
		require.Equal(t, 16/0.6, r.TokensPerSecond())
	})
}

// TestLLMProbeStallIsNoToken: headers and the role chunk come at once,
// then nothing: TTFT is the timeout and the reason says no token.
func TestLLMProbeStallIsNoToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Read to the end, so that the server watches the
			// connection and cancels r's context when the probe hangs up.
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
			_ = http.NewResponseController(w).Flush()
			<-r.Context().Done()
		})
		timeout := 400 * time.Millisecond
		r := bubbleProbe(t, h, llmConfig(t, "http://vllm.test/v1/chat/completions", timeout))
		require.False(t, r.Success)
		require.Equal(t, ReasonNoToken, r.Reason, "%v", r.Err)
		require.True(t, r.HasTTFT)
		require.Equal(t, timeout, r.TTFT)
		require.Equal(t, timeout, r.Duration)
		require.Equal(t, 200, r.StatusCode)
		require.Zero(t, r.OutputTokens)
	})
}

func TestLLMProbeNoHeadersIsTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		})
		timeout := 300 * time.Millisecond
		r := bubbleProbe(t, h, llmConfig(t, "http://vllm.test/v1/completions", timeout))
		require.Equal(t, ReasonTimeout, r.Reason, "%v", r.Err)
		require.False(t, r.HasTTFT)
		require.Zero(t, r.StatusCode)
		require.Equal(t, timeout, r.Duration)
	})
}

// replayHandler serves a fixture, one line at a time with a gap after
// each non-empty line.
func replayHandler(t *testing.T, path, contentType string, gap time.Duration) http.Handler {
	t.Helper()
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		rc := http.NewResponseController(w)
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			_, _ = w.Write(append(sc.Bytes(), '\n'))
			_ = rc.Flush()
			if len(sc.Bytes()) > 0 {
				time.Sleep(gap)
			}
		}
	})
}

// TestLLMProbeFixtures replays recorded streams, with 5 ms of the
// bubble's clock after each non-empty line. An SSE event counts when the
// blank line that ends it arrives, one gap after its data line; an NDJSON
// line counts at once.
func TestLLMProbeFixtures(t *testing.T) {
	const gap = 5 * time.Millisecond
	f := func(fixture, contentType, path string, wantTokens int, ttft, tpot time.Duration) {
		t.Helper()
		synctest.Test(t, func(t *testing.T) {
			h := replayHandler(t, "testdata/"+fixture, contentType, gap)
			r := bubbleProbe(t, h, llmConfig(t, "http://llm.test"+path, 10*time.Second))
			require.True(t, r.Success, "%s: %s: %v", fixture, r.Reason, r.Err)
			require.Equal(t, wantTokens, r.OutputTokens, fixture)
			require.True(t, r.HasTTFT, fixture)
			require.Equal(t, ttft, r.TTFT, fixture)
			require.Equal(t, tpot, r.TPOT, fixture)
			require.Less(t, r.TTFT, r.Duration, fixture)
		})
	}
	// vLLM: role-only first chunk, usage chunk with 20 completion tokens.
	f("openai-stream.sse", "text/event-stream", "/v1/chat/completions", 20, 2*gap, gap)
	// Ollama's OpenAI endpoint: the first chunk carries role and token.
	f("openai-stream.ollama.sse", "text/event-stream", "/v1/chat/completions", 20, gap, gap)
	// Ollama native NDJSON: tokens from eval_count on the done line.
	f("ollama-generate.ndjson", "application/x-ndjson", "/api/generate", 20, 0, gap)
}

// TestLLMProbeOllamaTTFT: the NDJSON stream's first token is timed, not
// its headers.
func TestLLMProbeOllamaTTFT(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { testLLMProbeOllamaTTFT(t) })
}

func testLLMProbeOllamaTTFT(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model   string         `json:"model"`
			Options map[string]int `json:"options"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/x-ndjson")
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		time.Sleep(200 * time.Millisecond)
		for i := range 3 {
			fmt.Fprintf(w, `{"model":%q,"response":"t%d","done":false}`+"\n", req.Model, i)
			_ = rc.Flush()
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Fprintf(w, `{"model":%q,"response":"","done":true,"eval_count":%d}`+"\n", req.Model, req.Options["num_predict"]/4)
	})
	r := bubbleProbe(t, h, llmConfig(t, "http://ollama.test/api/generate", 5*time.Second))
	require.True(t, r.Success, "%s: %v", r.Reason, r.Err)
	require.Equal(t, 200*time.Millisecond, r.TTFT)
	require.Equal(t, 4, r.OutputTokens) // eval_count wins over the 3 events
	require.Equal(t, 20*time.Millisecond/3, r.TPOT, "two 10 ms gaps over the 4-1 tokens eval_count reports")
}

func TestLLMProbeFailures(t *testing.T) {
	f := func(name string, h http.HandlerFunc, path, reason string) {
		t.Helper()
		srv := httptest.NewServer(h)
		defer srv.Close()
		r := runProbe(t, llmConfig(t, srv.URL+path, 2*time.Second))
		require.False(t, r.Success, name)
		require.Equal(t, reason, r.Reason, "%s: %v", name, r.Err)
		require.Error(t, r.Err, name)
	}
	f("500", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"object":"error","message":"model not loaded"}`, http.StatusInternalServerError)
	}, "/v1/chat/completions", ReasonHTTPStatus)
	f("html", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "<html>hello</html>\n")
	}, "/v1/chat/completions", ReasonMalformed)
	f("bad json", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "data: {\"choices\":[\n\n")
	}, "/v1/completions", ReasonMalformed)
	f("error event", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"error\":{\"message\":\"engine dead\"}}\n\n")
	}, "/v1/completions", ReasonMalformed)
	f("cut short", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"text\":\"a\"}]}\n\n")
	}, "/v1/completions", ReasonMalformed)
	f("no text", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: [DONE]\n\n")
	}, "/v1/chat/completions", ReasonNoToken)
	f("ollama error", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "{\"error\":\"model 'x' not found\"}\n")
	}, "/api/generate", ReasonMalformed)

	// Nothing listens: connection.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := runProbe(t, llmConfig(t, url+"/v1/chat/completions", 2*time.Second))
	require.Equal(t, ReasonConnection, r.Reason, "%v", r.Err)
}

// TestLLMProbeDemoFleetDelays checks the probe against the demo fleet's
// streaming endpoint with delays set through POST /demo/control, the way
// the demo shows the probe at work. The instance is served inside a
// synctest bubble, so its pace and the probe's measurements are exact.
func TestLLMProbeDemoFleetDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := demo.DefaultFleetOptions()
		opts.BasePort, opts.Instances, opts.RequestRate = 0, 1, 1e-9
		fleet, err := demo.NewFleet(opts)
		require.NoError(t, err)
		defer func() { require.NoError(t, fleet.Close()) }()
		in := fleet.Instance(0)

		ctl := httptest.NewRecorder()
		in.ServeHTTP(ctl, httptest.NewRequest(http.MethodPost, "/demo/control", strings.NewReader(`{"first_token_ms":300,"per_token_ms":20}`)))
		require.Equal(t, http.StatusOK, ctl.Code, ctl.Body.String())

		c := llmConfig(t, "http://demo.test/v1/chat/completions", 10*time.Second)
		c.Model = demo.DefaultModels[0]
		r := bubbleProbe(t, in, c)
		require.True(t, r.Success, "%s: %v", r.Reason, r.Err)
		require.Equal(t, 300*time.Millisecond, r.TTFT)
		require.Equal(t, 20*time.Millisecond, r.TPOT)
		require.Equal(t, 16, r.OutputTokens)
	})
}
