package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The tests share the process's tracer provider, so they run one after another.

func TestOffUnlessConfigured(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if err := Setup(context.Background(), "test"); err != nil {
		t.Fatalf("Setup with no endpoint = %v, want nil", err)
	}
	if Enabled() || ServerOptions() != nil || DialOptions() != nil {
		t.Fatalf("tracing on without an endpoint: Enabled %v, %d server options, %d dial options", Enabled(), len(ServerOptions()), len(DialOptions()))
	}
	h := http.NotFoundHandler()
	if got := HTTPHandler(h, "x"); got == nil {
		t.Fatal("HTTPHandler returned nil")
	}
}

func TestLogLinesCarryTheSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("service", "t")
	ctx, span := Tracer().Start(context.Background(), "work")
	log.InfoContext(ctx, "inside", "event", "x")
	span.End()
	log.Info("outside")

	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var in, out map[string]any
	if len(lines) != 2 || json.Unmarshal(lines[0], &in) != nil || json.Unmarshal(lines[1], &out) != nil {
		t.Fatalf("log = %s, want two JSON lines", buf.String())
	}
	sc := span.SpanContext()
	if in["traceId"] != sc.TraceID().String() || in["spanId"] != sc.SpanID().String() || in["service"] != "t" {
		t.Fatalf("line logged inside the span = %v, want traceId %s and spanId %s", in, sc.TraceID(), sc.SpanID())
	}
	if _, ok := out["traceId"]; ok {
		t.Fatalf("line logged without a span = %v, want no traceId", out)
	}
}

func TestHTTPSpansAreNamedByRoute(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		if !trace.SpanContextFromContext(r.Context()).IsValid() {
			t.Errorf("handler context has no span")
		}
	})
	srv := httptest.NewServer(HTTPHandler(mux, "test"))
	defer srv.Close()
	res, err := http.Get(srv.URL + "/things/42")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	if len(names) != 1 || names[0] != "GET /things/{id}" {
		t.Fatalf("spans = %v, want one named by its route, GET /things/{id}", names)
	}
}
