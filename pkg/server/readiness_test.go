package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestHealthFollowsTheStore kills the service's Redis: health answers NOT_SERVING while it is
// gone (for the server's name and overall) and SERVING again once it is back.
func TestHealthFollowsTheStore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// Docker maps a new host port when the container starts again; the service talks to a
	// fixed local address that forwards to wherever the container listens now.
	fwd := forward(t, hostPort(t, srv.URL(t)))
	rdb := redis.NewClient(&redis.Options{Addr: fwd.addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer rdb.Close()

	s, err := New(Options{Name: "vigil.test.Probe", Store: rdb, ReadinessInterval: 50 * time.Millisecond,
		Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	defer func() { cancel(); <-served }()

	conn, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	status := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		r, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("health check %q: %v", service, err)
		}
		return r.GetStatus()
	}
	want := func(st healthpb.HealthCheckResponse_ServingStatus, why string) {
		t.Helper()
		wait.Until(t, why, func() bool { return status("") == st && status("vigil.test.Probe") == st })
	}

	want(healthpb.HealthCheckResponse_SERVING, "SERVING with Redis up")
	srv.Kill(t)
	want(healthpb.HealthCheckResponse_NOT_SERVING, "NOT_SERVING after Redis was SIGKILLed")
	srv.StartAgain(t)
	fwd.retarget(hostPort(t, srv.URL(t)))
	want(healthpb.HealthCheckResponse_SERVING, "SERVING again once Redis is back")
}

// TestServersShareARegisterer: two servers on one registry (the dev mode runs five) share the
// server metrics instead of failing to register them twice.
func TestServersShareARegisterer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for i := range 2 {
		s, err := New(Options{Name: "vigil.test.Probe", Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("New #%d on a shared registry: %v", i+1, err)
		}
		_ = s.lis.Close()
	}
	if err := reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_grpc_shed_total"})); err == nil {
		t.Fatal("vigil_grpc_shed_total was not registered on the registry passed in")
	}
}

// forwarder accepts on a local port and copies each connection to its current target.
type forwarder struct {
	addr string
	mu   sync.Mutex
	to   string
	open []net.Conn
}

func forward(t *testing.T, to string) *forwarder {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{addr: lis.Addr().String(), to: to}
	t.Cleanup(func() {
		_ = lis.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.open {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

// retarget sends new connections to addr.
func (f *forwarder) retarget(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.to = addr
}

func (f *forwarder) serve(c net.Conn) {
	f.mu.Lock()
	to := f.to
	f.mu.Unlock()
	up, err := net.DialTimeout("tcp", to, time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	f.mu.Lock()
	f.open = append(f.open, c, up)
	f.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
