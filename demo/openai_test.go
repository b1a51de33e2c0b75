package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/internal/pipenet"
)

type sseEvent struct {
	at   time.Duration
	data string
}

// readSSE posts body and returns the events with their arrival times.
func readSSE(t *testing.T, url, body string) ([]sseEvent, http.Header) {
	t.Helper()
	return readSSEWith(t, http.DefaultClient, url, body)
}

func readSSEWith(t *testing.T, client *http.Client, url, body string) ([]sseEvent, http.Header) {
	t.Helper()
	start := time.Now()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var events []sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		require.True(t, strings.HasPrefix(line, "data: "), line)
		events = append(events, sseEvent{at: time.Since(start), data: strings.TrimPrefix(line, "data: ")})
	}
	require.NoError(t, sc.Err())
	return events, resp.Header
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// bubbleFleet is a fleet whose instances a test serves itself, inside the
// synctest bubble it runs in (package pipenet): the streams are paced on
// the bubble's clock, so their timing is exact. The simulation's clock is
// a clock.Fake, as in startFleet.
func bubbleFleet(t *testing.T) *Fleet {
	t.Helper()
	opts := DefaultFleetOptions()
	opts.BasePort, opts.Instances, opts.Seed, opts.Now = 0, 2, 42, newFakeClock().Now
	f, err := NewFleet(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, f.Close()) })
	return f
}

// scrapeInstance is scrape without a network: the page in.ServeHTTP writes.
func scrapeInstance(t *testing.T, in *Instance) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	in.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return parseText(t, rec.Body.String())
}

func TestStreamChat(t *testing.T) {
	synctest.Test(t, testStreamChat)
}

func testStreamChat(t *testing.T) {
	f := bubbleFleet(t)
	in := f.Instance(0)
	client := pipenet.Serve(t, in).Client()
	const first, per = 150 * time.Millisecond, 30 * time.Millisecond
	in.SetStreamDelays(first, per)
	before := scrapeInstance(t, in)

	events, hdr := readSSEWith(t, client, "http://vllm.test/v1/chat/completions",
		`{"model":"qwen2.5-7b-instruct","messages":[{"role":"user","content":"Why is the GPU idle?"}],
		  "max_tokens":10,"stream":true,"stream_options":{"include_usage":true}}`)
	require.Equal(t, "text/event-stream", hdr.Get("Content-Type"))
	require.Equal(t, "[DONE]", events[len(events)-1].data)
	events = events[:len(events)-1]

	var chunks []chunk
	for _, e := range events {
		var c chunk
		require.NoError(t, json.Unmarshal([]byte(e.data), &c), e.data)
		require.Equal(t, "chat.completion.chunk", c.Object)
		require.Equal(t, "qwen2.5-7b-instruct", c.Model)
		require.True(t, strings.HasPrefix(c.ID, "chatcmpl-"), c.ID)
		require.Equal(t, chunks0ID(chunks, c.ID), c.ID, "one id per stream")
		chunks = append(chunks, c)
	}
	// role-only, 10 tokens, finish, usage
	require.Len(t, chunks, 13)
	d := chunks[0].Choices[0].Delta
	require.Equal(t, "assistant", *d.Role)
	require.Equal(t, "", *d.Content, "first chunk carries no token")
	var tokenAt []time.Duration
	for i, c := range chunks[1:11] {
		require.NotEmpty(t, *c.Choices[0].Delta.Content, "token %d", i)
		require.Nil(t, c.Choices[0].FinishReason)
		tokenAt = append(tokenAt, events[1+i].at)
	}
	require.Equal(t, "length", *chunks[11].Choices[0].FinishReason)
	require.Equal(t, "", *chunks[11].Choices[0].Delta.Content)
	require.Empty(t, chunks[12].Choices)
	require.Equal(t, &usage{PromptTokens: chunks[12].Usage.PromptTokens, CompletionTokens: 10,
		TotalTokens: chunks[12].Usage.PromptTokens + 10}, chunks[12].Usage)

	// Timing, exact on the bubble's clock.
	require.Zero(t, events[0].at, "role chunk comes before the first-token delay")
	for k, at := range tokenAt {
		require.Equal(t, first+time.Duration(k)*per, at, "token %d", k)
	}

	after := scrapeInstance(t, in)
	const m = "qwen2.5-7b-instruct"
	require.Equal(t, metricValue(t, before, "vllm:request_success_total", "model_name", m, "finished_reason", "length")+1,
		metricValue(t, after, "vllm:request_success_total", "model_name", m, "finished_reason", "length"))
	require.Equal(t, metricValue(t, before, "vllm:generation_tokens_total", "model_name", m)+10,
		metricValue(t, after, "vllm:generation_tokens_total", "model_name", m))
	h0 := histogramOf(t, before, "vllm:time_to_first_token_seconds", m)
	h1 := histogramOf(t, after, "vllm:time_to_first_token_seconds", m)
	require.Equal(t, h0.GetSampleCount()+1, h1.GetSampleCount(), "clock did not move: only the served request")
	require.InDelta(t, first.Seconds(), h1.GetSampleSum()-h0.GetSampleSum(), 1e-9, "float sums, not time")
	i0 := histogramOf(t, before, "vllm:inter_token_latency_seconds", m)
	i1 := histogramOf(t, after, "vllm:inter_token_latency_seconds", m)
	require.Equal(t, i0.GetSampleCount()+9, i1.GetSampleCount())
	require.Equal(t, valueOrZero(t, before, "http_requests_total", "handler", "/v1/chat/completions", "status", "2xx")+1,
		metricValue(t, after, "http_requests_total", "handler", "/v1/chat/completions", "status", "2xx"))
}

func chunks0ID(chunks []chunk, id string) string {
	if len(chunks) == 0 {
		return id
	}
	return chunks[0].ID
}

func TestStreamSlowScalesDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := bubbleFleet(t).Instance(1)
		client := pipenet.Serve(t, in).Client()
		in.SetStreamDelays(40*time.Millisecond, 5*time.Millisecond)
		in.SetSlow(5)
		events, _ := readSSEWith(t, client, "http://vllm.test/v1/chat/completions", `{"max_tokens":3,"stream":true}`)
		require.Equal(t, 200*time.Millisecond, events[1].at, "first token after 5×40ms")
		require.Equal(t, 250*time.Millisecond, events[3].at, "then one every 5×5ms")
	})
}

func TestStreamDerivedDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := bubbleFleet(t).Instance(0)
		client := pipenet.Serve(t, in).Client()
		events, _ := readSSEWith(t, client, "http://vllm.test/v1/chat/completions", `{"max_tokens":5,"stream":true}`)
		require.Len(t, events, 1+5+1+1) // role, tokens, finish, [DONE]; no usage unless asked
		require.Greater(t, events[1].at, time.Millisecond)
		for k := 2; k <= 5; k++ {
			require.Greater(t, events[k].at, events[k-1].at, "token %d paced after token %d", k, k-1)
		}
	})
}

func TestStreamCompletions(t *testing.T) {
	f, _ := startFleet(t, nil)
	f.Instance(0).SetStreamDelays(time.Millisecond, time.Millisecond)
	events, _ := readSSE(t, "http://"+f.Targets()[0]+"/v1/completions",
		`{"model":"llama-3.1-8b-instruct","prompt":"The GPU","max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`)
	require.Len(t, events, 4+1+1)
	var texts []string
	for _, e := range events[:4] {
		var c chunk
		require.NoError(t, json.Unmarshal([]byte(e.data), &c))
		require.Equal(t, "text_completion", c.Object)
		texts = append(texts, *c.Choices[0].Text)
	}
	require.Equal(t, []string{"The", " GPU", " is", " idle"}, texts)
	require.Contains(t, events[3].data, `"finish_reason":"length"`)
	require.Contains(t, events[4].data, `"usage":{"prompt_tokens":`)
	require.Equal(t, "[DONE]", events[5].data)
}

func TestNonStreaming(t *testing.T) {
	f, _ := startFleet(t, nil)
	f.Instance(0).SetStreamDelays(time.Millisecond, time.Millisecond)
	code, body := httpPost(t, "http://"+f.Targets()[0]+"/v1/chat/completions",
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)
	require.Equal(t, 200, code)
	var resp struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role, Content string
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &resp), body)
	require.Equal(t, "chat.completion", resp.Object)
	require.Equal(t, "llama-3.1-8b-instruct", resp.Model, "no model: the first served one")
	require.Equal(t, "The GPU is", resp.Choices[0].Message.Content)
	require.Equal(t, "assistant", resp.Choices[0].Message.Role)
	require.Equal(t, 3, resp.Usage.CompletionTokens)
}

func TestStreamCancelRecordsAbort(t *testing.T) {
	f, _ := startFleet(t, nil)
	in := f.Instance(0)
	in.SetStreamDelays(time.Millisecond, time.Hour)
	before := scrape(t, f, 0)

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+f.Targets()[0]+"/v1/chat/completions",
		strings.NewReader(`{"stream":true,"max_tokens":5}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	sc := bufio.NewScanner(resp.Body)
	tokens := 0
	for tokens < 1 && sc.Scan() {
		if strings.Contains(sc.Text(), `"content":"The"`) {
			tokens++
		}
	}
	cancel()
	resp.Body.Close()

	const m = "llama-3.1-8b-instruct"
	require.Eventually(t, func() bool {
		after := scrape(t, f, 0)
		return metricValue(t, after, "vllm:request_success_total", "model_name", m, "finished_reason", "abort") ==
			metricValue(t, before, "vllm:request_success_total", "model_name", m, "finished_reason", "abort")+1
	}, 5*time.Second, 10*time.Millisecond, "abort recorded once the handler saw the cancellation")
	in.mu.Lock()
	require.Zero(t, in.models[0].inflight)
	in.mu.Unlock()
}

func TestAPIErrorsAndEndpoints(t *testing.T) {
	f, _ := startFleet(t, func(o *FleetOptions) { o.Models = []string{"m1"} })
	base := "http://" + f.Targets()[0]

	code, body := httpPost(t, base+"/v1/chat/completions", `{"model":"gpt-9"}`)
	require.Equal(t, 404, code)
	require.Contains(t, body, "The model `gpt-9` does not exist.")
	code, _ = httpPost(t, base+"/v1/chat/completions", `{"model":`)
	require.Equal(t, 400, code)
	code, _ = httpPost(t, base+"/v1/completions", `{"max_tokens":0}`)
	require.Equal(t, 400, code)
	code, _, _ = httpGet(t, base+"/v1/chat/completions")
	require.Equal(t, 405, code)

	code, body, _ = httpGet(t, base+"/v1/models")
	require.Equal(t, 200, code)
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, OwnedBy string
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &models))
	require.Equal(t, "list", models.Object)
	require.Len(t, models.Data, 1)
	require.Equal(t, "m1", models.Data[0].ID)

	code, body, _ = httpGet(t, base+"/version")
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"version":"0.11.0"}`, body)
	code, _, _ = httpGet(t, base+"/health")
	require.Equal(t, 200, code)

	mfs := scrape(t, f, 0)
	require.Equal(t, 2.0, metricValue(t, mfs, "http_requests_total", "handler", "/v1/chat/completions", "method", "POST", "status", "4xx"),
		"the 404 and the 400 on chat")
	require.Equal(t, 1.0, metricValue(t, mfs, "http_requests_total", "handler", "/v1/completions", "method", "POST", "status", "4xx"))
}

func TestControlEndpoint(t *testing.T) {
	f, clock := startFleet(t, nil)
	in := f.Instance(1)
	url := "http://" + f.Targets()[1] + "/demo/control"

	code, body := httpPost(t, url, `{"slow": 3.0}`)
	require.Equal(t, 200, code, body)
	require.Equal(t, 3.0, in.Slow())
	require.Equal(t, 1.0, f.Instance(0).Slow(), "only that instance")

	code, body = httpPost(t, url, `{"first_token_ms": 300, "per_token_ms": 20}`)
	require.Equal(t, 200, code, body)
	var st ControlState
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, 300.0, st.FirstTokenMS)
	require.Equal(t, 20.0, st.PerTokenMS)

	code, _ = httpPost(t, url, `{"down": true}`)
	require.Equal(t, 200, code)
	require.True(t, in.Down())
	code, _, _ = httpGet(t, "http://"+f.Targets()[1]+"/metrics")
	require.Equal(t, 503, code)
	code, _ = httpPost(t, url, `{"down": false}`)
	require.Equal(t, 200, code)

	clock.Advance(time.Hour)
	code, body = httpPost(t, url, `{"restart": true}`)
	require.Equal(t, 200, code)
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.InDelta(t, float64(clock.Now().Unix()), st.ProcessStartTime, 1)

	for _, bad := range []string{`{"slow": 0}`, `{"slow": -1}`, `{"fast": true}`, `nope`, `{"per_token_ms": -5}`} {
		code, body = httpPost(t, url, bad)
		require.Equal(t, 400, code, bad)
		require.Contains(t, body, "error")
	}
}
