package servertest

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigil-dev/vigil/pkg/prom/promtest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
)

// StartService starts the service newSvc builds from o (Start with Serve), and when the test
// ends checks that it drained cleanly (Drain).
func StartService[O any, S server.Service](t testing.TB, name string, newSvc func(context.Context, O) (S, error), o O) *Running {
	t.Helper()
	r := Start(t, name, Serve(newSvc, o))
	t.Cleanup(func() { r.Drain(t) })
	return r
}

// Cancel ends the service's context, as a SIGTERM does, and returns at once: the service
// drains while the test goes on. Stop or Drain then waits for the drain.
func (r *Running) Cancel() { r.cancel() }

// Drain stops the service (Stop) and fails the test unless it drained cleanly: in time, with
// Serve returning nil.
func (r *Running) Drain(t testing.TB) {
	t.Helper()
	if !r.Stop() {
		t.Errorf("the service did not stop within %v after its context ended", stopTimeout)
		return
	}
	if r.err != nil {
		t.Errorf("Serve returned %v after its context ended", r.err)
	}
}

// Dial is a plaintext gRPC connection to addr, closed when the test ends.
func Dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Core is a service's Core on the test's shared Redis (redistest) under prefix, logging to log
// (nil: the service's default); a test sets any other field on what it returns.
func Core(t testing.TB, prefix string, log *slog.Logger) server.Core {
	return server.Core{Redis: redisx.Config{URL: redistest.URL(t)}, Prefix: prefix, Logger: log}
}

// ServeGRPC serves a bare gRPC server, with what register adds to it, on a free loopback port
// until the test ends, and returns its address: a stand-in backend, or one piece of a
// service served alone.
func ServeGRPC(t testing.TB, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// FreeAddr is a loopback address whose port was free when FreeAddr returned: where to tell a
// process the test starts (a service's command) to listen.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// DownAddr is the address of a backend that is down: its port stays held for the test (so
// no other test's server can take it, as FreeAddr's can), and every connection to it is
// closed as soon as it is accepted, so a gRPC client fails at once (Unavailable) rather than
// waiting on whatever server happened to take a free port next.
func DownAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

// CheckRegisterer checks that a service registers every metric family of want on the
// Registerer its Options give, none on the process's default registry only. build is the
// service's New with core as its Options' Core: the test's Redis under a key prefix of its own
// and a private registry. The service is served with a context already ended, so it starts and
// drains at once.
func CheckRegisterer(t testing.TB, build func(ctx context.Context, core server.Core) (server.Service, error), want ...string) {
	t.Helper()
	_, prefix := redistest.Client(t)
	reg := promtest.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := build(ctx, server.Core{Redis: redisx.Config{URL: redistest.URL(t)}, Prefix: prefix, Registerer: reg})
	if err != nil {
		cancel()
		t.Fatalf("New = %v", err)
	}
	cancel()
	if err := svc.Serve(ctx); err != nil {
		t.Errorf("Serve = %v", err)
	}
	if missing := reg.Missing(want...); len(missing) > 0 {
		t.Errorf("families missing from the given Registerer: %v", missing)
	}
}

// Lines is every line written so far, in order, leaving out empty ones.
func (l *LogBuffer) Lines() []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}

// Containing is the lines that hold every one of parts.
func (l *LogBuffer) Containing(parts ...string) []string {
	var out []string
next:
	for _, line := range l.Lines() {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}
