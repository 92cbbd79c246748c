package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/locks/service"
)

func TestWaitersServedInArrivalOrder(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	first := acquire(t, e.locks, "queue", "holder", 30000, 0)

	type grant struct {
		owner string
		res   *locksv1.AcquireResponse
		err   error
	}
	grants := make(chan grant, 5)
	owners := []string{"w1", "w2", "w3", "w4", "w5"}
	for i, o := range owners {
		go func() {
			res, err := e.locks.Acquire(context.Background(), &locksv1.AcquireRequest{Resource: "queue", Owner: o, TtlMs: ms(30000), WaitMs: ms(20000)})
			grants <- grant{o, res, err}
		}()
		// Each waiter is in the queue before the next one asks.
		wait.Until(t, fmt.Sprintf("%s queued", o), func() bool { return e.queueLen(t, "queue") == int64(i+1) })
	}

	prev := first.GetFencingToken()
	holder := "holder"
	for _, want := range owners {
		if !release(t, e.locks, "queue", holder) {
			t.Fatalf("Release(queue, %s) = false", holder)
		}
		g := <-grants
		if g.err != nil || !g.res.GetAcquired() {
			t.Fatalf("waiting Acquire(queue, %s) = %v, %v", g.owner, g.res, g.err)
		}
		if g.owner != want {
			t.Fatalf("lock went to %s, want %s (arrival order)", g.owner, want)
		}
		if g.res.GetFencingToken() <= prev {
			t.Errorf("%s got token %d, want > %d", g.owner, g.res.GetFencingToken(), prev)
		}
		prev, holder = g.res.GetFencingToken(), g.owner
	}
}

func TestWaitRunsOut(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	h := acquire(t, e.locks, "busy", "holder", 30000, 0)
	start := time.Now()
	res := acquire(t, e.locks, "busy", "patient", 30000, 300)
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("waiting Acquire answered after %v, want at least the 300ms wait", took)
	}
	if res.GetAcquired() || res.GetHolder() != "holder" || res.GetFencingToken() != h.GetFencingToken() {
		t.Errorf("Acquire(busy, patient, wait 300ms) = %v, want refused, holder 'holder'", res)
	}
	if n := e.queueLen(t, "busy"); n != 0 {
		t.Errorf("queue holds %d waiters after the wait ran out, want 0", n)
	}
}

func TestWaitOnFreeLockAnswersAtOnce(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	// It asks to wait the longest allowed; only an answer without queueing gets back before
	// the test's own deadline.
	res := acquire(t, e.locks, "free", "quick", 30000, 60000)
	if !res.GetAcquired() || res.Holder != nil {
		t.Errorf("Acquire(free, wait 60s) = %v, want acquired at once", res)
	}
}

func TestCancelledWaiterLeaves(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	acquire(t, e.locks, "door", "holder", 30000, 0)

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := e.locks.Acquire(ctx, &locksv1.AcquireRequest{Resource: "door", Owner: "quitter", WaitMs: ms(30000)})
		gone <- err
	}()
	wait.Until(t, "quitter queued", func() bool { return e.queueLen(t, "door") == 1 })
	stays := e.enqueue(t, &locksv1.AcquireRequest{Resource: "door", Owner: "stayer", WaitMs: ms(30000)}, 2)

	cancel()
	if err := <-gone; status.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Acquire error = %v, want Canceled", err)
	}
	wait.Until(t, "quitter to leave the queue", func() bool { return e.queueLen(t, "door") == 1 })

	release(t, e.locks, "door", "holder")
	if res := <-stays; !res.GetAcquired() {
		t.Fatalf("stayer's Acquire = %v, want acquired", res)
	}
	g, err := e.locks.Get(context.Background(), &locksv1.GetRequest{Resource: "door"})
	if err != nil || g.GetOwner() != "stayer" {
		t.Errorf("Get(door) = %v, %v; want held by stayer, not the cancelled waiter", g, err)
	}
}

func TestWaiterGetsLockAtExpiry(t *testing.T) {
	t.Parallel()
	clk := newTestClock()
	e := startLocks(t, withClock(clk))
	h := acquire(t, e.locks, "handoff", "sleepy", 300, 0)
	got := make(chan *locksv1.AcquireResponse, 1)
	go func() {
		res, err := e.locks.Acquire(context.Background(), &locksv1.AcquireRequest{Resource: "handoff", Owner: "next", TtlMs: ms(30000), WaitMs: ms(60000)})
		if err != nil {
			t.Errorf("waiting Acquire(handoff, next): %v", err)
		}
		got <- res
	}()
	wait.Until(t, "the waiter queued", func() bool { return e.queueLen(t, "handoff") == 1 })

	clk.Add(299 * time.Millisecond)
	if g, err := e.locks.Get(context.Background(), &locksv1.GetRequest{Resource: "handoff"}); err != nil || g.GetOwner() != "sleepy" {
		t.Fatalf("Get(handoff) 1 ms before the lease ends = %v, %v; want still sleepy's", g, err)
	}
	select {
	case res := <-got:
		t.Fatalf("waiter answered %v before the holder's lease ended", res)
	default:
	}
	// The lease ends; the holder never comes back. Only the expiry alarm (or a settling call,
	// and none is made) hands the lock over.
	clk.Add(time.Millisecond)
	res := <-got
	if !res.GetAcquired() || res.GetFencingToken() <= h.GetFencingToken() {
		t.Fatalf("waiting Acquire = %v, want acquired with token > %d", res, h.GetFencingToken())
	}
	if want := h.GetExpiresAt() + 30000; res.GetExpiresAt() != want {
		t.Errorf("waiter's lease ends at %d, want %d: granted at the holder's lease end", res.GetExpiresAt(), want)
	}
}

func TestDrainingReplicaSendsWaitersAway(t *testing.T) {
	t.Parallel()
	rdbEnv := startLocks(t) // a second replica on the same keys, which outlives the first
	addr, stop := rdbEnv.stoppableReplica(t)
	c := locksv1.NewLockServiceClient(servertest.Dial(t, addr))
	acquire(t, rdbEnv.locks, "drain", "holder", 30000, 0)

	errc := make(chan error, 1)
	go func() {
		_, err := c.Acquire(context.Background(), &locksv1.AcquireRequest{Resource: "drain", Owner: "waiter", WaitMs: ms(30000)})
		errc <- err
	}()
	wait.Until(t, "waiter queued", func() bool { return rdbEnv.queueLen(t, "drain") == 1 })
	stop()
	if err := <-errc; status.Code(err) != codes.Unavailable {
		t.Errorf("waiting Acquire on a draining replica = %v, want Unavailable", err)
	}
	if n := rdbEnv.queueLen(t, "drain"); n != 0 {
		t.Errorf("queue holds %d waiters after their replica drained, want 0", n)
	}
	release(t, rdbEnv.locks, "drain", "holder")
	if g, _ := rdbEnv.locks.Get(context.Background(), &locksv1.GetRequest{Resource: "drain"}); g.GetHeld() {
		t.Errorf("Get(drain) = %v, want free: the gone waiter must not be granted it", g)
	}
}

func TestWaitingCallsAreBounded(t *testing.T) {
	t.Parallel()
	e := startLocks(t, func(o *service.Options) { o.MaxWaiting = 1 })
	acquire(t, e.locks, "bounded", "holder", 30000, 0)
	e.enqueue(t, &locksv1.AcquireRequest{Resource: "bounded", Owner: "first", WaitMs: ms(20000)}, 1)

	_, err := e.locks.Acquire(context.Background(), &locksv1.AcquireRequest{Resource: "bounded", Owner: "second", WaitMs: ms(20000)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a second waiting Acquire with MaxWaiting 1 = %v, want ResourceExhausted", err)
	}
	if res := acquire(t, e.locks, "bounded", "third", 30000, 0); res.GetAcquired() || res.GetHolder() != "holder" {
		t.Errorf("Acquire without waiting = %v, want a plain refusal", res)
	}
	if res := acquire(t, e.locks, "other", "fourth", 30000, 20000); !res.GetAcquired() {
		t.Errorf("waiting Acquire of a free lock at the limit = %v, want acquired", res)
	}
	release(t, e.locks, "bounded", "holder")
	wait.Until(t, "the first waiter to get the lock", func() bool {
		g, err := e.locks.Get(context.Background(), &locksv1.GetRequest{Resource: "bounded"})
		return err == nil && g.GetOwner() == "first"
	})
}

// enqueue sends req, a waiting Acquire, in the background and returns once resource's queue
// holds n waiters; the answer (nil when the call failed) comes on the channel.
func (e *env) enqueue(t *testing.T, req *locksv1.AcquireRequest, n int64) <-chan *locksv1.AcquireResponse {
	t.Helper()
	got := make(chan *locksv1.AcquireResponse, 1)
	go func() {
		res, _ := e.locks.Acquire(context.Background(), req)
		got <- res
	}()
	wait.Until(t, req.GetOwner()+" queued", func() bool { return e.queueLen(t, req.GetResource()) == n })
	return got
}
