package redisx

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Environment variables Open falls back on when Config leaves TLS and Password unset, so a
// deployment secures every service's Redis link without each service growing flags.
const (
	// EnvPassword is the Redis password (AUTH) when neither the URL nor Config.Password has one.
	EnvPassword = "VIGIL_REDIS_PASSWORD"
	// EnvPasswordFile names a file holding the password (a container secret), read when
	// EnvPassword is unset; surrounding white space is dropped.
	EnvPasswordFile = "VIGIL_REDIS_PASSWORD_FILE"
	// EnvTLSCA, EnvTLSCert and EnvTLSKey name PEM files: the CA that signs Redis's certificate,
	// and a client certificate for a Redis that requires one (tls-auth-clients yes).
	EnvTLSCA   = "VIGIL_REDIS_TLS_CA"
	EnvTLSCert = "VIGIL_REDIS_TLS_CERT"
	EnvTLSKey  = "VIGIL_REDIS_TLS_KEY"
	// EnvTLS set to "true" turns TLS on for cluster seeds, which have no URL scheme to say so.
	EnvTLS = "VIGIL_REDIS_TLS"
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

// withEnv fills what cfg leaves unset from the VIGIL_REDIS_* environment.
func (cfg Config) withEnv() Config {
	if cfg.Password == "" {
		cfg.Password = os.Getenv(EnvPassword)
	}
	if f := os.Getenv(EnvPasswordFile); cfg.Password == "" && f != "" {
		if b, err := os.ReadFile(f); err == nil {
			cfg.Password = strings.TrimSpace(string(b))
		}
	}
	if !cfg.TLS.on() {
		cfg.TLS = TLS{
			Enabled: os.Getenv(EnvTLS) == "true",
			CAFile:  os.Getenv(EnvTLSCA), CertFile: os.Getenv(EnvTLSCert), KeyFile: os.Getenv(EnvTLSKey),
		}
	}
	return cfg
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
