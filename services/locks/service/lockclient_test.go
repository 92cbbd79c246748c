package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/lockclient"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestLockClientMutex(t *testing.T) {
	t.Parallel()
	e, c := startClient(t)
	ctx := context.Background()
	m1 := c.Mutex("mutex", lockclient.MutexOptions{Owner: "one"})
	m2 := c.Mutex("mutex", lockclient.MutexOptions{Owner: "two"})

	if err := m1.TryLock(ctx); err != nil {
		t.Fatalf("m1.TryLock = %v", err)
	}
	t1 := m1.FencingToken()
	if t1 <= 0 {
		t.Errorf("m1.FencingToken() = %d, want positive", t1)
	}
	if err := m2.TryLock(ctx); !errors.Is(err, lockclient.ErrLocked) {
		t.Errorf("m2.TryLock while m1 holds = %v, want ErrLocked", err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := m2.Lock(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("m2.Lock with a 200ms deadline while m1 holds = %v, want DeadlineExceeded", err)
	}
	wait.Until(t, "the timed-out waiter to leave the queue", func() bool { return e.queueLen(t, "mutex") == 0 })

	locked := make(chan error, 1)
	go func() { locked <- m2.Lock(ctx) }()
	wait.Until(t, "m2 queued", func() bool { return e.queueLen(t, "mutex") == 1 })
	if err := m1.Unlock(ctx); err != nil {
		t.Fatalf("m1.Unlock = %v", err)
	}
	if err := <-locked; err != nil {
		t.Fatalf("m2.Lock = %v", err)
	}
	if t2 := m2.FencingToken(); t2 <= t1 {
		t.Errorf("m2.FencingToken() = %d, want > %d", t2, t1)
	}
	if m1.FencingToken() != 0 {
		t.Errorf("m1.FencingToken() after Unlock = %d, want 0", m1.FencingToken())
	}
	if err := m1.Unlock(ctx); !errors.Is(err, lockclient.ErrNotHeld) {
		t.Errorf("second m1.Unlock = %v, want ErrNotHeld", err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Errorf("m2.Unlock = %v", err)
	}
}

// locked is c's Mutex on resource, locked (Lock, waiting if need be); the test fails when it
// cannot be.
func locked(t *testing.T, c *lockclient.Client, resource string, o lockclient.MutexOptions) *lockclient.Mutex {
	t.Helper()
	m := c.Mutex(resource, o)
	if err := m.Lock(context.Background()); err != nil {
		t.Fatalf("Lock(%s) = %v", resource, err)
	}
	return m
}

func TestLockClientRenewsWhileHeld(t *testing.T) {
	t.Parallel()
	e, c := startClient(t)
	ctx := context.Background()
	// The lease is short enough to need renewal during the test and long enough (renewed every
	// second) that a busy machine does not lose it.
	m := locked(t, c, "renewed", lockclient.MutexOptions{Owner: "keeper", TTL: 3 * time.Second})
	defer m.Unlock(ctx)
	first, err := e.locks.Get(ctx, &locksv1.GetRequest{Resource: "renewed"})
	if err != nil {
		t.Fatal(err)
	}
	// Held well past its first lease, always by the same hold, only because it is renewed.
	wait.Until(t, "the lease to be renewed past two TTLs", func() bool {
		g, err := e.locks.Get(ctx, &locksv1.GetRequest{Resource: "renewed"})
		if err != nil || g.GetOwner() != "keeper" || g.GetFencingToken() != first.GetFencingToken() {
			t.Fatalf("Get(renewed) = %v, %v; want still held by keeper with token %d", g, err, first.GetFencingToken())
		}
		return g.GetExpiresAt() >= first.GetExpiresAt()+3000
	})
	select {
	case <-m.Lost():
		t.Errorf("Lost() closed while the lock was renewed")
	default:
	}
}

func TestLockClientNoticesLoss(t *testing.T) {
	t.Parallel()
	e, c := startClient(t)
	ctx := context.Background()
	m := locked(t, c, "taken", lockclient.MutexOptions{Owner: "victim", TTL: 300 * time.Millisecond})
	// Someone releases it under the owner's name and another owner takes it: the next renewal is
	// refused and the mutex reports the loss.
	if !release(t, e.locks, "taken", "victim") {
		t.Fatal("Release(taken, victim) = false")
	}
	acquire(t, e.locks, "taken", "thief", 30000, 0)
	wait.Until(t, "Lost() closed after the lock was taken", func() bool {
		select {
		case <-m.Lost():
			return true
		default:
			return false
		}
	})
	if m.FencingToken() != 0 {
		t.Errorf("FencingToken() after loss = %d, want 0", m.FencingToken())
	}
	if err := m.Unlock(ctx); !errors.Is(err, lockclient.ErrNotHeld) {
		t.Errorf("Unlock after loss = %v, want ErrNotHeld", err)
	}
}

// Mutexes of one Client share one session; closing the Client ends it, fails later calls, and
// leaves held locks held (their lease bounds them), while its waiting Lock leaves the queue.
func TestLockClientCloseEndsItsSession(t *testing.T) {
	t.Parallel()
	e, c := startClient(t)
	ctx := context.Background()
	locked(t, c, "closing-held", lockclient.MutexOptions{Owner: "closer"})
	acquire(t, e.locks, "closing-busy", "someone", 30000, 0)
	waiting := c.Mutex("closing-busy", lockclient.MutexOptions{Owner: "closer"})
	locked := make(chan error, 1)
	go func() { locked <- waiting.Lock(ctx) }()
	wait.Until(t, "the client's Lock queued", func() bool { return e.queueLen(t, "closing-busy") == 1 })

	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := <-locked; status.Code(err) != codes.Canceled {
		t.Errorf("the waiting Lock after Close = %v, want Canceled", err)
	}
	wait.Until(t, "the closed session's waiter to leave the queue", func() bool { return e.queueLen(t, "closing-busy") == 0 })
	if g, err := e.locks.Get(ctx, &locksv1.GetRequest{Resource: "closing-held"}); err != nil || g.GetOwner() != "closer" {
		t.Errorf("Get(closing-held) after Close = %v, %v; want still held by closer", g, err)
	}
	if err := c.Mutex("other", lockclient.MutexOptions{}).TryLock(ctx); status.Code(err) != codes.Canceled {
		t.Errorf("TryLock on a closed Client = %v, want Canceled", err)
	}
}

// Client.Acquire, Release and Renew are the unary calls over the session: the same answers,
// and the same statuses when the caller's context ends or the request is bad.
func TestLockClientUnaryCalls(t *testing.T) {
	t.Parallel()
	e, c := startClient(t)
	ctx := context.Background()
	ttl := int64(30000)
	const timed = "vigil_lock_session_call_seconds"
	okBefore := histogramCount(t, timed, "call", "acquire", "grpc_code", "OK")
	badBefore := histogramCount(t, timed, "call", "acquire", "grpc_code", "InvalidArgument")

	a, err := c.Acquire(ctx, &locksv1.AcquireRequest{Resource: "relayed", Owner: "one", TtlMs: &ttl})
	if err != nil || !a.GetAcquired() || a.GetFencingToken() <= 0 {
		t.Fatalf("Acquire of a free lock = %v, %v; want acquired with a token", a, err)
	}
	if r, err := c.Renew(ctx, &locksv1.RenewRequest{Resource: "relayed", Owner: "one", TtlMs: &ttl}); err != nil || !r.GetRenewed() {
		t.Errorf("Renew by the holder = %v, %v; want renewed", r, err)
	}
	if b, err := c.Acquire(ctx, &locksv1.AcquireRequest{Resource: "relayed", Owner: "two"}); err != nil || b.GetAcquired() || b.GetHolder() != "one" {
		t.Errorf("Acquire of a held lock = %v, %v; want not acquired, holder one", b, err)
	}
	if _, err := c.Acquire(ctx, &locksv1.AcquireRequest{Resource: "relayed", Owner: ""}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Acquire with no owner = %v, want INVALID_ARGUMENT", err)
	}

	// Each call on the session is timed, by call and code (gRPC's metrics see only the stream).
	if n := histogramCount(t, timed, "call", "acquire", "grpc_code", "OK"); n < okBefore+2 {
		t.Errorf("%s{call=acquire,grpc_code=OK} went from %d to %d after two answered acquires", timed, okBefore, n)
	}
	if n := histogramCount(t, timed, "call", "acquire", "grpc_code", "InvalidArgument"); n < badBefore+1 {
		t.Errorf("%s{call=acquire,grpc_code=InvalidArgument} went from %d to %d after a refused acquire", timed, badBefore, n)
	}

	// A waiting acquire whose caller goes away fails CANCELLED and leaves the queue.
	gone, cancel := context.WithCancel(ctx)
	failed := make(chan error, 1)
	go func() {
		_, err := c.Acquire(gone, &locksv1.AcquireRequest{Resource: "relayed", Owner: "two", WaitMs: ms(30000)})
		failed <- err
	}()
	wait.Until(t, "the relayed waiter to queue", func() bool { return e.queueLen(t, "relayed") == 1 })
	cancel()
	if err := <-failed; status.Code(err) != codes.Canceled {
		t.Errorf("waiting Acquire whose context was cancelled = %v, want CANCELLED", err)
	}
	wait.Until(t, "the cancelled waiter to leave the queue", func() bool { return e.queueLen(t, "relayed") == 0 })
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = c.Acquire(short, &locksv1.AcquireRequest{Resource: "relayed", Owner: "two", WaitMs: ms(30000)})
	cancelShort()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("waiting Acquire past its context's deadline = %v, want DEADLINE_EXCEEDED", err)
	}

	if r, err := c.Release(ctx, &locksv1.ReleaseRequest{Resource: "relayed", Owner: "one"}); err != nil || !r.GetReleased() {
		t.Errorf("Release by the holder = %v, %v; want released", r, err)
	}
	if r, err := c.Release(ctx, &locksv1.ReleaseRequest{Resource: "relayed", Owner: "one"}); err != nil || r.GetReleased() {
		t.Errorf("second Release = %v, %v; want not released", r, err)
	}
}

// lockclient fences what it sends: a Mutex whose hold was replaced by a later hold of the same
// owner (taken here by a raw call) finds ErrNotHeld on Unlock and leaves that hold alone.
func TestLockClientUnlockIsFenced(t *testing.T) {
	t.Parallel()
	e, c := startClient(t)
	ctx := context.Background()
	m := c.Mutex("press", lockclient.MutexOptions{Owner: "worker"})
	if err := m.TryLock(ctx); err != nil {
		t.Fatalf("TryLock = %v", err)
	}
	old := m.FencingToken()
	// The owner's hold is given back and taken again behind the Mutex's back.
	if !release(t, e.locks, "press", "worker") {
		t.Fatal("raw Release(press, worker) = false")
	}
	later := acquire(t, e.locks, "press", "worker", 30000, 0)
	if err := m.Unlock(ctx); !errors.Is(err, lockclient.ErrNotHeld) {
		t.Errorf("Unlock of hold %d after the owner's hold %d was taken = %v, want ErrNotHeld", old, later.GetFencingToken(), err)
	}
	g, err := e.locks.Get(ctx, &locksv1.GetRequest{Resource: "press"})
	if err != nil || !g.GetHeld() || g.GetFencingToken() != later.GetFencingToken() {
		t.Errorf("Get(press) = %v, %v; want the later hold %d still held", g, err, later.GetFencingToken())
	}
}
