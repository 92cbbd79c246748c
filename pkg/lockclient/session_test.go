package lockclient

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
)

// silentLocks is a lock service that reads session requests and answers only when the test
// says so, as a paused replica does.
type silentLocks struct {
	locksv1.UnimplementedLockServiceServer
	reqs    chan *locksv1.SessionRequest
	answers chan *locksv1.SessionResponse
}

func (s *silentLocks) Session(stream locksv1.LockService_SessionServer) error {
	go func() {
		for {
			select {
			case a := <-s.answers:
				_ = stream.Send(a)
			case <-stream.Context().Done():
				return
			}
		}
	}()
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		s.reqs <- req
	}
}

func startSilent(t *testing.T) (*silentLocks, *Client) {
	t.Helper()
	s := &silentLocks{reqs: make(chan *locksv1.SessionRequest, 16), answers: make(chan *locksv1.SessionResponse)}
	addr := servertest.ServeGRPC(t, func(srv *grpc.Server) { locksv1.RegisterLockServiceServer(srv, s) })
	c, err := Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c.cancelWait = 50 * time.Millisecond
	t.Cleanup(func() { _ = c.Close() })
	return s, c
}

func next(t *testing.T, s *silentLocks) *locksv1.SessionRequest {
	t.Helper()
	select {
	case r := <-s.reqs:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no request reached the service in 30s")
		return nil
	}
}

// A waiting acquire whose caller leaves returns once the cancel goes unanswered for
// CancelWait, not when (if ever) the session ends; a grant that crossed the cancel and comes
// late is still given back.
func TestAcquireLeavesASilentSessionAfterItsCancel(t *testing.T) {
	s, c := startSilent(t)
	ctx, cancel := context.WithCancel(context.Background())
	wait := int64(60_000)
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(ctx, &locksv1.AcquireRequest{Resource: "printer", Owner: "w1", WaitMs: &wait})
		done <- err
	}()
	acq := next(t, s)
	if acq.GetAcquire() == nil {
		t.Fatalf("first request = %v, want the acquire", acq)
	}
	cancel()
	if got := next(t, s).GetCancel().GetId(); got != acq.GetId() {
		t.Fatalf("cancel of id %d, want %d", got, acq.GetId())
	}
	select {
	case err := <-done:
		if status.Code(err) != codes.Canceled {
			t.Fatalf("Acquire after its caller left = %v, want CANCELLED", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Acquire still waits for the answer to its cancel 30s after its caller left")
	}

	// The service answers late: granted. The client gives it back.
	s.answers <- &locksv1.SessionResponse{Id: acq.GetId(), Result: &locksv1.SessionResponse_Acquire{
		Acquire: &locksv1.AcquireResponse{Acquired: true, FencingToken: 7}}}
	rel := next(t, s).GetRelease()
	if rel.GetResource() != "printer" || rel.GetOwner() != "w1" {
		t.Fatalf("after a late grant the client sent %v, want the release of printer by w1", rel)
	}
}

// Dial's Client owns its connection: Close closes it, and calls after Close fail CANCELLED.
func TestDialedClientClosesItsConnection(t *testing.T) {
	_, c := startSilent(t)
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	_, err := c.Release(context.Background(), &locksv1.ReleaseRequest{Resource: "r", Owner: "o"})
	if status.Code(err) != codes.Canceled {
		t.Errorf("Release after Close = %v, want CANCELLED", err)
	}
	if err := c.conn.Close(); err == nil {
		t.Errorf("the connection was still open after Close")
	}
}

// A release answered UNAVAILABLE (the store did not confirm it: outcome unknown) is sent again
// with the same fencing token; the repeat finding the hold gone means the first one released
// it, so Unlock succeeds.
func TestUnlockRepeatsAReleaseOfUnknownOutcome(t *testing.T) {
	s, c := startSilent(t)
	m := c.Mutex("printer", MutexOptions{Owner: "w1", TTL: time.Minute, RetryBackoff: time.Millisecond})
	locked := make(chan error, 1)
	go func() { locked <- m.TryLock(context.Background()) }()
	acq := next(t, s)
	const token = 1_764_000_000_000_001 // a token as the store hands them out: its clock in µs
	s.answers <- &locksv1.SessionResponse{Id: acq.GetId(), Result: &locksv1.SessionResponse_Acquire{
		Acquire: &locksv1.AcquireResponse{Acquired: true, FencingToken: token}}}
	if err := <-locked; err != nil || m.FencingToken() != token {
		t.Fatalf("TryLock = %v, token %d; want held with %d", err, m.FencingToken(), token)
	}

	unlocked := make(chan error, 1)
	go func() { unlocked <- m.Unlock(context.Background()) }()
	first := next(t, s)
	if first.GetRelease().GetFencingToken() != token {
		t.Fatalf("first request of Unlock = %v, want the release of token %d", first, token)
	}
	s.answers <- &locksv1.SessionResponse{Id: first.GetId(), Result: &locksv1.SessionResponse_Error{Error: &locksv1.SessionError{
		Code: int32(codes.Unavailable), Message: "The store did not confirm in time that the change reached a replica."}}}
	again := next(t, s)
	if again.GetRelease().GetFencingToken() != token || again.GetRelease().GetOwner() != "w1" {
		t.Fatalf("after UNAVAILABLE the client sent %v, want the same release again", again)
	}
	s.answers <- &locksv1.SessionResponse{Id: again.GetId(), Result: &locksv1.SessionResponse_Release{
		Release: &locksv1.ReleaseResponse{Released: false}}}
	select {
	case err := <-unlocked:
		if err != nil {
			t.Errorf("Unlock after a repeated release found the hold gone = %v, want nil (the first one released it)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Unlock did not return within 30s of its repeat's answer")
	}
}
