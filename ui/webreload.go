package ui

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// WebSettings are the web settings a reload changes at once: the users
// and the TLS settings. The listen address, the connection cap and the
// timeouts need a restart.
type WebSettings struct {
	// BasicAuthUsers maps user names to bcrypt hashes; empty disables auth.
	BasicAuthUsers map[string]string
	// TLS, when set, serves HTTPS: its certificate comes from CertFile
	// and KeyFile (re-read when they change), the rest (client CAs,
	// versions, suites) from TLS as it is.
	TLS               *tls.Config
	CertFile, KeyFile string
}

// WebNext is a prepared change of the web settings; see PrepareWeb.
type WebNext struct {
	auth *authState
	tls  *tlsState
}

// tlsState is one generation of TLS settings.
type tlsState struct {
	base *tls.Config
	cert *certFiles
}

// PrepareWeb checks new web settings and builds them without changing
// anything: the hashes must be bcrypt, the certificate and key must load,
// and HTTPS cannot be turned on or off without a restart (the listener
// would have to change).
func (s *Server) PrepareWeb(w WebSettings) (*WebNext, error) {
	auth, err := newAuthState(w.BasicAuthUsers)
	if err != nil {
		return nil, fmt.Errorf("web.basic_auth_users: %w", err)
	}
	next := &WebNext{auth: auth}
	serving := s.tls.Load() != nil
	switch {
	case serving && w.TLS == nil:
		return nil, errors.New("web.tls_server_config: turning HTTPS off needs a restart; the previous settings keep running")
	case !serving && w.TLS != nil && s.listener != nil:
		return nil, errors.New("web.tls_server_config: turning HTTPS on needs a restart; the previous settings keep running")
	}
	if w.TLS != nil {
		cf, err := loadCertFiles(w.CertFile, w.KeyFile, w.TLS, s.logger)
		if err != nil {
			return nil, fmt.Errorf("web.tls_server_config: %w", err)
		}
		next.tls = &tlsState{base: w.TLS, cert: cf}
	}
	return next, nil
}

// ApplyWeb puts prepared settings in force: from the next request on for
// the users, from the next TLS handshake on for the certificate.
func (s *Server) ApplyWeb(next *WebNext) {
	s.auth.state.Store(next.auth)
	if next.tls != nil {
		s.tls.Store(next.tls)
	}
}

// tlsForClient is the listener's GetConfigForClient: the settings in
// force, with the certificate re-read if its files changed.
func (s *Server) tlsForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	st := s.tls.Load()
	if st == nil {
		return nil, errors.New("no TLS settings")
	}
	cfg := st.base.Clone()
	cfg.Certificates = nil
	cfg.GetCertificate = st.cert.get
	return cfg, nil
}

// certFiles serves a certificate from its files, re-read when their
// modification time or size changes (checked at most once a second), as
// Prometheus re-reads its certificate per handshake. A renewed pair that
// does not load is logged and the previous certificate kept.
type certFiles struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

func loadCertFiles(certFile, keyFile string, base *tls.Config, logger *slog.Logger) (*certFiles, error) {
	cf := &certFiles{certFile: certFile, keyFile: keyFile, logger: logger}
	if certFile == "" && len(base.Certificates) > 0 {
		// A fixed certificate (tests): nothing to re-read.
		cf.cert = &base.Certificates[0]
		return cf, nil
	}
	stamp, err := cf.fileStamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %q and key %q: %w", certFile, keyFile, err)
	}
	cf.cert, cf.stamp, cf.checked = &cert, stamp, time.Now()
	return cf, nil
}

func (cf *certFiles) fileStamp() (string, error) {
	var stamp string
	for _, f := range []string{cf.certFile, cf.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		stamp += fmt.Sprintf("%d/%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return stamp, nil
}

func (cf *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if cf.certFile == "" || time.Since(cf.checked) < time.Second {
		return cf.cert, nil
	}
	cf.checked = time.Now()
	stamp, err := cf.fileStamp()
	if err != nil || stamp == cf.stamp {
		return cf.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(cf.certFile, cf.keyFile)
	if err != nil {
		// Files being rewritten one after the other load on a later
		// handshake; until then the previous certificate serves.
		cf.logger.Warn("renewed TLS certificate does not load; serving the previous one", "cert_file", cf.certFile, "err", err)
		return cf.cert, nil
	}
	cf.cert, cf.stamp = &cert, stamp
	cf.logger.Info("TLS certificate re-read", "cert_file", cf.certFile)
	return cf.cert, nil
}
