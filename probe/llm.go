package probe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aiserve/appliance/config"
)

const (
	// maxStreamLine bounds one SSE line or NDJSON object; a token chunk
	// is a few hundred bytes, Ollama's final line with its context array
	// a few KiB.
	maxStreamLine = 1 << 20
	// maxStreamBytes bounds a whole answer (max_tokens is at most 4096).
	maxStreamBytes = 64 << 20
)

// api is the wire protocol of an llm probe.
type api int

const (
	apiChat       api = iota // OpenAI /v1/chat/completions, SSE
	apiCompletion            // OpenAI /v1/completions, SSE
	apiGenerate              // Ollama /api/generate, NDJSON
	apiOllamaChat            // Ollama /api/chat, NDJSON
)

type llmProber struct {
	cfg    *config.ProbeConfig
	client *http.Client
	api    api
	body   []byte
	now    func() time.Time
}

func newLLMProber(cfg *config.ProbeConfig, client *http.Client) (*llmProber, error) {
	p := &llmProber{cfg: cfg, client: client, now: time.Now}
	var req map[string]any
	switch cfg.APIPath(nil) {
	case "/v1/chat/completions":
		p.api = apiChat
		req = map[string]any{
			"messages":       []map[string]string{{"role": "user", "content": cfg.Prompt}},
			"max_tokens":     cfg.MaxTokens,
			"stream":         true,
			"stream_options": map[string]bool{"include_usage": true},
		}
	case "/v1/completions":
		p.api = apiCompletion
		req = map[string]any{
			"prompt":         cfg.Prompt,
			"max_tokens":     cfg.MaxTokens,
			"stream":         true,
			"stream_options": map[string]bool{"include_usage": true},
		}
	case "/api/generate":
		p.api = apiGenerate
		req = map[string]any{"prompt": cfg.Prompt, "stream": true, "options": map[string]int{"num_predict": cfg.MaxTokens}}
	case "/api/chat":
		p.api = apiOllamaChat
		req = map[string]any{
			"messages": []map[string]string{{"role": "user", "content": cfg.Prompt}},
			"stream":   true,
			"options":  map[string]int{"num_predict": cfg.MaxTokens},
		}
	default:
		return nil, fmt.Errorf("probe %s: url %q does not end in an LLM endpoint", cfg.Name, redactURL(cfg.URL))
	}
	// An empty model is left out: some servers (a single-model vLLM,
	// TGI) then take their only model.
	if cfg.Model != "" {
		req["model"] = cfg.Model
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("probe %s: encode request: %w", cfg.Name, err)
	}
	p.body = b
	return p, nil
}

// Probe sends one streaming request and times its tokens. The clock starts
// before the connection is opened (what a user waits for includes it) and
// the time to first token stops at the first event that carries generated
// text: vLLM's first chat chunk carries only the role and does not count.
func (p *llmProber) Probe(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.cfg.Timeout))
	defer cancel()

	req, err := newRequest(ctx, p.cfg, http.MethodPost, bytes.NewReader(p.body))
	if err != nil {
		return fail(Result{}, ReasonConnection, fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	if p.api == apiChat || p.api == apiCompletion {
		req.Header.Set("Accept", "text/event-stream")
	}

	start := p.now()
	var r Result
	resp, err := p.client.Do(req)
	if err != nil {
		r.Duration = p.now().Sub(start)
		return fail(r, classify(ctx, err), fmt.Errorf("POST %s: %w", redactURL(p.cfg.URL), err))
	}
	defer resp.Body.Close()
	r.StatusCode = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		r.Duration = p.now().Sub(start)
		return fail(r, ReasonHTTPStatus, fmt.Errorf("POST %s answered %d: %s", redactURL(p.cfg.URL), resp.StatusCode, strings.TrimSpace(string(msg))))
	}

	s := &streamState{start: start}
	var serr error
	if p.api == apiChat || p.api == apiCompletion {
		serr = p.readSSE(resp.Body, s)
	} else {
		serr = p.readNDJSON(resp.Body, s)
	}
	end := p.now()
	r.Duration = end.Sub(start)
	r.OutputTokens = s.events
	if s.usage > 0 {
		r.OutputTokens = s.usage
	}
	if s.events > 0 {
		r.HasTTFT, r.TTFT = true, s.first.Sub(start)
		if r.OutputTokens > 1 {
			r.TPOT = s.last.Sub(s.first) / time.Duration(r.OutputTokens-1)
		}
	}
	switch {
	case serr == nil && !s.done:
		serr = errors.New("the stream ended before its last event ([DONE] or done:true)")
		if s.events == 0 {
			return fail(r, ReasonNoToken, serr)
		}
		return fail(r, ReasonMalformed, serr)
	case serr == nil && s.events == 0:
		return fail(r, ReasonNoToken, errors.New("the stream ended without generated text"))
	case serr == nil:
		r.Success = true
		return r
	}
	var me *malformedError
	switch {
	case errors.As(serr, &me):
		return fail(r, ReasonMalformed, serr)
	case s.events == 0 && ctx.Err() != nil:
		// Headers came, no token did: the user sat in front of an empty
		// answer for the whole timeout, which is the TTFT recorded.
		r.HasTTFT, r.TTFT = true, time.Duration(p.cfg.Timeout)
		return fail(r, ReasonNoToken, fmt.Errorf("no token within the timeout of %s", time.Duration(p.cfg.Timeout)))
	}
	return fail(r, classify(ctx, serr), fmt.Errorf("read stream of %s: %w", redactURL(p.cfg.URL), serr))
}

// streamState is what the stream showed so far.
type streamState struct {
	start, first, last time.Time
	events             int // events that carried text
	usage              int // completion tokens the server reported
	done               bool
}

func (s *streamState) text(at time.Time) {
	if s.events == 0 {
		s.first = at
	}
	s.last = at
	s.events++
}

// malformedError is a stream that is not what the protocol promises.
type malformedError struct{ msg string }

func (e *malformedError) Error() string { return e.msg }

func malformed(format string, args ...any) error {
	return &malformedError{msg: fmt.Sprintf(format, args...)}
}

// openAIChunk is the part of a chat.completion.chunk or text_completion
// chunk the probe reads.
type openAIChunk struct {
	Choices []struct {
		Delta *struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"delta"`
		Text *string `json:"text"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// readSSE reads Server-Sent Events: lines "data: ..." make an event, a
// blank line ends it; comments (":"), event, id and retry fields are
// skipped. Each event's data is one JSON chunk or [DONE].
func (p *llmProber) readSSE(body io.Reader, s *streamState) error {
	br := bufio.NewReaderSize(io.LimitReader(body, maxStreamBytes), 64<<10)
	var data []byte
	dispatch := func() error {
		if len(data) == 0 {
			return nil
		}
		defer func() { data = data[:0] }()
		if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
			s.done = true
			return nil
		}
		var c openAIChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return malformed("event %q is not a JSON chunk: %v", truncate(data), err)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return malformed("the server sent an error in the stream: %s", truncate(c.Error))
		}
		if c.Usage != nil && c.Usage.CompletionTokens > 0 {
			s.usage = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if ch.Text != nil && *ch.Text != "" ||
				ch.Delta != nil && (nonEmpty(ch.Delta.Content) || nonEmpty(ch.Delta.ReasoningContent) || nonEmpty(ch.Delta.Reasoning)) {
				s.text(p.now())
				break
			}
		}
		return nil
	}
	for !s.done {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return dispatch()
			}
			return err
		}
		switch {
		case len(line) == 0:
			if err := dispatch(); err != nil {
				return err
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("data:")):
			v := bytes.TrimPrefix(line[5:], []byte(" "))
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, v...)
		case bytes.HasPrefix(line, []byte("event:")), bytes.HasPrefix(line, []byte("id:")), bytes.HasPrefix(line, []byte("retry:")):
		default:
			return malformed("line %q is not a Server-Sent Events field; is %s a streaming endpoint?", truncate(line), redactURL(p.cfg.URL))
		}
	}
	return nil
}

// ollamaChunk is one line of Ollama's /api/generate or /api/chat stream.
type ollamaChunk struct {
	Response *string `json:"response"`
	Message  *struct {
		Content  string `json:"content"`
		Thinking string `json:"thinking"`
	} `json:"message"`
	Thinking  string `json:"thinking"`
	Done      bool   `json:"done"`
	EvalCount int    `json:"eval_count"`
	Error     string `json:"error"`
}

// readNDJSON reads Ollama's stream: one JSON object per line, the last
// with done:true and eval_count.
func (p *llmProber) readNDJSON(body io.Reader, s *streamState) error {
	br := bufio.NewReaderSize(io.LimitReader(body, maxStreamBytes), 64<<10)
	for !s.done {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var c ollamaChunk
		if err := json.Unmarshal(line, &c); err != nil {
			return malformed("line %q is not a JSON object: %v", truncate(line), err)
		}
		if c.Error != "" {
			return malformed("the server sent an error in the stream: %s", c.Error)
		}
		if c.Response == nil && c.Message == nil && !c.Done {
			return malformed("line %q has neither response nor message", truncate(line))
		}
		text := c.Response != nil && *c.Response != "" || c.Thinking != "" ||
			c.Message != nil && (c.Message.Content != "" || c.Message.Thinking != "")
		if text {
			s.text(p.now())
		}
		if c.Done {
			s.done = true
			s.usage = c.EvalCount
		}
	}
	return nil
}

// readLine returns the next line without its end (\n or \r\n); a line
// longer than maxStreamLine is an error. At the end of the stream a last
// unterminated line is returned before io.EOF.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxStreamLine {
			return nil, malformed("a line is longer than %d bytes", maxStreamLine)
		}
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return bytes.TrimRight(line, "\r\n"), nil
		default:
			return nil, err
		}
	}
}

func nonEmpty(s *string) bool { return s != nil && *s != "" }

func truncate(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
