package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// probeService is a tiny hand-written gRPC service: Panic panics, Slow waits for release.
type probeService struct{ release, entered chan struct{} }

func (p *probeService) desc() *grpc.ServiceDesc {
	handler := func(fn func(ctx context.Context) error) grpc.MethodHandler {
		return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, _ any) (any, error) { return new(emptypb.Empty), fn(ctx) }
			if ic == nil {
				return h(ctx, in)
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/vigil.test.Probe/X"}, h)
		}
	}
	return &grpc.ServiceDesc{
		ServiceName: "vigil.test.Probe",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Panic", Handler: handler(func(context.Context) error { panic("boom") })},
			{MethodName: "Slow", Handler: handler(func(context.Context) error { close(p.entered); <-p.release; return nil })},
		},
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestServeRecoverDrain(t *testing.T) {
	t.Parallel()
	metricsAddr := freeAddr(t)
	s, err := New(Options{Name: "vigil.test.Probe", MetricsAddr: metricsAddr, DrainTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	probe := &probeService{release: make(chan struct{}), entered: make(chan struct{})}
	s.GRPC().RegisterService(probe.desc(), probe)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	taskStopped := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- s.Serve(ctx, func(ctx context.Context) error { <-ctx.Done(); close(taskStopped); return nil })
	}()

	conn, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	res, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "vigil.test.Probe"}, grpc.WaitForReady(true))
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v; want SERVING", res, err)
	}

	// A panicking handler answers INTERNAL without its panic text, and the server lives on.
	err = conn.Invoke(ctx, "/vigil.test.Probe/Panic", new(emptypb.Empty), new(emptypb.Empty))
	if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "boom") {
		t.Fatalf("Panic = %v, want INTERNAL without the panic value", err)
	}

	// The metrics listener starts beside the gRPC server; wait until it answers.
	var body []byte
	wait.Until(t, "the metrics listener answers", func() bool {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
		return true
	})
	if !strings.Contains(string(body), `grpc_server_handled_total{grpc_code="Internal",grpc_method="Panic"`) {
		t.Fatalf("metrics do not count the failed call:\n%s", body)
	}

	// Drain: a call in flight finishes; health turns NOT_SERVING; background tasks stop. The
	// drain stops taking new calls right after it marks health NOT_SERVING, so a Check sent
	// then may find the server already closed; a Watch opened before the drain is in flight
	// and hears the change.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watch, err := health.Watch(watchCtx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch = %v, %v; want SERVING first", r, err)
	}
	slowDone := make(chan error, 1)
	go func() {
		slowDone <- conn.Invoke(context.Background(), "/vigil.test.Probe/Slow", new(emptypb.Empty), new(emptypb.Empty))
	}()
	<-probe.entered
	cancel()
	<-taskStopped
	if r, err := watch.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health watch during the drain = %v, %v; want NOT_SERVING", r, err)
	}
	stopWatch() // the drain waits for calls in flight, the watch among them
	close(probe.release)
	if err := <-slowDone; err != nil {
		t.Fatalf("in-flight call during drain = %v, want it to finish", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v, want nil after a clean drain", err)
	}
}

func TestDrainDeadlineCutsCalls(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Name: "vigil.test.Probe", DrainTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	probe := &probeService{release: make(chan struct{}), entered: make(chan struct{})} // never released
	s.GRPC().RegisterService(probe.desc(), probe)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	conn, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	slowDone := make(chan error, 1)
	go func() {
		slowDone <- conn.Invoke(context.Background(), "/vigil.test.Probe/Slow", new(emptypb.Empty), new(emptypb.Empty), grpc.WaitForReady(true))
	}()
	<-probe.entered
	cancel()
	// Serve returns although the call never ends: the deadline cut it.
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve = %v", err)
	}
	if err := <-slowDone; status.Code(err) != codes.Unavailable {
		t.Fatalf("call cut by the drain deadline = %v, want UNAVAILABLE", err)
	}
}

// TestStoppingEndsWhenDrainStarts: the context long streams watch is open while the server
// serves and ends once Serve's context ends, before Serve returns.
func TestStoppingEndsWhenDrainStarts(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Name: "vigil.test.Probe", Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	if err := s.Stopping().Err(); err != nil {
		t.Fatalf("Stopping().Err() while serving = %v, want nil", err)
	}
	cancel()
	<-s.Stopping().Done()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v, want nil", err)
	}
}
