package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"log/slog"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/tracing"
	"github.com/vigil-dev/vigil/pkg/wait"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

// syncBuffer is a log sink the service writes to from its goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTraceFollowsARequestAcrossServices sends one REST call through the gateway and finds
// one trace holding the gateway's HTTP span, the gRPC client and server spans, and the Redis
// script the service ran, each the child of the one before; the service's log line for the
// call carries the trace id. (Tracing is process-wide, so this test turns it on for the
// other tests of the binary too; they only gain spans.)
func TestTraceFollowsARequestAcrossServices(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))

	_, prefix := redistest.Client(t)
	logs := &syncBuffer{}
	logger := slog.New(tracing.LogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	addr := start(t, "reservations", func(ctx context.Context, ready func(net.Addr)) error {
		svc, err := reservations.New(ctx, reservations.Options{Redis: redisx.Config{URL: redistest.URL(t)}, Prefix: prefix, Logger: logger})
		if err != nil {
			return err
		}
		ready(svc.Addr())
		return svc.Serve(ctx)
	})
	g, err := gateway.New(context.Background(), gateway.Options{Backends: gateway.Backends{Reservations: addr}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })

	res, err := http.Post(srv.URL+"/reservations/traced-seat", "application/json", strings.NewReader(`{"ttlSeconds": 60}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /reservations/traced-seat = %d, want 201", res.StatusCode)
	}

	// The HTTP span ends last, once the handler has returned. It is named by the route pattern,
	// not the path, so a span name never carries user input.
	var root sdktrace.ReadOnlySpan
	wait.For(t, "the HTTP server span", func() error {
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindServer && s.Name() == "POST /reservations/{reservationId}" {
				root = s
				return nil
			}
		}
		return fmt.Errorf("spans: %v", names(rec.Ended()))
	})
	byParent := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == root.SpanContext().TraceID() {
			byParent[s.Parent().SpanID()] = append(byParent[s.Parent().SpanID()], s)
		}
	}
	// Walk down: HTTP server → gRPC client → gRPC server → Redis script.
	want := []struct {
		kind trace.SpanKind
		name string
	}{
		{trace.SpanKindClient, "vigil.reservations.v1.ReservationService/CreateReservation"},
		{trace.SpanKindServer, "vigil.reservations.v1.ReservationService/CreateReservation"},
		{trace.SpanKindClient, "redis evalsha create.lua"},
	}
	parent := root
	for _, w := range want {
		var found sdktrace.ReadOnlySpan
		for _, c := range byParent[parent.SpanContext().SpanID()] {
			if c.SpanKind() == w.kind && (c.Name() == w.name || w.name == "redis evalsha create.lua" && c.Name() == "redis eval create.lua") {
				found = c
			}
		}
		if found == nil {
			t.Fatalf("no %v span %q under %q; the trace holds %v", w.kind, w.name, parent.Name(), names(rec.Ended()))
		}
		parent = found
	}

	traceID := root.SpanContext().TraceID().String()
	var logged bool
	for _, line := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == "rpc" && m["traceId"] == traceID {
			logged = true
		}
	}
	if !logged {
		t.Fatalf("no rpc log line carries traceId %s; logs:\n%s", traceID, logs.String())
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}
