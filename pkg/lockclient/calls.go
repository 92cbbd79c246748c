package lockclient

import (
	"context"
	"errors"

	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
)

// Acquire, Release and Renew are the unary calls of LockService, made over the Client's
// session stream: each means exactly what the unary call means and fails with the status it
// would fail with (a call whose ctx ends fails CANCELLED or DEADLINE_EXCEEDED, as a gRPC call
// does). They suit a caller that relays many independent calls, as the gateway
// relays REST: one message each way instead of a gRPC call each.

// Acquire is LockService.Acquire. When ctx ends while the acquire waits in the lock's queue,
// the wait is cancelled on the service and a lock granted meanwhile is given back, as the
// unary call does when its caller goes away.
func (c *Client) Acquire(ctx context.Context, req *locksv1.AcquireRequest) (*locksv1.AcquireResponse, error) {
	if req.GetWaitMs() > 0 {
		res, err := c.waitingAcquire(ctx, req)
		return res, asStatus(err)
	}
	resp, err := c.call(ctx, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: req}})
	return answer(resp.GetAcquire(), err)
}

// Release is LockService.Release.
func (c *Client) Release(ctx context.Context, req *locksv1.ReleaseRequest) (*locksv1.ReleaseResponse, error) {
	resp, err := c.call(ctx, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Release{Release: req}})
	return answer(resp.GetRelease(), err)
}

// Renew is LockService.Renew.
func (c *Client) Renew(ctx context.Context, req *locksv1.RenewRequest) (*locksv1.RenewResponse, error) {
	resp, err := c.call(ctx, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Renew{Renew: req}})
	return answer(resp.GetRenew(), err)
}

// answer is a session call's result, or errNoAnswer when the service sent none.
func answer[T comparable](res T, err error) (T, error) {
	var zero T
	if err == nil && res == zero {
		err = errNoAnswer
	}
	return res, asStatus(err)
}

// asStatus is err as a gRPC status error: the context's own errors become CANCELLED and
// DEADLINE_EXCEEDED, as a unary call reports them.
func asStatus(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return err
}
