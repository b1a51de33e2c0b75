package config

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

func TestRemoteWriteConfig(t *testing.T) {
	cfg, err := Load([]byte(`
remote_write:
  - url: http://hub:9090/api/v1/write
    name: hub
    remote_timeout: 10s
    headers: {X-Scope-OrgID: lab}
    basic_auth: {username: u, password: p}
    write_relabel_configs:
      - {source_labels: [__name__], regex: "go_.*", action: drop}
    queue_config: {max_samples_per_send: 500, batch_send_deadline: 1s, min_backoff: 10ms, max_backoff: 1s, retry_on_http_429: true}
    protobuf_message: io.prometheus.write.v2.Request
    max_disk_bytes: 64MiB
  - url: http://lts:8428/api/v1/write
`), "x.yml")
	require.NoError(t, err)
	require.Len(t, cfg.RemoteWrite, 2)
	hub := cfg.RemoteWrite[0]
	require.Equal(t, "hub", hub.QueueName())
	require.Equal(t, model.Duration(10*time.Second), hub.RemoteTimeout)
	require.Equal(t, "lab", hub.Headers["X-Scope-OrgID"])
	require.Equal(t, "u", hub.HTTPClientConfig.BasicAuth.Username)
	require.Len(t, hub.WriteRelabelConfigs, 1)
	require.Equal(t, 500, hub.QueueConfig.MaxSamplesPerSend)
	require.Equal(t, 50, hub.QueueConfig.MaxShards) // Prometheus' default
	require.True(t, hub.QueueConfig.RetryOnRateLimit)
	require.Equal(t, "io.prometheus.write.v2.Request", string(hub.ProtobufMessage))
	require.Equal(t, Bytes(64<<20), hub.MaxDiskBytes)

	lts := cfg.RemoteWrite[1]
	require.Len(t, lts.QueueName(), 6)
	require.Equal(t, DefaultRemoteWriteMaxDiskBytes, lts.MaxDiskBytes)
	require.Equal(t, "prometheus.WriteRequest", string(lts.ProtobufMessage))
	require.True(t, lts.QueueConfig.RetryOnRateLimit)
	// Secrets are redacted when printed.
	require.Contains(t, cfg.String(), "max_disk_bytes: 64MiB")
	require.NotContains(t, cfg.String(), "password: p\n")
	cfg, err = Load([]byte("remote_write: [{url: http://x/w, queue_config: {retry_on_http_429: false}}]"), "x.yml")
	require.NoError(t, err)
	require.False(t, cfg.RemoteWrite[0].QueueConfig.RetryOnRateLimit)

	for data, want := range map[string]string{
		"remote_write: [{url: http://x/w, queue_config: {max_shard: 1}}]":        `unknown field "max_shard"`,
		"remote_write: [{url: http://x/w, max_disk_bytes: 10xB}]":                "invalid size",
		"remote_write: [{url: http://x/w, protobuf_message: foo}]":               "foo",
		"remote_write: [{url: http://x/w, name: a}, {url: http://y/w, name: a}]": `multiple remote write configs with name "a"`,
		"remote_write: [{remote_timeout: 1s}]":                                   "url",
		"remote_write: [{url: \"http://u:pw@x/w\", max_disk_bytes: 0}]":          "remote_write http://u:xxxxx@x/w: max_disk_bytes",
	} {
		_, err := Load([]byte(data), "x.yml")
		require.ErrorContains(t, err, want, data)
	}
}
