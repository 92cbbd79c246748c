package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/config"
)

// The stack a benchmark measures runs in this process, the real code on loopback: each service
// through its New + Serve (service.New(ctx, Options) returns a listening server), the gateway
// through gateway.New. A benchmark starts what it needs with Serve and Gateway; runHarness
// stops everything when the benchmark returns.

// servable is a service of the target skeleton: listening once built, serving until ctx ends.
type servable interface {
	Addr() net.Addr
	Serve(ctx context.Context) error
}

// stack is what the harness started: a stop for each part, which ends it and waits for it.
type stack struct {
	mu    sync.Mutex
	stops []func()
}

// onStop adds a stop: f runs when the stack stops, before what was started before it.
func (s *stack) onStop(f func()) {
	s.mu.Lock()
	s.stops = append(s.stops, f)
	s.mu.Unlock()
}

// start runs serve on a goroutine of its own and adds the stop that ends it (end) and waits
// for serve to return.
func (s *stack) start(serve, end func()) {
	done := make(chan struct{})
	s.onStop(func() { end(); <-done })
	go func() {
		defer close(done)
		serve()
	}()
}

// quiet is the logger benchmarks give the services: warnings and errors only, on stderr.
func quiet(service string) *slog.Logger {
	return config.Logger("text", "warn").With("service", service)
}

// Serve runs svc until the benchmark ends and returns its gRPC address. A service that stops
// on its own before then is reported on stderr (the benchmark's calls then fail).
func (h *Harness) Serve(ctx context.Context, name string, svc servable) string {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.stack.start(func() {
		if err := svc.Serve(runCtx); err != nil && runCtx.Err() == nil {
			benchStage("%s stopped: %v", name, err)
		}
	}, cancel)
	return svc.Addr().String()
}

// Gateway runs the gateway in front of backends until the benchmark ends and returns its base
// URL and an HTTP client sized for many concurrent callers.
func (h *Harness) Gateway(ctx context.Context, backends gateway.Backends) (string, *http.Client, error) {
	g, err := gateway.New(ctx, gateway.Options{Backends: backends, Logger: quiet("gateway")})
	if err != nil {
		return "", nil, fmt.Errorf("gateway: %w", err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second}
	h.stack.start(func() { _ = srv.Serve(lis) }, func() { _ = srv.Close(); g.Close() })
	return "http://" + lis.Addr().String(), benchHTTPClient(), nil
}

// benchHTTPClient is an HTTP client sized for many concurrent callers. Fair to REST:
// keep-alive connections, one idle connection kept per concurrent caller (so none is closed
// and redialled between calls), and no gzip negotiation (the gRPC client compresses nothing
// either).
func benchHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 1024, DisableCompression: true,
	}, Timeout: 30 * time.Second}
}

// stop ends everything Serve and Gateway started, latest first, each before the next, so a
// service stops before the services it calls (the Room before the Lobby it pushes counts to).
func (s *stack) stop() {
	s.mu.Lock()
	stops := s.stops
	s.stops = nil
	s.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
}
