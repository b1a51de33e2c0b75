package config

import (
	"fmt"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
)

// DefaultRemoteQueryTimeout bounds one request to storage.remote_query
// (Prometheus' query timeout).
const DefaultRemoteQueryTimeout = 2 * time.Minute

// DefaultBoxLabels are the external labels that tell one box's series
// from another's in hub mode: the dashboard's box selector lists their
// values.
var DefaultBoxLabels = []string{"box"}

// RemoteQueryConfig is storage.remote_query: hub mode. Queries (the HTTP
// API's PromQL, series, labels and label values), rules, the dashboard
// and the SLO reports read the Prometheus HTTP API at URL (Thanos Query,
// vmselect, Mimir, Prometheus) instead of the local storage, which keeps
// the hub's own data and state (package query, RemoteQuery).
type RemoteQueryConfig struct {
	// URL is the API's root: /api/v1/query is appended to its path
	// (e.g. http://thanos-query:10902 or
	// http://vmselect:8481/select/0/prometheus).
	URL *commoncfg.URL `yaml:"url"`
	// Timeout bounds one request; 0 means DefaultRemoteQueryTimeout.
	Timeout model.Duration `yaml:"timeout,omitempty"`
	// Headers are sent with every request (e.g. X-Scope-OrgID for Mimir).
	Headers map[string]string `yaml:"headers,omitempty"`
	// BoxLabels are the external labels that identify a box (default
	// [box]); the dashboard's box selector lists their values.
	BoxLabels []string `yaml:"box_labels,omitempty"`
	// HTTPClientConfig is Prometheus' HTTP client config: basic_auth,
	// authorization, oauth2, tls_config, proxy_url, follow_redirects,
	// enable_http2.
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:",inline"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *RemoteQueryConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = RemoteQueryConfig{HTTPClientConfig: commoncfg.DefaultHTTPClientConfig}
	type plain RemoteQueryConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if c.URL == nil || c.URL.URL == nil || c.URL.Host == "" {
		return fieldErrorf([]string{"url"}, "remote_query url is required (the root of a Prometheus HTTP API, e.g. http://thanos-query:10902)")
	}
	if s := c.URL.Scheme; s != "http" && s != "https" {
		return fieldErrorf([]string{"url"}, "remote_query url %q: scheme must be http or https", c.URL.String())
	}
	if c.Timeout < 0 {
		return fieldErrorf([]string{"timeout"}, "remote_query timeout must be 0 (the default, %s) or more", DefaultRemoteQueryTimeout)
	}
	for i, l := range c.BoxLabels {
		if !model.LabelName(l).IsValid() {
			return fieldErrorf([]string{"box_labels"}, "remote_query box_labels[%d] %q is not a label name", i, l)
		}
	}
	if err := c.HTTPClientConfig.Validate(); err != nil {
		return fmt.Errorf("remote_query: %w", err)
	}
	return nil
}

// RequestTimeout returns Timeout or its default.
func (c *RemoteQueryConfig) RequestTimeout() time.Duration {
	if c.Timeout > 0 {
		return time.Duration(c.Timeout)
	}
	return DefaultRemoteQueryTimeout
}

// Boxes returns BoxLabels or their default.
func (c *RemoteQueryConfig) Boxes() []string {
	if len(c.BoxLabels) > 0 {
		return c.BoxLabels
	}
	return DefaultBoxLabels
}
