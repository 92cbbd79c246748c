package gateway

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/input"
	"github.com/vigil-dev/vigil/pkg/lockclient"
	"github.com/vigil-dev/vigil/pkg/tracing"
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
		// The writes skip the grpc-gateway runtime (unary.go) and ride lock sessions; GET stays
		// on the runtime.
		own: func(g *Gateway, mux *router, cc *grpc.ClientConn) {
			r := newLockRelay(cc)
			g.closers = append(g.closers, r.close)
			handleUnary(g, mux, "POST /locks/{resource}/acquire", http.StatusOK,
				relayed(r, (*lockclient.Client).Acquire, r.unary.Acquire))
			handleUnary(g, mux, "POST /locks/{resource}/release", http.StatusOK,
				relayed(r, (*lockclient.Client).Release, r.unary.Release))
			handleUnary(g, mux, "POST /locks/{resource}/renew", http.StatusOK,
				relayed(r, (*lockclient.Client).Renew, r.unary.Renew))
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

// The gateway relays the REST lock writes of all its callers to the lock service over a few
// LockService.Session streams (pkg/lockclient) rather than a gRPC call each: a call is one
// message each way on a stream already open, which costs the gateway and the service less CPU
// per call than a unary call's stream set-up and teardown (measured in docs/BENCHMARKS.md: REST
// lock pairs went from 0.73x to 0.80-0.85x the throughput of unary gRPC). A session call means
// exactly what the unary call means (TestUnaryRoutesMatchTheRuntime compares the answers), a
// caller who goes away mid-wait leaves the queue as with a unary call, and a replica that
// drains hands back the calls it did not run, which lockclient sends again on a new session
// (TestLockWritesSurviveADrain). Two kinds of call stay unary: one being traced, so its spans
// follow it into the service, and any beyond maxRelayed in flight, so no caller ever meets a
// session's limit on calls in flight.

const (
	// lockSessions is how many session streams the relay spreads calls over: with several
	// replicas behind a round-robin target they open on different replicas.
	lockSessions = 4
	// maxRelayed bounds the calls in flight over all the sessions (waiting acquires included),
	// well under lockSessions x the service's limit per session.
	maxRelayed = 4096
)

// lockRelay sends lock writes over lockSessions session streams, or as unary calls.
type lockRelay struct {
	sessions [lockSessions]*lockclient.Client
	unary    locksv1.LockServiceClient
	next     atomic.Uint32
	inFlight atomic.Int64
}

func newLockRelay(cc *grpc.ClientConn) *lockRelay {
	r := &lockRelay{unary: locksv1.NewLockServiceClient(cc)}
	for i := range r.sessions {
		r.sessions[i] = lockclient.New(cc)
	}
	return r
}

// session picks the session for a call, and done to call when it is answered; nil when the
// call should be a unary one.
func (r *lockRelay) session(ctx context.Context) (*lockclient.Client, func()) {
	if tracing.Sampled(ctx) {
		return nil, nil
	}
	if r.inFlight.Add(1) > maxRelayed {
		r.inFlight.Add(-1)
		return nil, nil
	}
	return r.sessions[r.next.Add(1)%lockSessions], func() { r.inFlight.Add(-1) }
}

// relayed is a unary route's call that goes over one of r's sessions (onSession) or, when
// session says so, as a unary call.
func relayed[Req, Res proto.Message](r *lockRelay,
	onSession func(*lockclient.Client, context.Context, Req) (Res, error),
	unary func(context.Context, Req, ...grpc.CallOption) (Res, error),
) func(context.Context, Req) (proto.Message, error) {
	return func(ctx context.Context, req Req) (proto.Message, error) {
		if s, done := r.session(ctx); s != nil {
			defer done()
			return onSession(s, ctx, req)
		}
		return unary(ctx, req)
	}
}

func (r *lockRelay) close() {
	for _, s := range r.sessions {
		_ = s.Close()
	}
}
