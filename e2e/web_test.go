package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// writeSelfSigned writes a certificate for 127.0.0.1 and its key into dir.
func writeSelfSigned(t *testing.T, dir string) (certPath, keyPath string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "appliance-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPath, keyPath = filepath.Join(dir, "box.crt"), filepath.Join(dir, "box.key")
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certPath, keyPath, pool
}

// TestTLSAndBasicAuth serves HTTPS with basic auth from the config, and
// status/config shows the config with every secret redacted.
func TestTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	_, _, pool := writeSelfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("open-sesame"), 10)
	require.NoError(t, err)
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`scrape_configs:
  - job_name: gateway
    basic_auth: {username: scraper, password: target-password-123}
    static_configs: [{targets: ["127.0.0.1:1"]}]
web:
  listen_address: %q
  basic_auth_users:
    admin: %q
  tls_server_config:
    cert_file: box.crt
    key_file: box.key
`, addr, string(hash))
	cfgPath := writeConfig(t, dir, cfg)

	p := launch(t, addr, "run", "--config", cfgPath, "--data", filepath.Join(dir, "data"))

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	get := func(path, user, pass string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, 60*time.Second, "HTTPS ready", func() bool {
		code, _ := get("/-/ready", "admin", "open-sesame")
		return code == http.StatusOK
	})
	code, _ := get("/api/v1/query?query=1%2B1", "", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = get("/api/v1/query?query=1%2B1", "admin", "wrong")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body := get("/api/v1/query?query=1%2B1", "admin", "open-sesame")
	require.Equal(t, http.StatusOK, code, body)

	// Plain HTTP on the TLS port is refused.
	resp, err := http.Get("http://" + addr + "/-/healthy")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}

	code, body = get("/api/v1/status/config", "admin", "open-sesame")
	require.Equal(t, http.StatusOK, code, body)
	var r struct {
		Data struct {
			YAML string `json:"yaml"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	require.Contains(t, r.Data.YAML, "job_name: gateway")
	require.NotContains(t, r.Data.YAML, "target-password-123")
	require.NotContains(t, r.Data.YAML, string(hash))
	require.Contains(t, r.Data.YAML, "<secret>")
	require.False(t, strings.Contains(p.Output(), "target-password-123"), "no secret in the logs")
}
