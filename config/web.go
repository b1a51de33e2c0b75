package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"golang.org/x/crypto/bcrypt"
)

// DefaultWebConfig is the web section when the file leaves it out.
var DefaultWebConfig = WebConfig{
	ListenAddress:       ":9090",
	MaxRequestBodyBytes: 32 << 20,
	MaxConnections:      512,
	ReadTimeout:         model.Duration(time.Minute),
	IdleTimeout:         model.Duration(2 * time.Minute),
}

// WebConfig is the web section. Its auth keys follow Prometheus' web
// configuration file (exporter-toolkit), so an existing web.yml fits.
type WebConfig struct {
	ListenAddress string `yaml:"listen_address"`
	ExternalURL   string `yaml:"external_url,omitempty"`
	// BasicAuthUsers maps a user name to the bcrypt hash of the password.
	// Hashes are Secrets so that they print as <secret>.
	BasicAuthUsers  map[string]commoncfg.Secret `yaml:"basic_auth_users,omitempty"`
	TLSServerConfig *TLSServerConfig            `yaml:"tls_server_config,omitempty"`
	// MaxRequestBodyBytes bounds the body of ingest requests (remote
	// write, import).
	MaxRequestBodyBytes Bytes `yaml:"max_request_body_bytes"`

	// MaxConnections bounds the connections served at once, as
	// Prometheus' --web.max-connections (default 512). It is lowered
	// further when the file descriptor limit is low, so that sockets
	// never take the descriptors the storage needs.
	MaxConnections int `yaml:"max_connections"`
	// ReadTimeout bounds reading one request, body included (default
	// 1m: a 32 MiB import needs 0.6 MB/s; a client sending its body
	// slower is closed).
	ReadTimeout model.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds one request from the end of its headers to the
	// end of the answer. 0 (the default) takes query.timeout plus one
	// minute, so that no query the engine allows is cut off.
	WriteTimeout model.Duration `yaml:"write_timeout,omitempty"`
	// IdleTimeout closes a keep-alive connection that sends no new
	// request (default 2m, longer than the 90 s Go and Grafana clients
	// keep idle connections, so the server does not close one a client
	// is about to reuse).
	IdleTimeout model.Duration `yaml:"idle_timeout"`
}

// TLSServerConfig serves HTTPS. Relative paths are resolved against the
// directory of the configuration file when it is loaded.
type TLSServerConfig struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file,omitempty"`
	// ClientAuthType is one of Go's tls.ClientAuthType names:
	// NoClientCert (default), RequestClientCert, RequireAnyClientCert,
	// VerifyClientCertIfGiven, RequireAndVerifyClientCert.
	ClientAuthType string `yaml:"client_auth_type,omitempty"`
	// MinVersion is the lowest TLS version offered, as in Prometheus'
	// web config: TLS12 (default) or TLS13.
	MinVersion string `yaml:"min_version,omitempty"`
	// CipherSuites lists the TLS 1.2 suites offered, by Go's names
	// (tls.CipherSuiteName); empty offers Go's secure default suites
	// without CBC-SHA1. TLS 1.3 suites are not configurable.
	CipherSuites []string `yaml:"cipher_suites,omitempty"`
}

var tlsVersions = map[string]uint16{"": tls.VersionTLS12, "TLS12": tls.VersionTLS12, "TLS13": tls.VersionTLS13}

// defaultCipherSuites are the TLS 1.2 suites offered when cipher_suites is
// empty: forward secret AEAD suites only (no CBC, no SHA-1), as Mozilla's
// intermediate profile.
var defaultCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// cipherSuites maps the configured names to Go's suite IDs; insecure
// suites (tls.InsecureCipherSuites) are refused.
func cipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return defaultCipherSuites, nil
	}
	known := map[string]uint16{}
	for _, cs := range tls.CipherSuites() {
		known[cs.Name] = cs.ID
	}
	ids := make([]uint16, 0, len(names))
	for _, n := range names {
		id, ok := known[n]
		if !ok {
			var all []string
			for _, cs := range tls.CipherSuites() {
				all = append(all, cs.Name)
			}
			return nil, fmt.Errorf("unknown or insecure cipher suite %q; want one of %s", n, strings.Join(all, ", "))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

var clientAuthTypes = map[string]tls.ClientAuthType{
	"":                           tls.NoClientCert,
	"NoClientCert":               tls.NoClientCert,
	"RequestClientCert":          tls.RequestClientCert,
	"RequireAnyClientCert":       tls.RequireAnyClientCert,
	"VerifyClientCertIfGiven":    tls.VerifyClientCertIfGiven,
	"RequireAndVerifyClientCert": tls.RequireAndVerifyClientCert,
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *WebConfig) UnmarshalYAML(unmarshal func(any) error) error {
	*c = DefaultWebConfig
	type plain WebConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.ListenAddress); err != nil {
		return fieldErrorf([]string{"listen_address"}, "invalid listen_address %q: %w", c.ListenAddress, err)
	}
	if c.ExternalURL != "" {
		u, err := url.Parse(c.ExternalURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fieldErrorf([]string{"external_url"}, "invalid external_url %q: want an absolute http or https URL such as https://box.example.com/", c.ExternalURL)
		}
	}
	users := make([]string, 0, len(c.BasicAuthUsers))
	for u := range c.BasicAuthUsers {
		users = append(users, u)
	}
	sort.Strings(users)
	for _, u := range users {
		// bcrypt's errors name at most one byte of the hash, never the
		// password it protects.
		if _, err := bcrypt.Cost([]byte(c.BasicAuthUsers[u])); err != nil {
			return fieldErrorf([]string{"basic_auth_users", u},
				"basic_auth_users: the password of user %q is not a bcrypt hash (%v); generate one with: htpasswd -nBC 10 \"\" | tr -d ':\\n'", u, err)
		}
	}
	if c.MaxRequestBodyBytes <= 0 {
		return fieldErrorf([]string{"max_request_body_bytes"}, "max_request_body_bytes must be greater than 0")
	}
	if c.MaxConnections <= 0 {
		return fieldErrorf([]string{"max_connections"}, "max_connections must be greater than 0 (default 512)")
	}
	for _, d := range []struct {
		key string
		v   model.Duration
	}{{"read_timeout", c.ReadTimeout}, {"write_timeout", c.WriteTimeout}, {"idle_timeout", c.IdleTimeout}} {
		if d.v < 0 {
			return fieldErrorf([]string{d.key}, "%s must not be negative", d.key)
		}
	}
	if c.ReadTimeout == 0 || c.IdleTimeout == 0 {
		return fieldErrorf([]string{"read_timeout"}, "read_timeout and idle_timeout must be greater than 0: without them a client can hold a connection forever")
	}
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *TLSServerConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain TLSServerConfig
	if err := unmarshal((*plain)(c)); err != nil {
		return err
	}
	// The keys are relative to web, the mapping decoded as a whole.
	key := func(k string) []string { return []string{"tls_server_config", k} }
	switch {
	case c.CertFile == "":
		return fieldErrorf(key("cert_file"), "tls_server_config: cert_file is required")
	case c.KeyFile == "":
		return fieldErrorf(key("key_file"), "tls_server_config: key_file is required")
	}
	auth, ok := clientAuthTypes[c.ClientAuthType]
	if !ok {
		return fieldErrorf(key("client_auth_type"), "tls_server_config: invalid client_auth_type %q; want one of NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert", c.ClientAuthType)
	}
	verifies := auth == tls.VerifyClientCertIfGiven || auth == tls.RequireAndVerifyClientCert
	switch {
	case verifies && c.ClientCAFile == "":
		return fieldErrorf(key("client_auth_type"), "tls_server_config: client_auth_type %s needs client_ca_file", c.ClientAuthType)
	case !verifies && c.ClientCAFile != "":
		return fieldErrorf(key("client_ca_file"), "tls_server_config: client_ca_file is set but client_auth_type does not verify client certificates; set client_auth_type: RequireAndVerifyClientCert")
	}
	if _, ok := tlsVersions[c.MinVersion]; !ok {
		return fieldErrorf(key("min_version"), "tls_server_config: invalid min_version %q; want TLS12 or TLS13", c.MinVersion)
	}
	if _, err := cipherSuites(c.CipherSuites); err != nil {
		return fieldErrorf(key("cipher_suites"), "tls_server_config: %v", err)
	}
	return nil
}

// TLSConfig loads the certificates and returns the server's TLS
// configuration.
func (c *TLSServerConfig) TLSConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %q and key %q: %w", c.CertFile, c.KeyFile, err)
	}
	suites, err := cipherSuites(c.CipherSuites)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   clientAuthTypes[c.ClientAuthType],
		MinVersion:   tlsVersions[c.MinVersion],
		CipherSuites: suites,
	}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("read client_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client_ca_file %q holds no PEM certificate", c.ClientCAFile)
		}
		cfg.ClientCAs = pool
	}
	return cfg, nil
}

// setDirectory resolves the files against dir.
func (c *TLSServerConfig) setDirectory(dir string) {
	c.CertFile = commoncfg.JoinDir(dir, c.CertFile)
	c.KeyFile = commoncfg.JoinDir(dir, c.KeyFile)
	c.ClientCAFile = commoncfg.JoinDir(dir, c.ClientCAFile)
}

// checkFiles verifies that the resolved files exist and that the
// certificate and key belong together; it returns the key at fault.
func (c *TLSServerConfig) checkFiles() (key string, err error) {
	for _, f := range []struct{ key, path string }{
		{"cert_file", c.CertFile}, {"key_file", c.KeyFile}, {"client_ca_file", c.ClientCAFile},
	} {
		if msg := checkFileExists(f.key, f.path); msg != "" {
			return f.key, errors.New(msg)
		}
	}
	if _, err := c.TLSConfig(); err != nil {
		return "cert_file", err
	}
	return "", nil
}

// checkFileExists returns a message when a configured file is missing or
// unreadable, and "" when it is fine or not configured.
func checkFileExists(key, path string) string {
	if path == "" {
		return ""
	}
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s %q does not exist (relative paths are resolved against the directory of the configuration file)", key, path)
	default:
		return fmt.Sprintf("%s %q: %v", key, path, err)
	}
}

// userinfoPassword matches the password of a URL's userinfo
// (scheme://user:password@host) inside any text.
var userinfoPassword = regexp.MustCompile(`(://[^/\s:@"'<>]*):[^/\s@"'<>]+@`)

// RedactURLPasswords replaces the password of every URL in s
// (http://u:pass@host) with <secret>: http://u:<secret>@host. The config
// printed by String and anything that shows a configured URL passes its
// text through it.
func RedactURLPasswords(s string) string {
	return userinfoPassword.ReplaceAllString(s, "$1:<secret>@")
}
