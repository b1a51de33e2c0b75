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
	"sort"

	commoncfg "github.com/prometheus/common/config"
	"golang.org/x/crypto/bcrypt"
)

// DefaultWebConfig is the web section when the file leaves it out.
var DefaultWebConfig = WebConfig{
	ListenAddress:       ":9090",
	MaxRequestBodyBytes: 32 << 20,
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
	return nil
}

// TLSConfig loads the certificates and returns the server's TLS
// configuration.
func (c *TLSServerConfig) TLSConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %q and key %q: %w", c.CertFile, c.KeyFile, err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   clientAuthTypes[c.ClientAuthType],
		MinVersion:   tls.VersionTLS12,
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
