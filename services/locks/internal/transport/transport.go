// Package transport serves vigil.locks.v1.LockService: it checks requests against the
// domain's rules, calls the store, and maps domain errors to gRPC codes in one place.
package transport

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/services/locks/internal/domain"
)

// Locks is what the service needs from its store.
type Locks interface {
	Acquire(ctx context.Context, resource, owner string, ttl, wait time.Duration) (domain.Acquired, error)
	Release(ctx context.Context, resource, owner string) (bool, error)
	Renew(ctx context.Context, resource, owner string, ttl time.Duration) (domain.Renewed, error)
	Get(ctx context.Context, resource string) (domain.Lock, error)
}

// Server implements LockService on a Locks.
type Server struct {
	locksv1.UnimplementedLockServiceServer
	locks Locks
	log   *slog.Logger
}

var _ locksv1.LockServiceServer = (*Server)(nil)

// New returns a Server on locks.
func New(locks Locks, log *slog.Logger) *Server { return &Server{locks: locks, log: log} }

// Acquire implements LockService.Acquire.
func (s *Server) Acquire(ctx context.Context, req *locksv1.AcquireRequest) (*locksv1.AcquireResponse, error) {
	if err := checkResourceOwner(req.GetResource(), req.GetOwner()); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	ttl, err := domain.TTL(req.TtlMs)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	wait, err := domain.Wait(req.WaitMs)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	a, err := s.locks.Acquire(ctx, req.GetResource(), req.GetOwner(), ttl, wait)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	resp := &locksv1.AcquireResponse{Acquired: a.OK, FencingToken: a.Token, ExpiresAt: a.ExpiresAt.UnixMilli()}
	if !a.OK {
		resp.Holder = &a.Holder
	}
	return resp, nil
}

// Release implements LockService.Release.
func (s *Server) Release(ctx context.Context, req *locksv1.ReleaseRequest) (*locksv1.ReleaseResponse, error) {
	if err := checkResourceOwner(req.GetResource(), req.GetOwner()); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	ok, err := s.locks.Release(ctx, req.GetResource(), req.GetOwner())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &locksv1.ReleaseResponse{Released: ok}, nil
}

// Renew implements LockService.Renew.
func (s *Server) Renew(ctx context.Context, req *locksv1.RenewRequest) (*locksv1.RenewResponse, error) {
	if err := checkResourceOwner(req.GetResource(), req.GetOwner()); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	ttl, err := domain.TTL(req.TtlMs)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	r, err := s.locks.Renew(ctx, req.GetResource(), req.GetOwner(), ttl)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	resp := &locksv1.RenewResponse{Renewed: r.OK}
	if r.OK {
		exp := r.ExpiresAt.UnixMilli()
		resp.ExpiresAt = &exp
	}
	return resp, nil
}

// Get implements LockService.Get.
func (s *Server) Get(ctx context.Context, req *locksv1.GetRequest) (*locksv1.GetResponse, error) {
	if err := domain.CheckResource(req.GetResource()); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	l, err := s.locks.Get(ctx, req.GetResource())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	resp := &locksv1.GetResponse{Resource: l.Resource, Held: l.Held}
	if l.Held {
		exp := l.ExpiresAt.UnixMilli()
		resp.Owner, resp.FencingToken, resp.ExpiresAt = &l.Owner, &l.Token, &exp
	}
	return resp, nil
}

func checkResourceOwner(resource, owner string) error {
	if err := domain.CheckResource(resource); err != nil {
		return err
	}
	return domain.CheckOwner(owner)
}

// toStatus is the one place domain and store errors become gRPC statuses. Rule violations
// carry their sentence; anything else is logged and answered without internals.
func (s *Server) toStatus(ctx context.Context, err error) error {
	var inv *domain.InvalidError
	switch {
	case errors.As(err, &inv):
		return status.Error(codes.InvalidArgument, inv.Msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "The request was cancelled.")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "The request timed out; try again.")
	case errors.Is(err, domain.ErrTooManyWaiting):
		return status.Error(codes.ResourceExhausted, "Too many callers are waiting for locks here; try again shortly.")
	case errors.Is(err, domain.ErrShuttingDown):
		return status.Error(codes.Unavailable, "The lock service is restarting; try again.")
	default:
		s.log.ErrorContext(ctx, "lock operation failed", "event", "lock_error", "err", err)
		return status.Error(codes.Unavailable, "The lock store is unavailable; try again shortly.")
	}
}
