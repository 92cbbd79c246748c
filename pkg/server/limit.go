package server

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// EnvMaxInFlight is the environment variable of the -max-inflight flag every service main
	// has (config.ServiceFlags); the library itself reads no environment.
	EnvMaxInFlight = "VIGIL_MAX_INFLIGHT"
	// DefaultMaxInFlight is Options.MaxInFlight's default: far above what a healthy service
	// has in flight (a call takes about a Redis round trip), low enough that a flood costs
	// a bounded amount of memory.
	DefaultMaxInFlight = 1024
)

// ErrAtCapacity is what a shed call gets: RESOURCE_EXHAUSTED, which the gateway answers as 429.
var ErrAtCapacity = status.Error(codes.ResourceExhausted, "The service is at capacity; retry shortly.")

// limitUnary sheds load: at most limit unary calls run at once, and a call over the limit is
// refused at once with ErrAtCapacity rather than queued, so that a load beyond capacity costs
// neither unbounded memory nor unbounded latency. Health checks are never refused (an overloaded
// service is busy, not dead). Streams (chat, room sockets) are long-lived and not counted.
// Each refusal is counted in shed, by method.
func limitUnary(limit int, shed *prometheus.CounterVec) grpc.UnaryServerInterceptor {
	if limit < 0 {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(ctx, req)
		}
	}
	slots := make(chan struct{}, limit)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, "/grpc.health.v1.Health/") {
			return h(ctx, req)
		}
		select {
		case slots <- struct{}{}:
		default:
			shed.WithLabelValues(info.FullMethod).Inc()
			return nil, ErrAtCapacity
		}
		defer func() { <-slots }()
		return h(ctx, req)
	}
}
