package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/pkg/tlstest"
)

// startTLS serves a bare server with the given TLS files until the test ends.
func startTLS(t *testing.T, tl TLS) string {
	t.Helper()
	s, err := New(Options{Name: "tls-test", TLS: tl, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s.Addr().String()
}

// check calls the health service over a client with the given credentials.
func check(t *testing.T, addr string, cred grpc.DialOption) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func dial(t *testing.T, tl TLS) grpc.DialOption {
	t.Helper()
	d, err := tl.DialOption()
	if err != nil {
		t.Fatalf("DialOption(%+v): %v", tl, err)
	}
	return d
}

// TestMutualTLSRefusesClientWithoutCertificate starts a service with test certificates and a
// client CA: a client with a certificate from that CA is served; one without a certificate,
// one with a stranger's certificate, and a plaintext one are refused.
func TestMutualTLSRefusesClientWithoutCertificate(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	addr := startTLS(t, TLS{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, CAFile: pki.CA})

	if err := check(t, addr, dial(t, TLS{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey})); err != nil {
		t.Fatalf("Check with a client certificate = %v, want SERVING", err)
	}
	if err := check(t, addr, dial(t, TLS{CAFile: pki.CA, CertFile: pki.ServerCert, KeyFile: pki.ServerKey})); err != nil {
		t.Fatalf("Check with a service's certificate (a service calling another) = %v, want SERVING", err)
	}
	refused := map[string]grpc.DialOption{
		"no client certificate":    dial(t, TLS{CAFile: pki.CA}),
		"a stranger's certificate": dial(t, TLS{CAFile: pki.CA, CertFile: pki.OtherClientCert, KeyFile: pki.OtherClientKey}),
		"plaintext":                grpc.WithTransportCredentials(insecure.NewCredentials()),
	}
	for name, cred := range refused {
		err := check(t, addr, cred)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("Check with %s = %v, want the connection refused (Unavailable)", name, err)
		}
	}
}

// TestTLSWithoutClientCA serves TLS to any client that trusts the server, and refuses a client
// that does not trust the server's CA.
func TestTLSWithoutClientCA(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	addr := startTLS(t, TLS{CertFile: pki.ServerCert, KeyFile: pki.ServerKey})
	if err := check(t, addr, dial(t, TLS{CAFile: pki.CA})); err != nil {
		t.Fatalf("Check over TLS = %v, want SERVING", err)
	}
	if err := check(t, addr, dial(t, TLS{CAFile: pki.OtherCA})); status.Code(err) != codes.Unavailable {
		t.Fatalf("Check trusting another CA = %v, want Unavailable", err)
	}
}

func TestTLSConfigErrors(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	bad := []TLS{
		{CertFile: pki.ServerCert},                                                // no key
		{CertFile: "/nonexistent.pem", KeyFile: pki.ServerKey},                    // missing file
		{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, CAFile: pki.ServerKey}, // no certificate in CA file
	}
	for _, tl := range bad {
		if _, err := New(Options{Name: "x", TLS: tl}); err == nil {
			t.Errorf("New with TLS %+v = nil error, want a configuration error", tl)
		}
	}
	if _, err := (TLS{CertFile: pki.ClientCert}).DialOption(); err == nil {
		t.Error("DialOption with a certificate but no key = nil error, want an error")
	}
}
