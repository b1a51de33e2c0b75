package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

const (
	defaultMaxTokens = 16
	// maxServedTokens bounds the time and memory of one request.
	maxServedTokens = 4096
)

// words is the answer every request gets, token by token (the fixture's).
var words = [...]string{"The", " GPU", " is", " idle", " because", " no", " requests", " are",
	" queued", ";", " the", " KV", " cache", " stays", " warm", " for", " the", " next", " prompt", "."}

type completionRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// vllmError writes vLLM's OpenAI-style error body.
func vllmError(w http.ResponseWriter, status int, typ, msg string) int {
	return writeJSON(w, status, map[string]any{
		"object": "error", "message": msg, "type": typ, "param": nil, "code": status,
	})
}

// servePlan is what one served request will do, fixed at its start.
type servePlan struct {
	model         int
	modelName     string
	id            string
	created       int64
	prompt        int
	tokens        int
	first, per    time.Duration
	includeUsage  bool
	chat, stream  bool
	requestLength float64
}

func (in *Instance) serveCompletion(w http.ResponseWriter, r *http.Request, chat bool) {
	start := time.Now()
	handler := r.URL.Path
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		n := vllmError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("cannot read request body: %v", err))
		in.recordHTTP(handler, r.Method, http.StatusBadRequest, float64(len(raw)), float64(n), time.Since(start).Seconds())
		return
	}
	plan, status, msg := in.plan(raw, chat)
	if status != http.StatusOK {
		typ := "BadRequestError"
		if status == http.StatusNotFound {
			typ = "NotFoundError"
		}
		n := vllmError(w, status, typ, msg)
		in.recordHTTP(handler, r.Method, status, float64(len(raw)), float64(n), time.Since(start).Seconds())
		return
	}
	res := in.stream(r.Context(), w, &plan, start)
	in.finishServed(&plan, &res, handler)
}

// plan parses the request and fixes its delays and ID under the lock.
func (in *Instance) plan(raw []byte, chat bool) (servePlan, int, string) {
	var req completionRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return servePlan{}, http.StatusBadRequest, fmt.Sprintf("cannot parse request body: %v", err)
	}
	p := servePlan{chat: chat, stream: req.Stream, requestLength: float64(len(raw)), model: -1}
	for i := range in.models {
		if req.Model == in.models[i].name || (req.Model == "" && i == 0) {
			p.model, p.modelName = i, in.models[i].name
			break
		}
	}
	if p.model < 0 {
		return p, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", req.Model)
	}
	p.tokens = defaultMaxTokens
	switch {
	case req.MaxCompletionTokens != nil:
		p.tokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		p.tokens = *req.MaxTokens
	}
	if p.tokens < 1 || p.tokens > maxServedTokens {
		return p, http.StatusBadRequest, fmt.Sprintf("max_tokens must be between 1 and %d, got %d", maxServedTokens, p.tokens)
	}
	// About four bytes a token, plus the chat template.
	text := len(req.Prompt)
	for _, m := range req.Messages {
		text += len(m.Content) + 16
	}
	p.prompt = max(1, text/4)
	p.includeUsage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage

	in.mu.Lock()
	defer in.mu.Unlock()
	now := in.opts.Now()
	in.advanceLocked(now)
	p.created = now.Unix()
	in.reqSeq++
	prefix := "cmpl-"
	if chat {
		prefix = "chatcmpl-"
	}
	p.id = fmt.Sprintf("%s%016x%016x", prefix, mix64(uint64(in.opts.Seed)^uint64(in.index)), mix64(in.reqSeq))
	// Fixed delays are scaled by the slow factor; derived ones already are.
	var q simRequest
	if in.firstToken == 0 || in.perToken == 0 {
		q = in.sampleRequest(p.model, in.loadAt(p.model, in.rateAt(p.model, now)))
	}
	if p.first = time.Duration(float64(in.firstToken) * in.slow); p.first == 0 {
		prefill := (prefillBase + float64(p.prompt)/in.models[p.model].prof.prefillTPS) * in.slow
		p.first = seconds(q.queue + prefill + ttftOverhead*in.slow)
	}
	if p.per = time.Duration(float64(in.perToken) * in.slow); p.per == 0 {
		p.per = seconds(q.itlMean)
	}
	in.models[p.model].inflight++
	return p, http.StatusOK, ""
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// serveResult is what actually happened, measured on the wall clock.
type serveResult struct {
	ttft     time.Duration
	gaps     []time.Duration
	e2e      time.Duration
	tokens   int
	aborted  bool
	respSize int
}

// stream sends the answer: for stream=true as Server-Sent Events in vLLM's
// shape, otherwise one JSON body after the whole generation time.
//
// The role-only first chunk of a chat stream is sent at once, before the
// first-token delay, so that a probe which stops its TTFT clock on the
// first event instead of the first token measures visibly wrong values.
func (in *Instance) stream(ctx context.Context, w http.ResponseWriter, p *servePlan, start time.Time) serveResult {
	var res serveResult
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wait := func(until time.Time) bool {
		d := time.Until(until)
		if d <= 0 {
			return ctx.Err() == nil
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		}
	}
	if !p.stream {
		if !wait(start.Add(p.first + time.Duration(p.tokens-1)*p.per)) {
			res.aborted = true
			res.e2e = time.Since(start)
			return res
		}
		res.tokens = p.tokens
		res.ttft = p.first
		for range p.tokens - 1 {
			res.gaps = append(res.gaps, p.per)
		}
		res.respSize = writeJSON(w, http.StatusOK, p.completionBody())
		res.e2e = time.Since(start)
		return res
	}

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 0, 512)
	send := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if p.chat {
		buf = p.appendChunkStart(buf[:0])
		buf = append(buf, `"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		if !send(buf) {
			res.aborted = true
			res.e2e = time.Since(start)
			return res
		}
	}
	last := start
	for k := 0; k < p.tokens; k++ {
		if !wait(start.Add(p.first + time.Duration(k)*p.per)) {
			res.aborted = true
			break
		}
		word := words[k%len(words)]
		buf = p.appendChunkStart(buf[:0])
		if p.chat {
			buf = append(buf, `"delta":{"content":`...)
			buf = strconv.AppendQuote(buf, word)
			buf = append(buf, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		} else {
			buf = append(buf, `"text":`...)
			buf = strconv.AppendQuote(buf, word)
			// vLLM's completions stream carries finish_reason on the last token.
			if k == p.tokens-1 {
				buf = append(buf, `,"logprobs":null,"finish_reason":"length","stop_reason":null}]}`+"\n\n"...)
			} else {
				buf = append(buf, `,"logprobs":null,"finish_reason":null,"stop_reason":null}]}`+"\n\n"...)
			}
		}
		if !send(buf) {
			res.aborted = true
			break
		}
		now := time.Now()
		if k == 0 {
			res.ttft = now.Sub(start)
		} else {
			res.gaps = append(res.gaps, now.Sub(last))
		}
		last = now
		res.tokens++
	}
	if res.aborted {
		res.e2e = time.Since(start)
		return res
	}
	if p.chat {
		buf = p.appendChunkStart(buf[:0])
		buf = append(buf, `"delta":{"content":""},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`+"\n\n"...)
		send(buf)
	}
	if p.includeUsage {
		buf = p.appendIDPart(buf[:0])
		buf = fmt.Appendf(buf, `"choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}`+"\n\n",
			p.prompt, p.prompt+p.tokens, p.tokens)
		send(buf)
	}
	send([]byte("data: [DONE]\n\n"))
	res.e2e = time.Since(start)
	return res
}

// appendIDPart appends `data: {"id":...,"model":"m",`.
func (p *servePlan) appendIDPart(dst []byte) []byte {
	dst = append(dst, `data: {"id":"`...)
	dst = append(dst, p.id...)
	if p.chat {
		dst = append(dst, `","object":"chat.completion.chunk","created":`...)
	} else {
		dst = append(dst, `","object":"text_completion","created":`...)
	}
	dst = strconv.AppendInt(dst, p.created, 10)
	dst = append(dst, `,"model":`...)
	dst = strconv.AppendQuote(dst, p.modelName)
	return append(dst, ',')
}

func (p *servePlan) appendChunkStart(dst []byte) []byte {
	dst = p.appendIDPart(dst)
	return append(dst, `"choices":[{"index":0,`...)
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

func (p *servePlan) completionBody() any {
	text := ""
	for k := 0; k < p.tokens; k++ {
		text += words[k%len(words)]
	}
	u := usage{PromptTokens: p.prompt, TotalTokens: p.prompt + p.tokens, CompletionTokens: p.tokens}
	type message struct {
		Role      string `json:"role"`
		Content   string `json:"content"`
		ToolCalls []any  `json:"tool_calls"`
	}
	type choice struct {
		Index        int      `json:"index"`
		Message      *message `json:"message,omitempty"`
		Text         *string  `json:"text,omitempty"`
		Logprobs     any      `json:"logprobs"`
		FinishReason string   `json:"finish_reason"`
		StopReason   any      `json:"stop_reason"`
	}
	c := choice{Index: 0, FinishReason: "length"}
	object := "text_completion"
	if p.chat {
		object = "chat.completion"
		c.Message = &message{Role: "assistant", Content: text, ToolCalls: []any{}}
	} else {
		c.Text = &text
	}
	return struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   usage    `json:"usage"`
	}{p.id, object, p.created, p.modelName, []choice{c}, u}
}

// finishServed records a served request in the metrics, with the times
// measured on the wall clock.
func (in *Instance) finishServed(p *servePlan, res *serveResult, handler string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.advanceLocked(in.opts.Now())
	ms := &in.models[p.model]
	ms.inflight--
	reason := finishLength
	if res.aborted {
		reason = finishAbort
	}
	ms.success[reason]++
	ms.promptTokens += float64(p.prompt)
	ms.prefixQueries += float64(p.prompt)
	ms.genTokens += float64(res.tokens)
	// Every finished request, aborted or not, is in the request histograms,
	// so request_success_total sums to their counts as in vLLM; TTFT only
	// once a token was sent.
	e2e := res.e2e.Seconds()
	ttft := res.ttft.Seconds()
	var decode float64
	for _, g := range res.gaps {
		ms.itl.observe(g.Seconds(), 1)
		ms.tpot.observe(g.Seconds(), 1)
		decode += g.Seconds()
	}
	if res.tokens > 0 {
		ms.ttft.observe(ttft, 1)
	}
	ms.promptHist.observe(float64(p.prompt), 1)
	ms.genHist.observe(float64(res.tokens), 1)
	ms.maxGenHist.observe(float64(res.tokens), 1)
	ms.paramsN.observe(1, 1)
	ms.paramsMaxTokens.observe(float64(p.tokens), 1)
	ms.iteration.observe(float64(p.prompt), 1)
	ms.queue.observe(0, 1)
	ms.prefill.observe(ttft, 1)
	ms.decode.observe(decode, 1)
	ms.inference.observe(ttft+decode, 1)
	ms.e2e.observe(e2e, 1)
	in.http.record(in.createdNow(), handler, http.MethodPost, "2xx", p.requestLength, float64(res.respSize), e2e, 1)
	in.updateGaugesLocked(in.last)
}
