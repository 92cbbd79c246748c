package redisx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// TLS secures the link to Redis. A rediss:// URL turns TLS on by itself (verified against the
// system roots unless CAFile is set); any field set here turns it on for redis:// URLs and
// cluster seeds too.
type TLS struct {
	// Enabled turns TLS on with no files (system roots, no client certificate).
	Enabled bool
	// CAFile verifies Redis's certificate. Default: the system roots.
	CAFile string
	// CertFile and KeyFile are the client certificate, for tls-auth-clients yes.
	CertFile, KeyFile string
	// ServerName expected in Redis's certificate. Default: the host dialled.
	ServerName string
}

func (t TLS) on() bool { return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// password is cfg's password: Password, else the trimmed contents of PasswordFile.
func (cfg Config) password() (string, error) {
	if cfg.Password != "" || cfg.PasswordFile == "" {
		return cfg.Password, nil
	}
	b, err := os.ReadFile(cfg.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("redis password file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// tlsConfig adds cfg's TLS files to base (what a rediss:// URL set, or nil). It returns nil
// when TLS stays off.
func (t TLS) tlsConfig(base *tls.Config) (*tls.Config, error) {
	if base == nil && !t.on() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		c = base.Clone()
	}
	if t.ServerName != "" {
		c.ServerName = t.ServerName
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("redis tls: read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redis tls: no PEM certificate in %s", t.CAFile)
		}
		c.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("redis tls: a client certificate needs both a certificate and a key file")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("redis tls: load client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// redactURL removes the password of rawURL from msg: a URL that does not parse is quoted
// whole in the parser's error, and errors end up in logs.
func redactURL(msg, rawURL string) string {
	rest := rawURL
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return msg
	}
	userinfo := rest[:at]
	if _, pw, ok := strings.Cut(userinfo, ":"); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return msg
}
