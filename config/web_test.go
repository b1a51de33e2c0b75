package config

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// TestWebBounds: the connection and timeout keys, their defaults and
// what is refused.
func TestWebBounds(t *testing.T) {
	p := filepath.Join(t.TempDir(), "appliance.yml")
	require.NoError(t, os.WriteFile(p, []byte("web:\n  listen_address: \":9090\"\n"), 0o644))
	cfg, err := LoadFile(p)
	require.NoError(t, err)
	require.Equal(t, 512, cfg.Web.MaxConnections)
	require.Equal(t, model.Duration(time.Minute), cfg.Web.ReadTimeout)
	require.Equal(t, model.Duration(2*time.Minute), cfg.Web.IdleTimeout)
	require.Zero(t, cfg.Web.WriteTimeout)

	require.NoError(t, os.WriteFile(p, []byte("web:\n  max_connections: 64\n  read_timeout: 5s\n  write_timeout: 10m\n"), 0o644))
	cfg, err = LoadFile(p)
	require.NoError(t, err)
	require.Equal(t, 64, cfg.Web.MaxConnections)
	require.Equal(t, model.Duration(10*time.Minute), cfg.Web.WriteTimeout)

	for body, msg := range map[string]string{
		"web:\n  max_connections: 0\n": "max_connections must be greater than 0",
		"web:\n  read_timeout: 0s\n":   "read_timeout and idle_timeout must be greater than 0",
	} {
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		_, err = LoadFile(p)
		require.ErrorContains(t, err, msg)
	}
}

// TestTLSVersionsAndSuites: min_version and cipher_suites as in
// Prometheus' web config; the default offers no CBC or SHA-1 suite.
func TestTLSVersionsAndSuites(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	p := filepath.Join(dir, "appliance.yml")
	write := func(extra string) {
		require.NoError(t, os.WriteFile(p, []byte("web:\n  tls_server_config:\n    cert_file: server.crt\n    key_file: server.key\n"+extra), 0o644))
	}
	write("")
	cfg, err := LoadFile(p)
	require.NoError(t, err)
	tc, err := cfg.Web.TLSServerConfig.TLSConfig()
	require.NoError(t, err)
	require.Equal(t, uint16(tls.VersionTLS12), tc.MinVersion)
	for _, id := range tc.CipherSuites {
		name := tls.CipherSuiteName(id)
		require.NotContains(t, name, "CBC")
		require.False(t, strings.HasSuffix(name, "_SHA"), "%s uses SHA-1", name)
	}

	write("    min_version: TLS13\n    cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n")
	cfg, err = LoadFile(p)
	require.NoError(t, err)
	tc, err = cfg.Web.TLSServerConfig.TLSConfig()
	require.NoError(t, err)
	require.Equal(t, uint16(tls.VersionTLS13), tc.MinVersion)
	require.Equal(t, []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}, tc.CipherSuites)

	write("    min_version: TLS10\n")
	_, err = LoadFile(p)
	require.ErrorContains(t, err, "invalid min_version")
	write("    cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n")
	_, err = LoadFile(p)
	require.ErrorContains(t, err, "unknown or insecure cipher suite")
}

func TestRedactURLPasswords(t *testing.T) {
	require.Equal(t, "url: http://u:<secret>@host:1/x and https://a:<secret>@b/",
		RedactURLPasswords("url: http://u:PASS@host:1/x and https://a:p%40ss@b/"))
	require.Equal(t, "http://host/a:b@c", RedactURLPasswords("http://host/a:b@c"), "no userinfo")
	require.Equal(t, "http://u@host/", RedactURLPasswords("http://u@host/"), "no password")
}
