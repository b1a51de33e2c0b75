package probe

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aiserve/appliance/config"
)

// httpConfig loads one http probe from YAML, so defaults apply as in a file.
func httpConfig(t *testing.T, yaml string) *config.ProbeConfig {
	t.Helper()
	cfg, err := config.Load([]byte("probes:\n  - name: web\n    kind: http\n"+yaml), "")
	require.NoError(t, err)
	return cfg.Probes[0]
}

func TestHTTPProbeStatusAndBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			_, _ = io.WriteString(w, `{"status":"healthy"}`)
		case "/created":
			w.WriteHeader(http.StatusCreated)
		case "/post":
			b, _ := io.ReadAll(r.Body)
			if r.Method != http.MethodPost || string(b) != `{"q":1}` || r.Header.Get("X-Key") != "k" {
				http.Error(w, "bad", http.StatusBadRequest)
				return
			}
			_, _ = io.WriteString(w, "ok")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	f := func(yaml string, success bool, reason string, status int) {
		t.Helper()
		r := runProbe(t, httpConfig(t, yaml))
		require.Equal(t, success, r.Success, "%s: %s %v", yaml, r.Reason, r.Err)
		require.Equal(t, reason, r.Reason, yaml)
		require.Equal(t, status, r.StatusCode, yaml)
		require.Positive(t, r.Duration, yaml)
		require.Len(t, r.Phases, len(Phases))
		require.Positive(t, r.Phases["connect"], yaml)
	}
	f(fmt.Sprintf("    url: %s/health\n", srv.URL), true, "", 200)
	f(fmt.Sprintf("    url: %s/health\n    expect_body: 'status\":\\s*\"healthy'\n", srv.URL), true, "", 200)
	f(fmt.Sprintf("    url: %s/health\n    expect_body: unhealthy\n", srv.URL), false, ReasonBody, 200)
	f(fmt.Sprintf("    url: %s/missing\n", srv.URL), false, ReasonHTTPStatus, 404)
	f(fmt.Sprintf("    url: %s/missing\n    expect_status: [404]\n", srv.URL), true, "", 404)
	f(fmt.Sprintf("    url: %s/created\n    expect_status: [200]\n", srv.URL), false, ReasonHTTPStatus, 201)
	f(fmt.Sprintf("    url: %s/post\n    method: POST\n    body: '{\"q\":1}'\n    headers: {X-Key: k}\n", srv.URL), true, "", 200)
}

// TestHTTPProbeTimeout: a server that never answers fails the probe with
// reason timeout exactly at its timeout (in a synctest bubble).
func TestHTTPProbeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		})
		r := bubbleProbe(t, h, httpConfig(t, "    url: http://web.test/\n    timeout: 300ms\n"))
		require.False(t, r.Success)
		require.Equal(t, ReasonTimeout, r.Reason, "%v", r.Err)
		require.Equal(t, 300*time.Millisecond, r.Duration)
	})
}

func TestHTTPProbeConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	r := runProbe(t, httpConfig(t, fmt.Sprintf("    url: http://%s/\n", addr)))
	require.Equal(t, ReasonConnection, r.Reason, "%v", r.Err)
	require.Zero(t, r.StatusCode)
}

// TestHTTPProbeTLSExpiry serves HTTPS with a certificate whose expiry the
// test chose and checks probe_ssl_earliest_cert_expiry's value.
func TestHTTPProbeTLSExpiry(t *testing.T) {
	notAfter := time.Now().Add(10 * 24 * time.Hour).Truncate(time.Second).UTC()
	cert := selfSigned(t, notAfter)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()

	// Unverified: the self-signed certificate is refused.
	r := runProbe(t, httpConfig(t, fmt.Sprintf("    url: %s/\n", srv.URL)))
	require.Equal(t, ReasonConnection, r.Reason, "%v", r.Err)

	c := httpConfig(t, fmt.Sprintf("    url: %s/\n    tls_config: {insecure_skip_verify: true}\n", srv.URL))
	r = runProbe(t, c)
	require.True(t, r.Success, "%s: %v", r.Reason, r.Err)
	require.True(t, notAfter.Equal(r.CertExpiry), "expiry %s, want %s", r.CertExpiry, notAfter)
	require.Positive(t, r.Phases["tls"])

	var expiry float64
	for _, s := range samples(c, &r) {
		if s.fam == famCertExpiry {
			expiry = s.v
		}
	}
	require.Equal(t, float64(notAfter.Unix()), expiry)
}

func selfSigned(t *testing.T, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "probe-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestHTTPProbeHeadersAreNotInErrors(t *testing.T) {
	c := httpConfig(t, "    url: http://user:pw@127.0.0.1:1/\n    headers: {Authorization: Bearer s3cret}\n")
	r := runProbe(t, c)
	require.Error(t, r.Err)
	require.False(t, strings.Contains(r.Err.Error(), "s3cret") || strings.Contains(r.Err.Error(), ":pw@"), r.Err.Error())
}
