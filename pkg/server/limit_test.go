package server

import (
	"context"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestLimitShedsCallsBeyondMaxInFlight holds limit calls open: the next is refused at once with
// RESOURCE_EXHAUSTED, health checks still pass, and a slot freed is a call served again.
func TestLimitShedsCallsBeyondMaxInFlight(t *testing.T) {
	t.Parallel()
	const limit = 3
	shed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shed"}, []string{"grpc_method"})
	intercept := limitUnary(limit, shed)
	info := &grpc.UnaryServerInfo{FullMethod: "/vigil.test.v1.Test/Slow"}
	release := make(chan struct{})
	entered := make(chan struct{}, limit)
	slow := func(ctx context.Context, req any) (any, error) {
		entered <- struct{}{}
		<-release
		return "done", nil
	}
	var wg sync.WaitGroup
	for range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := intercept(context.Background(), nil, info, slow); err != nil {
				t.Errorf("call within the limit = %v, want nil", err)
			}
		}()
	}
	for range limit {
		<-entered
	}
	fast := func(ctx context.Context, req any) (any, error) { return "ok", nil }
	if _, err := intercept(context.Background(), nil, info, fast); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("call over the limit = %v, want RESOURCE_EXHAUSTED", err)
	}
	if n := testutil.ToFloat64(shed.WithLabelValues(info.FullMethod)); n != 1 {
		t.Fatalf("shed{grpc_method=%s} = %v after one refusal, want 1", info.FullMethod, n)
	}
	health := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	if _, err := intercept(context.Background(), nil, health, fast); err != nil {
		t.Fatalf("health check at the limit = %v, want nil", err)
	}
	close(release)
	wg.Wait()
	if res, err := intercept(context.Background(), nil, info, fast); err != nil || res != "ok" {
		t.Fatalf("call after the others finished = %v, %v; want ok, nil", res, err)
	}
}
