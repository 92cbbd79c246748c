// Package transport serves vigil.locks.v1.LockService: it maps protobuf to the app's use cases
// and back, and errors to gRPC statuses with usererr.Status. The unary calls serve REST (through
// the gateway) and simple callers; Session carries many calls over one stream (session.go).
package transport

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/usererr"
	"github.com/vigil-dev/vigil/services/locks/internal/app"
	"github.com/vigil-dev/vigil/services/locks/internal/domain"
)

// storeName is how errors of the Redis side are named to callers ("the locks store is
// unavailable; try again").
const storeName = "locks store"

// Server implements LockService on the app.
type Server struct {
	locksv1.UnimplementedLockServiceServer
	app *app.App
	log *slog.Logger
	// stopping ends when the service drains: open sessions end, so their clients
	// reconnect (to another replica) instead of holding up the drain.
	stopping context.Context
	// metrics time the calls on sessions, which gRPC's metrics see only as one long stream.
	metrics *app.Metrics
	// drainGrace bounds a draining session's wait for its running calls (DrainGrace).
	drainGrace time.Duration
}

var _ locksv1.LockServiceServer = (*Server)(nil)

// NewServer returns a Server on a; sessions end when stopping ends, and their calls are timed
// on m (nil: not timed).
func NewServer(a *app.App, log *slog.Logger, stopping context.Context, m *app.Metrics) *Server {
	return &Server{app: a, log: log, stopping: stopping, metrics: m, drainGrace: DrainGrace}
}

// Acquire implements LockService.Acquire.
func (s *Server) Acquire(ctx context.Context, req *locksv1.AcquireRequest) (*locksv1.AcquireResponse, error) {
	res, err := s.acquire(ctx, req)
	if err == nil && ctx.Err() != nil {
		// The caller left (or its deadline passed) as the lock was granted: it will not read
		// the answer, so the grant is given back.
		s.giveBack(ctx, req, res)
		err = ctx.Err()
	}
	return res, s.status(ctx, err)
}

// giveBackTimeout bounds the release of a grant that could not be answered.
const giveBackTimeout = 5 * time.Second

// giveBack releases a grant its client will never learn of (the call or stream ended before the
// answer went out: a replica resumed after a pause whose client gave up, say), by its fencing
// token, so the lock is free at once instead of after its TTL, and a later hold of the same owner
// is left alone.
func (s *Server) giveBack(ctx context.Context, req *locksv1.AcquireRequest, a *locksv1.AcquireResponse) {
	if !a.GetAcquired() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	token := a.GetFencingToken()
	if _, err := s.app.Release(ctx, req.GetResource(), req.GetOwner(), &token); err != nil {
		s.log.Warn("a grant the client never received was not given back; it ends with its TTL",
			"event", "lock_give_back_failed", "resource", req.GetResource(), "fencing_token", token, "err", err)
		return
	}
	s.log.Info("gave back a grant the client never received", "event", "lock_given_back",
		"resource", req.GetResource(), "fencing_token", token)
}

// Release implements LockService.Release.
func (s *Server) Release(ctx context.Context, req *locksv1.ReleaseRequest) (*locksv1.ReleaseResponse, error) {
	res, err := s.release(ctx, req)
	return res, s.status(ctx, err)
}

// Renew implements LockService.Renew.
func (s *Server) Renew(ctx context.Context, req *locksv1.RenewRequest) (*locksv1.RenewResponse, error) {
	res, err := s.renew(ctx, req)
	return res, s.status(ctx, err)
}

// Get implements LockService.Get.
func (s *Server) Get(ctx context.Context, req *locksv1.GetRequest) (*locksv1.GetResponse, error) {
	l, err := s.app.Get(ctx, req.GetResource())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return lockResponse(l), nil
}

func (s *Server) status(ctx context.Context, err error) error {
	return usererr.Status(ctx, s.log, storeName, err)
}

// The mappings, shared by the unary calls and the session stream.

func (s *Server) acquire(ctx context.Context, req *locksv1.AcquireRequest) (*locksv1.AcquireResponse, error) {
	a, err := s.app.Acquire(ctx, app.AcquireRequest{Resource: req.GetResource(), Owner: req.GetOwner(), TTLMs: req.TtlMs, WaitMs: req.WaitMs})
	if err != nil {
		return nil, err
	}
	resp := &locksv1.AcquireResponse{Acquired: a.OK, FencingToken: a.Token, ExpiresAt: a.ExpiresAt.UnixMilli()}
	if !a.OK {
		resp.Holder = proto.String(a.Holder)
	}
	return resp, nil
}

func (s *Server) release(ctx context.Context, req *locksv1.ReleaseRequest) (*locksv1.ReleaseResponse, error) {
	ok, err := s.app.Release(ctx, req.GetResource(), req.GetOwner(), req.FencingToken)
	if err != nil {
		return nil, err
	}
	return &locksv1.ReleaseResponse{Released: ok}, nil
}

func (s *Server) renew(ctx context.Context, req *locksv1.RenewRequest) (*locksv1.RenewResponse, error) {
	r, err := s.app.Renew(ctx, req.GetResource(), req.GetOwner(), req.TtlMs, req.FencingToken)
	if err != nil {
		return nil, err
	}
	resp := &locksv1.RenewResponse{Renewed: r.OK}
	if r.OK {
		resp.ExpiresAt = proto.Int64(r.ExpiresAt.UnixMilli())
	}
	return resp, nil
}

func lockResponse(l domain.Lock) *locksv1.GetResponse {
	resp := &locksv1.GetResponse{Resource: l.Resource, Held: l.Held}
	if l.Held {
		resp.Owner, resp.FencingToken, resp.ExpiresAt = proto.String(l.Owner), proto.Int64(l.Token), proto.Int64(l.ExpiresAt.UnixMilli())
	}
	return resp
}
