package autodetect

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// Kinds of server, which are also the job names of their scrape jobs.
const (
	KindVLLM   = "vllm"
	KindSGLang = "sglang"
	KindTGI    = "tgi"
	KindTriton = "triton"
	KindOllama = "ollama"
	KindDCGM   = "dcgm"
	KindNode   = "node"
)

// Kinds lists every kind, in the order their jobs are added.
var Kinds = []string{KindVLLM, KindSGLang, KindTGI, KindTriton, KindOllama, KindDCGM, KindNode}

// signatures tell a kind by a metric name prefix its /metrics always has.
// Order matters: the first kind with a match wins, so the model servers
// come before the exporters whose families they could embed.
var signatures = []struct {
	kind   string
	prefix string
}{
	{KindVLLM, "vllm:"},
	{KindSGLang, "sglang:"},
	{KindTGI, "tgi_"},
	{KindTriton, "nv_inference_"},
	{KindDCGM, "DCGM_FI_"},
	{KindNode, "node_exporter_build_info"},
	{KindNode, "node_cpu_seconds_total"},
}

// openAIKinds serve the OpenAI API on the port of their /metrics; an llm
// probe is added for them.
var openAIKinds = map[string]bool{KindVLLM: true, KindSGLang: true, KindTGI: true}

// maxMetricsBody bounds what is read of a /metrics page to recognise it;
// the names that identify a server appear in its first families, and
// tgi.prom, the largest fixture, is 100 KiB.
const maxMetricsBody = 4 << 20

// Found is one recognised server.
type Found struct {
	Kind string
	Port int
	// Evidence says how it was recognised, for discoveredLabels.
	Evidence string
	// Scrape is set when the server has a Prometheus /metrics page.
	Scrape bool
	// Model is the first model of /v1/models, for the llm probe of an
	// OpenAI-compatible server ("" if it lists none).
	Model string
}

// recognize asks what answers on base (http://host:port). It returns
// false for a port that answers nothing it knows, which is then left alone.
func recognize(ctx context.Context, client *http.Client, base string) (Found, bool) {
	if kind, ev, ok := recognizeMetrics(ctx, client, base); ok {
		f := Found{Kind: kind, Evidence: ev, Scrape: true}
		if openAIKinds[kind] {
			f.Model = firstModel(ctx, client, base)
		}
		return f, true
	}
	// Ollama has no /metrics (ollama/ollama#3144); its API says what it is.
	if v, ok := ollamaVersion(ctx, client, base); ok {
		return Found{Kind: KindOllama, Evidence: "GET /api/version answered version " + v}, true
	}
	return Found{}, false
}

func get(ctx context.Context, client *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "appliance-autodetect/1")
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=0.9,*/*;q=0.1")
	return client.Do(req)
}

// recognizeMetrics reads /metrics and looks for a signature among the
// metric names of its sample and TYPE lines.
func recognizeMetrics(ctx context.Context, client *http.Client, base string) (kind, evidence string, ok bool) {
	resp, err := get(ctx, client, base+"/metrics")
	if err != nil {
		return "", "", false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", "", false
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "" && mt != "text/plain" && mt != "application/openmetrics-text" {
		return "", "", false
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, maxMetricsBody))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	best := len(signatures)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("# TYPE ")) {
			line = line[len("# TYPE "):]
		} else if len(line) == 0 || line[0] == '#' {
			continue
		}
		for i := 0; i < best; i++ {
			if bytes.HasPrefix(line, []byte(signatures[i].prefix)) {
				best = i
				break
			}
		}
		if best == 0 {
			break
		}
	}
	if best == len(signatures) {
		return "", "", false
	}
	s := signatures[best]
	return s.kind, fmt.Sprintf("GET /metrics has %s* series", strings.TrimSuffix(s.prefix, "*")), true
}

// firstModel returns the first model id of GET /v1/models, or "".
func firstModel(ctx context.Context, client *http.Client, base string) string {
	resp, err := get(ctx, client, base+"/v1/models")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body) != nil || len(body.Data) == 0 {
		return ""
	}
	return body.Data[0].ID
}

// ollamaVersion asks GET /api/version, which Ollama answers with
// {"version":"0.x.y"}.
func ollamaVersion(ctx context.Context, client *http.Client, base string) (string, bool) {
	resp, err := get(ctx, client, base+"/api/version")
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", false
	}
	var body map[string]json.RawMessage
	if json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body) != nil || len(body) != 1 {
		return "", false
	}
	var v string
	if json.Unmarshal(body["version"], &v) != nil || v == "" {
		return "", false
	}
	return v, true
}
