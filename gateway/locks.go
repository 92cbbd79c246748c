package gateway

import (
	"context"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/input"
)

// locksDomain serves the LockService façade: /locks/{resource}/acquire, /release, /renew and
// GET /locks/{resource}. Every answer is 200; not getting a lock is acquired:false.
func locksDomain(addr string) domain {
	return domain{
		name: "locks",
		addr: backendTarget(addr),
		rest: func(ctx context.Context, mux *runtime.ServeMux, cc *grpc.ClientConn) error {
			return locksv1.RegisterLockServiceHandlerClient(ctx, mux, locksv1.NewLockServiceClient(cc))
		},
		// The writes skip the grpc-gateway runtime (unary.go); GET stays on it.
		own: func(g *Gateway, mux *router, cc *grpc.ClientConn) {
			c := locksv1.NewLockServiceClient(cc)
			handleUnary(g, mux, "POST /locks/{resource}/acquire", http.StatusOK,
				func(ctx context.Context, req *locksv1.AcquireRequest) (proto.Message, error) {
					return c.Acquire(ctx, req)
				})
			handleUnary(g, mux, "POST /locks/{resource}/release", http.StatusOK,
				func(ctx context.Context, req *locksv1.ReleaseRequest) (proto.Message, error) {
					return c.Release(ctx, req)
				})
			handleUnary(g, mux, "POST /locks/{resource}/renew", http.StatusOK,
				func(ctx context.Context, req *locksv1.RenewRequest) (proto.Message, error) { return c.Renew(ctx, req) })
		},
		fieldErrors: map[protoreflect.FullName]string{
			"vigil.locks.v1.AcquireRequest.owner":   nameSentence("owner", 256),
			"vigil.locks.v1.AcquireRequest.ttl_ms":  "ttlMs must be an integer from 100 through 3600000.",
			"vigil.locks.v1.AcquireRequest.wait_ms": "waitMs must be an integer from 0 through 60000.",
			"vigil.locks.v1.ReleaseRequest.owner":   nameSentence("owner", 256),
			"vigil.locks.v1.RenewRequest.owner":     nameSentence("owner", 256),
			"vigil.locks.v1.RenewRequest.ttl_ms":    "ttlMs must be an integer from 100 through 3600000.",
		},
	}
}

// nameSentence is the sentence of input.Name for field, so the gateway and the services say
// the same thing for the same mistake.
func nameSentence(field string, maxBytes int) string { return input.Name(field, "", maxBytes).Error() }
