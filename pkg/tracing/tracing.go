// Package tracing turns on OpenTelemetry traces for a Vigil process: spans from the gateway's
// HTTP handlers, through every gRPC call, down to the Redis scripts, exported over OTLP/gRPC.
// It is off unless OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set;
// off, nothing is added to a request's path. The standard OTEL_* variables tune the exporter
// and sampler (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_EXPORTER_OTLP_INSECURE, ...).
//
// While a span is active, log lines written with a context carry its ids (traceId, spanId), so
// a log line leads to its trace and back.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// TracerName is the instrumentation name of Vigil's own spans (Redis commands and scripts).
const TracerName = "github.com/vigil-dev/vigil"

var (
	enabled  atomic.Bool
	setup    sync.Once
	setupErr error
	provider *sdktrace.TracerProvider
)

// Configured reports whether the environment asks for traces.
func Configured() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup starts exporting traces when the environment asks for them. Only the first call in a
// process does anything (the all-in-one dev runner starts several services); service names the
// process unless OTEL_SERVICE_NAME does. It returns the first call's error.
func Setup(ctx context.Context, service string) error {
	setup.Do(func() {
		if !Configured() {
			return
		}
		exp, err := otlptracegrpc.New(ctx)
		if err != nil {
			setupErr = fmt.Errorf("tracing: OTLP exporter: %w", err)
			return
		}
		attrs := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service))
		res, err := resource.Merge(resource.Default(), attrs)
		if err != nil {
			res = attrs
		}
		if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
			if merged, err := resource.Merge(res, env); err == nil {
				res = merged
			}
		}
		provider = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		Use(provider)
	})
	return setupErr
}

// Use turns tracing on with tp (tests use an in-memory recorder), and propagates trace context
// in W3C traceparent headers.
func Use(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
}

// Enabled reports whether spans are being recorded.
func Enabled() bool { return enabled.Load() }

// Sampled reports whether ctx carries a span that is being recorded and exported: a call
// made for it should keep its own spans rather than ride a shared stream.
func Sampled(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsSampled() }

// Flush exports the spans still buffered; servers call it as they stop.
func Flush(ctx context.Context) {
	if provider != nil {
		_ = provider.ForceFlush(ctx)
	}
}

// Tracer is Vigil's tracer.
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// ServerOptions are the gRPC server options that trace incoming calls; none when tracing is off.
func ServerOptions() []grpc.ServerOption {
	if !Enabled() {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler())}
}

// DialOptions are the gRPC client options that trace outgoing calls and carry the trace to the
// server; none when tracing is off.
func DialOptions() []grpc.DialOption {
	if !Enabled() {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler())}
}

// HTTPHandler traces the requests h serves, each span named by the method and the route
// pattern that matched; h itself when tracing is off.
func HTTPHandler(h http.Handler, service string) http.Handler {
	if !Enabled() {
		return h
	}
	return otelhttp.NewHandler(h, service, otelhttp.WithSpanNameFormatter(spanName))
}

// spanName names a request's span by the route pattern the mux matched (otelhttp names it again
// once the handler has run), else by its method and path: the grpc-gateway routes all match "/".
func spanName(_ string, r *http.Request) string {
	switch p := r.Pattern; {
	case p == "" || p == "/":
		return r.Method + " " + r.URL.Path
	case strings.Contains(p, " "):
		return p
	default:
		return r.Method + " " + p
	}
}

// LogHandler adds the active span's traceId and spanId to every record logged with a context.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("traceId", sc.TraceID().String()), slog.String("spanId", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }
