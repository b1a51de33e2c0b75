package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRemoteQuery: storage.remote_query takes a URL, Prometheus' HTTP
// client keys, headers and box labels; the timeout and box labels have
// defaults; without a url it is refused with the line.
func TestRemoteQuery(t *testing.T) {
	cfg, err := Load([]byte(`storage:
  remote_query:
    url: https://thanos-query:10902/prefix
    headers: {X-Scope-OrgID: fleet}
    basic_auth: {username: hub, password: secret}
`), "hub.yml")
	require.NoError(t, err)
	rq := cfg.Storage.RemoteQuery
	require.NotNil(t, rq)
	require.Equal(t, "https://thanos-query:10902/prefix", rq.URL.String())
	require.Equal(t, "fleet", rq.Headers["X-Scope-OrgID"])
	require.Equal(t, "hub", rq.HTTPClientConfig.BasicAuth.Username)
	require.Equal(t, DefaultRemoteQueryTimeout, rq.RequestTimeout())
	require.Equal(t, []string{"box"}, rq.Boxes())
	require.NotContains(t, cfg.String(), "password: secret")

	cfg, err = Load([]byte("storage:\n  remote_query: {url: http://q:9090, timeout: 5s, box_labels: [cluster, box]}\n"), "hub.yml")
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, cfg.Storage.RemoteQuery.RequestTimeout())
	require.Equal(t, []string{"cluster", "box"}, cfg.Storage.RemoteQuery.Boxes())

	_, err = Load([]byte("storage:\n  path: x\n  remote_query:\n    timeout: 5s\n"), "hub.yml")
	require.ErrorContains(t, err, "hub.yml:3: remote_query url is required")

	cfg, err = Load([]byte("storage: {path: x}\n"), "hub.yml")
	require.NoError(t, err)
	require.Nil(t, cfg.Storage.RemoteQuery)
}
