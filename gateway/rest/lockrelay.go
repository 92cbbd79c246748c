package rest

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/lockclient"
	"github.com/vigil-dev/vigil/pkg/tracing"
)

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

// LockRelay sends lock writes over lockSessions session streams, or as unary calls.
type LockRelay struct {
	sessions [lockSessions]*lockclient.Client
	unary    locksv1.LockServiceClient
	next     atomic.Uint32
	inFlight atomic.Int64
}

// NewLockRelay opens the relay's sessions on cc (lazily: a session starts with its first call).
func NewLockRelay(cc *grpc.ClientConn) *LockRelay {
	r := &LockRelay{unary: locksv1.NewLockServiceClient(cc)}
	for i := range r.sessions {
		r.sessions[i] = lockclient.New(cc)
	}
	return r
}

// session picks the session for a call, and done to call when it is answered; nil when the
// call should be a unary one.
func (r *LockRelay) session(ctx context.Context) (*lockclient.Client, func()) {
	if tracing.Sampled(ctx) {
		return nil, nil
	}
	if r.inFlight.Add(1) > maxRelayed {
		r.inFlight.Add(-1)
		return nil, nil
	}
	return r.sessions[r.next.Add(1)%lockSessions], func() { r.inFlight.Add(-1) }
}

// Relayed is a unary route's call that goes over one of r's sessions (onSession) or, when
// session says so, as a unary call.
func Relayed[Req, Res proto.Message](r *LockRelay,
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

// Close ends the relay's sessions.
func (r *LockRelay) Close() {
	for _, s := range r.sessions {
		_ = s.Close()
	}
}

// HandleLockWrites registers the three REST lock writes, relayed by r.
func (s *Relay) HandleLockWrites(mux Mux, r *LockRelay) error {
	return errors.Join(
		HandleUnary(s, mux, "POST /locks/{resource}/acquire", http.StatusOK,
			Relayed(r, (*lockclient.Client).Acquire, r.unary.Acquire)),
		HandleUnary(s, mux, "POST /locks/{resource}/release", http.StatusOK,
			Relayed(r, (*lockclient.Client).Release, r.unary.Release)),
		HandleUnary(s, mux, "POST /locks/{resource}/renew", http.StatusOK,
			Relayed(r, (*lockclient.Client).Renew, r.unary.Renew)),
	)
}
