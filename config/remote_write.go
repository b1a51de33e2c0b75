package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	promconfig "github.com/prometheus/prometheus/config"
	yaml2 "go.yaml.in/yaml/v2"
)

// DefaultRemoteWriteMaxDiskBytes bounds a remote's on-disk queue when its
// entry gives no max_disk_bytes: at about 3 bytes a sample on disk, 1 GiB
// holds an hour of 100k series scraped every 15 s many times over.
const DefaultRemoteWriteMaxDiskBytes = Bytes(1 << 30)

// RemoteWriteConfigs is the remote_write section: Prometheus' entries,
// each with the appliance's max_disk_bytes.
type RemoteWriteConfigs []*RemoteWriteConfig

// RemoteWriteConfig is one remote_write entry. Every key is Prometheus'
// (promconfig.RemoteWriteConfig, parsed by Prometheus' own code: url,
// remote_timeout, headers, write_relabel_configs, name, basic_auth,
// authorization, oauth2, tls_config, proxy settings, queue_config,
// protobuf_message, ...) except max_disk_bytes: the bound of the remote's
// durable queue in the data dir; when full, the oldest samples are
// dropped and counted (prometheus_remote_storage_samples_dropped_total).
// One default differs from Prometheus': queue_config.retry_on_http_429 is
// true unless the entry sets it.
type RemoteWriteConfig struct {
	promconfig.RemoteWriteConfig `yaml:",inline"`
	MaxDiskBytes                 Bytes `yaml:"max_disk_bytes,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler: max_disk_bytes is taken out,
// and the rest is decoded strictly by Prometheus' RemoteWriteConfig, with
// its defaults and checks.
func (c *RemoteWriteConfig) UnmarshalYAML(unmarshal func(any) error) error {
	var raw struct {
		MaxDiskBytes *Bytes         `yaml:"max_disk_bytes"`
		Rest         map[string]any `yaml:",inline"`
	}
	if err := unmarshal(&raw); err != nil {
		return err
	}
	b, err := yaml2.Marshal(raw.Rest)
	if err != nil {
		return fmt.Errorf("remote_write: %w", err)
	}
	var pc promconfig.RemoteWriteConfig
	if err := yaml2.UnmarshalStrict(b, &pc); err != nil {
		return err
	}
	*c = RemoteWriteConfig{RemoteWriteConfig: pc, MaxDiskBytes: DefaultRemoteWriteMaxDiskBytes}
	// 429 is retried unless the entry says otherwise (Prometheus drops
	// by default): a receiver that sheds load loses nothing.
	qc, _ := raw.Rest["queue_config"].(map[any]any)
	if _, set := qc["retry_on_http_429"]; !set {
		c.QueueConfig.RetryOnRateLimit = true
	}
	if raw.MaxDiskBytes != nil {
		c.MaxDiskBytes = *raw.MaxDiskBytes
	}
	// The URL as errors print it: without a password.
	u := c.URL.Redacted()
	if c.MaxDiskBytes <= 0 {
		return fmt.Errorf("remote_write %s: max_disk_bytes must be greater than 0", u)
	}
	if err := c.QueueConfig.Validate(); err != nil {
		return fmt.Errorf("remote_write %s: %w", u, err)
	}
	if c.QueueConfig.MaxSamplesPerSend <= 0 {
		return fmt.Errorf("remote_write %s: queue_config max_samples_per_send must be greater than 0", u)
	}
	return nil
}

// MarshalYAML implements yaml.Marshaler: Prometheus' keys (secrets
// redacted by its types) and max_disk_bytes.
func (c RemoteWriteConfig) MarshalYAML() (any, error) {
	b, err := yaml2.Marshal(&c.RemoteWriteConfig)
	if err != nil {
		return nil, err
	}
	var m yaml2.MapSlice
	if err := yaml2.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return append(m, yaml2.MapItem{Key: "max_disk_bytes", Value: c.MaxDiskBytes}), nil
}

// QueueName names the remote's queue directory under
// <data dir>/remote_write/ and is its remote_name label: its name, or for
// an unnamed remote the first 6 hex digits of a hash of its URL. (Prometheus
// hashes the whole entry; the URL alone keeps the queue, and what it holds,
// when a reload changes another key.)
func (c *RemoteWriteConfig) QueueName() string {
	if c.Name != "" {
		return c.Name
	}
	u := ""
	if c.URL != nil {
		u = c.URL.String()
	}
	sum := sha256.Sum256([]byte(u))
	return hex.EncodeToString(sum[:])[:6]
}

// check refuses two entries with the same name, as Prometheus does.
func (cs RemoteWriteConfigs) check() error {
	seen := map[string]bool{}
	for _, c := range cs {
		if c == nil {
			return fmt.Errorf("remote_write: empty entry")
		}
		n := c.QueueName()
		if seen[n] {
			return fmt.Errorf("remote_write: found multiple remote write configs with name %q", n)
		}
		seen[n] = true
	}
	return nil
}
