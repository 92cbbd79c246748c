package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Environment variables of the TLS settings. Service mains read them through their -tls-* flags
// (config.ServiceFlags); the gateway, the health probe and the CLI through TLSFromEnv. The
// server itself reads no environment: it takes Options.TLS.
const (
	// EnvTLSCert and EnvTLSKey name this process's certificate and key (PEM files).
	EnvTLSCert = "VIGIL_TLS_CERT"
	EnvTLSKey  = "VIGIL_TLS_KEY"
	// EnvTLSCA names the CA (PEM) that signs the peers: a server requires client certificates
	// signed by it (mutual TLS); a client verifies servers with it.
	EnvTLSCA = "VIGIL_TLS_CA"
	// EnvTLSServerName overrides the name a client expects in a server's certificate.
	EnvTLSServerName = "VIGIL_TLS_SERVER_NAME"
)

// TLS names the PEM files that secure a gRPC link. The zero value is plaintext.
//
// On a server, CertFile and KeyFile turn TLS on, and CAFile on top makes it mutual: a client
// without a certificate signed by CAFile is refused during the handshake. On a client, CAFile
// verifies the server (system roots when empty) and CertFile/KeyFile, when set, are presented
// as the client certificate.
type TLS struct {
	CertFile, KeyFile string
	CAFile            string
	// ServerName a client expects in the server's certificate. Default: the dialled host.
	ServerName string
}

// TLSFromEnv reads VIGIL_TLS_CERT, VIGIL_TLS_KEY, VIGIL_TLS_CA and VIGIL_TLS_SERVER_NAME, for
// mains (the health probe, the CLI).
func TLSFromEnv() TLS {
	return TLS{
		CertFile: os.Getenv(EnvTLSCert), KeyFile: os.Getenv(EnvTLSKey),
		CAFile: os.Getenv(EnvTLSCA), ServerName: os.Getenv(EnvTLSServerName),
	}
}

// Enabled reports whether any file is named.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" }

// ServerConfig is the TLS configuration of a server; nil when t is the zero value.
func (t TLS) ServerConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("tls: a server needs both a certificate and a key file")
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: load server certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pool, err := loadPool(t.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientConfig is the TLS configuration of a client; nil when t is the zero value.
func (t TLS) ClientConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pool, err := loadPool(t.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("tls: a client certificate needs both a certificate and a key file")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// DialOption is the transport credentials for a gRPC client: TLS as configured, or plaintext
// for the zero value.
func (t TLS) DialOption() (grpc.DialOption, error) {
	cfg, err := t.ClientConfig()
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg)), nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: no PEM certificate in CA file %s", file)
	}
	return pool, nil
}

// securityOptions are the server options Options asks for beyond the bootstrap's own: TLS
// credentials and the largest message the server sends.
func (o *Options) securityOptions() ([]grpc.ServerOption, error) {
	t := o.TLS
	if o.MaxSendMsgSize <= 0 {
		o.MaxSendMsgSize = 4 << 20
	}
	opts := []grpc.ServerOption{grpc.MaxSendMsgSize(o.MaxSendMsgSize)}
	cfg, err := t.ServerConfig()
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	} else if !Loopback(o.GRPCAddr) {
		o.Logger.Warn("INSECURE: gRPC without TLS on a non-loopback address: anyone who reaches "+o.GRPCAddr+
			" may call every method; set VIGIL_TLS_CERT, VIGIL_TLS_KEY and VIGIL_TLS_CA (docs/SECURITY.md)",
			"event", "insecure", "service", o.Name, "grpc", o.GRPCAddr)
	}
	return opts, nil
}

// Loopback reports whether addr (host:port) listens on a loopback address only: "127.0.0.1:7001"
// and "localhost:7001" do; ":7001" and "0.0.0.0:7001" listen on every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
