package probe

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/clock"
	"github.com/aiserve/appliance/config"
)

// FuzzStreamParser feeds the probe's SSE and NDJSON readers arbitrary
// streams. Invariants: no panic; an error is a malformedError (the body is
// a plain reader, so nothing else can fail); at most one text event per
// line; and the result does not depend on how the stream is cut into
// reads (the same bytes one at a time give the same state and error).
func FuzzStreamParser(f *testing.F) {
	for _, name := range []string{"openai-stream.sse", "openai-stream.ollama.sse", "ollama-generate.ndjson"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		f.Add(b, filepath.Ext(name) == ".ndjson")
	}
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n"), false)
	f.Add([]byte(": keep-alive\r\nevent: x\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\r\ndata: \"usage\":{\"completion_tokens\":3}}\r\n\r\n"), false)
	f.Add([]byte("{\"response\":\"a\",\"done\":false}\n{\"done\":true,\"eval_count\":2}\n"), true)
	f.Add([]byte("{\"error\":\"model 'x' not found\"}\n"), true)

	// The clock stands still, so the two reads of a body stamp their
	// events alike.
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	p := &llmProber{cfg: &config.ProbeConfig{Name: "fuzz", URL: "http://llm.test/v1/chat/completions"}, now: clk.Now}
	f.Fuzz(func(t *testing.T, body []byte, ndjson bool) {
		read := p.readSSE
		if ndjson {
			read = p.readNDJSON
		}
		var whole streamState
		err := read(bytes.NewReader(body), &whole)
		if err != nil {
			var me *malformedError
			require.True(t, errors.As(err, &me), "%T %v", err, err)
		}
		require.LessOrEqual(t, whole.events, bytes.Count(body, []byte("\n"))+1)

		var bytewise streamState
		err2 := read(iotest.OneByteReader(bytes.NewReader(body)), &bytewise)
		require.Equal(t, whole, bytewise)
		require.Equal(t, err == nil, err2 == nil, "%v / %v", err, err2)
		if err != nil {
			require.Equal(t, err.Error(), err2.Error())
		}
	})
}
