package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	yaml3 "go.yaml.in/yaml/v3"
)

// Probe kinds.
const (
	ProbeKindHTTP = "http"
	ProbeKindLLM  = "llm"
)

// LLMEndpoints are the URL paths an llm probe may end in: the OpenAI
// streaming APIs most model servers speak, and Ollama's native ones.
var LLMEndpoints = []string{"/v1/chat/completions", "/v1/completions", "/api/generate", "/api/chat"}

// Probe defaults. They keep a probe cheap for the server it watches: one
// request every 30 s, a prompt of a few tokens and 16 tokens of answer
// (enough for a stable time per output token, short enough that the probe
// holds a batch slot for well under a second on a GPU).
var (
	DefaultProbeInterval         = model.Duration(30 * time.Second)
	DefaultHTTPProbeTimeout      = model.Duration(10 * time.Second)
	DefaultLLMProbeTimeout       = model.Duration(20 * time.Second)
	DefaultLLMProbePrompt        = "Reply with one short sentence."
	DefaultLLMProbeMaxTokens     = 16
	DefaultTTFTThreshold         = model.Duration(2 * time.Second)
	DefaultHTTPDurationThreshold = model.Duration(2 * time.Second)
	DefaultLLMDurationThreshold  = model.Duration(10 * time.Second)
)

// maxProbeTokens bounds max_tokens: a probe is a health check, not a load
// test.
const maxProbeTokens = 4096

// ProbeConfig is one entry of the probes section: an outside-in HTTP or
// LLM streaming probe. A ProbeConfig returned by Load has its defaults
// applied and is valid.
type ProbeConfig struct {
	// Name is the value of the probe label on every series of the probe.
	Name string `yaml:"name"`
	// Kind is http or llm.
	Kind string `yaml:"kind"`
	// URL is the full URL of the endpoint, for llm probes ending in one of
	// LLMEndpoints.
	URL      string         `yaml:"url"`
	Interval model.Duration `yaml:"interval"`
	// Timeout bounds one probe run; it is at most Interval, so runs of one
	// probe never overlap.
	Timeout model.Duration `yaml:"timeout"`
	// Headers are sent with every request. Values are secrets (they often
	// carry an API key) and print as <secret>.
	Headers   map[string]commoncfg.Secret `yaml:"headers,omitempty"`
	TLSConfig commoncfg.TLSConfig         `yaml:"tls_config,omitempty"`

	// HTTP probes.
	Method string `yaml:"method,omitempty"`
	Body   string `yaml:"body,omitempty"`
	// ExpectStatus lists the status codes that count as success; empty
	// means any 2xx.
	ExpectStatus []int `yaml:"expect_status,omitempty"`
	// ExpectBody is a regular expression the body must match (anywhere).
	ExpectBody string `yaml:"expect_body,omitempty"`

	// LLM probes.
	Model     string `yaml:"model,omitempty"`
	Prompt    string `yaml:"prompt,omitempty"`
	MaxTokens int    `yaml:"max_tokens,omitempty"`

	// Thresholds of the probes rule pack: the P95 over 15 minutes of the
	// time to first token (llm) and of the whole request above them is P1.
	// Written as probe_ttft_threshold_seconds and
	// probe_duration_threshold_seconds so the rules compare per probe.
	TTFTThreshold     model.Duration `yaml:"ttft_threshold,omitempty"`
	DurationThreshold model.Duration `yaml:"duration_threshold,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler. Errors quote the offending
// value so that the loader finds its line (the probes section is a list,
// whose items have no key path of their own).
func (c *ProbeConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = ProbeConfig{}
	type plain ProbeConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	return c.Validate()
}

// Validate applies the defaults and checks the probe, as Load does for
// the probes of a file; callers that build probes themselves
// (auto-detection) call it.
func (c *ProbeConfig) Validate() error {
	if c.Name == "" {
		return fmt.Errorf("probe with url %q: name is required", RedactURLPasswords(c.URL))
	}
	if !utf8.ValidString(c.Name) {
		return fmt.Errorf("probe name %q is not valid UTF-8", c.Name)
	}
	if c.URL == "" {
		return fmt.Errorf("probe %s: url is required", c.Name)
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("probe %s: url %q is not an http:// or https:// URL with a host", c.Name, RedactURLPasswords(c.URL))
	}
	if c.Interval == 0 {
		c.Interval = DefaultProbeInterval
	}
	if c.Interval < 0 {
		return fmt.Errorf("probe %s: interval %q must be greater than 0", c.Name, c.Interval)
	}
	switch c.Kind {
	case ProbeKindHTTP:
		return c.validateHTTP()
	case ProbeKindLLM:
		return c.validateLLM(u)
	case "":
		return fmt.Errorf("probe %s: kind is required: http or llm", c.Name)
	}
	return fmt.Errorf("probe %s: unknown kind %q; want http or llm", c.Name, c.Kind)
}

func (c *ProbeConfig) setTimeout(def model.Duration) error {
	if c.Timeout == 0 {
		c.Timeout = min(def, c.Interval)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("probe %s: timeout %q must be greater than 0", c.Name, c.Timeout)
	}
	if c.Timeout > c.Interval {
		return fmt.Errorf("probe %s: timeout %q is longer than the interval %s; one probe never runs twice at once", c.Name, c.Timeout, c.Interval)
	}
	return nil
}

func (c *ProbeConfig) validateHTTP() error {
	if err := c.setTimeout(DefaultHTTPProbeTimeout); err != nil {
		return err
	}
	for _, k := range []struct {
		key string
		set bool
	}{{"model", c.Model != ""}, {"prompt", c.Prompt != ""}, {"max_tokens", c.MaxTokens != 0}, {"ttft_threshold", c.TTFTThreshold != 0}} {
		if k.set {
			return fmt.Errorf("probe %s: %s is only for kind llm", c.Name, k.key)
		}
	}
	if c.Method == "" {
		c.Method = "GET"
	}
	if c.Method != strings.ToUpper(c.Method) || strings.ContainsAny(c.Method, " \t") {
		return fmt.Errorf("probe %s: method %q must be an upper-case HTTP method such as GET or POST", c.Name, c.Method)
	}
	for _, s := range c.ExpectStatus {
		if s < 100 || s > 599 {
			return fmt.Errorf("probe %s: expect_status %d is not an HTTP status code", c.Name, s)
		}
	}
	if c.ExpectBody != "" {
		if _, err := regexp.Compile(c.ExpectBody); err != nil {
			return fmt.Errorf("probe %s: expect_body %q: %w", c.Name, c.ExpectBody, err)
		}
	}
	if c.DurationThreshold == 0 {
		c.DurationThreshold = DefaultHTTPDurationThreshold
	}
	return c.validateThresholds()
}

func (c *ProbeConfig) validateLLM(u *url.URL) error {
	if err := c.setTimeout(DefaultLLMProbeTimeout); err != nil {
		return err
	}
	if c.APIPath(u) == "" {
		return fmt.Errorf("probe %s: url %q must end in one of %s for kind llm", c.Name, RedactURLPasswords(c.URL), strings.Join(LLMEndpoints, ", "))
	}
	for _, k := range []struct {
		key string
		set bool
	}{{"method", c.Method != ""}, {"body", c.Body != ""}, {"expect_status", len(c.ExpectStatus) > 0}, {"expect_body", c.ExpectBody != ""}} {
		if k.set {
			return fmt.Errorf("probe %s: %s is only for kind http", c.Name, k.key)
		}
	}
	if c.Prompt == "" {
		c.Prompt = DefaultLLMProbePrompt
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = DefaultLLMProbeMaxTokens
	}
	if c.MaxTokens < 0 || c.MaxTokens > maxProbeTokens {
		return fmt.Errorf("probe %s: max_tokens %d must be between 1 and %d", c.Name, c.MaxTokens, maxProbeTokens)
	}
	if c.TTFTThreshold == 0 {
		c.TTFTThreshold = DefaultTTFTThreshold
	}
	if c.DurationThreshold == 0 {
		c.DurationThreshold = DefaultLLMDurationThreshold
	}
	return c.validateThresholds()
}

func (c *ProbeConfig) validateThresholds() error {
	if c.TTFTThreshold < 0 {
		return fmt.Errorf("probe %s: ttft_threshold %q must be greater than 0", c.Name, c.TTFTThreshold)
	}
	if c.DurationThreshold < 0 {
		return fmt.Errorf("probe %s: duration_threshold %q must be greater than 0", c.Name, c.DurationThreshold)
	}
	return nil
}

// APIPath returns which of LLMEndpoints the URL ends in, or "".
func (c *ProbeConfig) APIPath(u *url.URL) string {
	if u == nil {
		var err error
		if u, err = url.Parse(c.URL); err != nil {
			return ""
		}
	}
	p := strings.TrimSuffix(u.Path, "/")
	for _, e := range LLMEndpoints {
		if strings.HasSuffix(p, e) {
			return e
		}
	}
	return ""
}

// SetDirectory resolves the relative paths of the TLS settings against dir.
// A nil ProbeConfig (an item that did not decode) is left alone.
func (c *ProbeConfig) SetDirectory(dir string) {
	if c != nil {
		c.TLSConfig.SetDirectory(dir)
	}
}

// ErrDuplicateProbe is returned by ValidateProbes for two probes with one
// name.
var ErrDuplicateProbe = errors.New("duplicate probe name")

// ValidateProbes checks what no single probe can: that names are unique.
// Load reports the same problem with its line; callers that build probes
// themselves (auto-detection) use this.
func ValidateProbes(probes []*ProbeConfig) error {
	seen := map[string]bool{}
	for _, p := range probes {
		if seen[p.Name] {
			return fmt.Errorf("%w %q", ErrDuplicateProbe, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// checkProbes reports probes sharing a name, at the line of the second
// name. n is the probes section.
func (l *loader) checkProbes(n *yaml3.Node, probes []*ProbeConfig) {
	n = deref(n)
	if n == nil || n.Kind != yaml3.SequenceNode || len(n.Content) != len(probes) {
		return
	}
	first := map[string]int{}
	for i, item := range n.Content {
		line := keyLine(item, "name")
		if at, dup := first[probes[i].Name]; dup {
			l.errorf(line, "probe name %q is used twice (first at line %d); every probe needs its own name", probes[i].Name, at)
			continue
		}
		first[probes[i].Name] = line
	}
}
