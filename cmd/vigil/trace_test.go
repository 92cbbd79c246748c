package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/tracing"
	"github.com/vigil-dev/vigil/pkg/wait"
	locks "github.com/vigil-dev/vigil/services/locks/service"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

// TestTraceFollowsARequestAcrossServices sends one REST call through the gateway and finds
// one trace holding the gateway's HTTP span, the gRPC client and server spans, and the Redis
// script the service ran, each the child of the one before; the service's log line for the
// call carries the trace id. (Tracing is process-wide, so this test turns it on for the
// other tests of the binary too; they only gain spans.)
func TestTraceFollowsARequestAcrossServices(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))

	_, prefix := redistest.Client(t)
	logs := &servertest.LogBuffer{}
	logger := slog.New(tracing.LogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	addr := servertest.Start(t, "reservations", servertest.Serve(reservations.New, reservations.Options{Core: servertest.Core(t, prefix, logger)})).Addr
	locksCore := servertest.Core(t, prefix, logger)
	locksCore.Registerer = prometheus.NewRegistry()
	locksAddr := servertest.Start(t, "locks", servertest.Serve(locks.New, locks.Options{Core: locksCore})).Addr
	g, err := gateway.New(context.Background(), gateway.Options{Backends: gateway.Backends{Reservations: addr, Locks: locksAddr}, Logger: logger})
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
	root := traceOf(t, rec, "POST /reservations/{reservationId}",
		"vigil.reservations.v1.ReservationService/CreateReservation", "create.lua")

	// A traced lock write is its own gRPC call too, though untraced ones ride the gateway's
	// lock sessions.
	res, err = http.Post(srv.URL+"/locks/traced-lock/acquire", "application/json", strings.NewReader(`{"owner": "tracer"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /locks/traced-lock/acquire = %d, want 200", res.StatusCode)
	}
	traceOf(t, rec, "POST /locks/{resource}/acquire", "vigil.locks.v1.LockService/Acquire", "")

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

// traceOf finds the HTTP server span named route (the route pattern, not the path, so a span
// name never carries user input) and walks down its trace: HTTP server → gRPC client → gRPC
// server → the Redis script (unless script is empty: the lock store batches its scripts, so
// they are not children of the call). It returns the HTTP span.
//
// Spans end in no fixed order across the processes' roles: the gRPC server span ends after
// the service has sent its answer, so the gateway can finish the HTTP request (and end its
// span) before the service's span has ended. The whole chain is awaited, not only its root.
func traceOf(t *testing.T, rec *tracetest.SpanRecorder, route, method, script string) sdktrace.ReadOnlySpan {
	t.Helper()
	want := []struct {
		kind  trace.SpanKind
		names []string
	}{
		{trace.SpanKindClient, []string{method}},
		{trace.SpanKindServer, []string{method}},
		{trace.SpanKindClient, []string{"redis evalsha " + script, "redis eval " + script}},
	}
	if script == "" {
		want = want[:2]
	}
	var root sdktrace.ReadOnlySpan
	wait.For(t, "the trace of "+route, func() error {
		ended := rec.Ended()
		root = nil
		for _, s := range ended {
			if s.SpanKind() == trace.SpanKindServer && s.Name() == route {
				root = s
			}
		}
		if root == nil {
			return fmt.Errorf("no HTTP server span %q; spans: %v", route, names(ended))
		}
		byParent := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
		for _, s := range ended {
			if s.SpanContext().TraceID() == root.SpanContext().TraceID() {
				byParent[s.Parent().SpanID()] = append(byParent[s.Parent().SpanID()], s)
			}
		}
		parent := root
		for _, w := range want {
			var found sdktrace.ReadOnlySpan
			for _, c := range byParent[parent.SpanContext().SpanID()] {
				if c.SpanKind() == w.kind && slices.Contains(w.names, c.Name()) {
					found = c
				}
			}
			if found == nil {
				return fmt.Errorf("no %v span %q under %q; the trace holds %v", w.kind, w.names[0], parent.Name(), names(ended))
			}
			parent = found
		}
		return nil
	})
	return root
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}
