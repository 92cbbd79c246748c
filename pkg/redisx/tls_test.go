package redisx_test

import (
	"context"
	"fmt"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/tlstest"
)

const testPassword = "s3cret-redis-pass"

// startTLSRedis runs a Redis that speaks only redisx.TLS with a new test PKI (client
// certificates required when clientCerts) and wants a password, and returns the PKI and its
// host:port.
func startTLSRedis(t *testing.T, clientCerts bool) (tlstest.Files, string) {
	t.Helper()
	pki := tlstest.New(t)
	ctx := context.Background()
	auth := "no"
	if clientCerts {
		auth = "yes"
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image: redistest.Image(),
			Cmd: []string{"--bind", "0.0.0.0", "--protected-mode", "no", "--save", "",
				"--port", "0", "--tls-port", "6379",
				"--tls-cert-file", "/tls/server.pem", "--tls-key-file", "/tls/server-key.pem",
				"--tls-ca-cert-file", "/tls/ca.pem", "--tls-auth-clients", auth,
				"--requirepass", testPassword},
			Files: []testcontainers.ContainerFile{
				{HostFilePath: pki.ServerCert, ContainerFilePath: "/tls/server.pem", FileMode: 0o644},
				{HostFilePath: pki.ServerKey, ContainerFilePath: "/tls/server-key.pem", FileMode: 0o644},
				{HostFilePath: pki.CA, ContainerFilePath: "/tls/ca.pem", FileMode: 0o644},
			},
			ExposedPorts: []string{"6379/tcp"},
			WaitingFor:   wait.ForLog("Ready to accept connections").WithStartupTimeout(60 * time.Second),
		},
		Started: true,
	})
	if err != nil {
		t.Fatalf("start redisx.TLS Redis: %v", err)
	}
	t.Cleanup(func() { _ = c.Terminate(context.Background()) })
	port, err := c.MappedPort(ctx, "6379/tcp")
	if err != nil {
		t.Fatal(err)
	}
	return pki, "127.0.0.1:" + port.Port()
}

// connects opens cfg, which the Redis must accept, and closes the connection again.
func connects(t *testing.T, ctx context.Context, what string, cfg redisx.Config) {
	t.Helper()
	c, err := redisx.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open(%s) = %v, want connected", what, err)
	}
	_ = c.Close()
}

// TestRedisOverTLSWithPassword connects to a redisx.TLS-only Redis with a rediss:// URL, a test CA
// and a password; a plaintext client, a client that does not trust the CA, and a client with
// the wrong password are refused, and no error quotes the password.
func TestRedisOverTLSWithPassword(t *testing.T) {
	t.Parallel()
	pki, addr := startTLSRedis(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	good := redisx.Config{URL: fmt.Sprintf("rediss://:%s@%s/0", testPassword, addr), TLS: redisx.TLS{CAFile: pki.CA}}
	c, err := redisx.Open(ctx, good)
	if err != nil {
		t.Fatalf("Open(rediss with CA and password) = %v, want connected", err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	_ = c.Close()

	// The password may come from redisx.Config (or VIGIL_REDIS_PASSWORD) instead of the URL.
	connects(t, ctx, "password from redisx.Config", redisx.Config{URL: "rediss://" + addr + "/0", Password: testPassword, TLS: redisx.TLS{CAFile: pki.CA}})

	refused := map[string]redisx.Config{
		"plaintext":          {URL: fmt.Sprintf("redis://:%s@%s/0", testPassword, addr)},
		"untrusted CA":       {URL: fmt.Sprintf("rediss://:%s@%s/0", testPassword, addr), TLS: redisx.TLS{CAFile: pki.OtherCA}},
		"wrong password":     {URL: fmt.Sprintf("rediss://:wrong-%s@%s/0", testPassword, addr), TLS: redisx.TLS{CAFile: pki.CA}},
		"no password":        {URL: "rediss://" + addr + "/0", TLS: redisx.TLS{CAFile: pki.CA}},
		"malformed with pwd": {URL: fmt.Sprintf("rediss://:%s@%s:notaport/0", testPassword, addr)},
	}
	for name, cfg := range refused {
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := redisx.Open(short, cfg)
		cancel()
		if err == nil {
			_ = c.Close()
			t.Errorf("Open(%s) connected, want refused", name)
			continue
		}
		if strings.Contains(err.Error(), testPassword) {
			t.Errorf("Open(%s) error %q quotes the password", name, err)
		}
	}
}

// TestRedisMutualTLS connects with a client certificate to a Redis that requires one, and is
// refused without it.
func TestRedisMutualTLS(t *testing.T) {
	t.Parallel()
	pki, addr := startTLSRedis(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := fmt.Sprintf("rediss://:%s@%s/0", testPassword, addr)
	connects(t, ctx, "with a client certificate", redisx.Config{URL: url, TLS: redisx.TLS{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}})
	short, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if c, err := redisx.Open(short, redisx.Config{URL: url, TLS: redisx.TLS{CAFile: pki.CA}}); err == nil {
		_ = c.Close()
		t.Fatal("Open without a client certificate connected, want refused")
	}
}
