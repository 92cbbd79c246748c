package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// rawSession drives a LockService.Session stream by hand: requests by id, answers by id.
type rawSession struct {
	stream grpc.BidiStreamingClient[locksv1.SessionRequest, locksv1.SessionResponse]
	cancel context.CancelFunc
	ended  chan error // the stream's end, once

	mu      sync.Mutex
	next    int64
	answers map[int64]chan *locksv1.SessionResponse
}

func openSession(t *testing.T, c locksv1.LockServiceClient) *rawSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Session(ctx)
	if err != nil {
		cancel()
		t.Fatalf("Session: %v", err)
	}
	s := &rawSession{stream: stream, cancel: cancel, ended: make(chan error, 1), answers: map[int64]chan *locksv1.SessionResponse{}}
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				s.ended <- err
				return
			}
			s.mu.Lock()
			ch := s.answers[resp.GetId()]
			s.mu.Unlock()
			if ch != nil {
				ch <- resp
			}
		}
	}()
	t.Cleanup(cancel)
	return s
}

// start sends a request with a fresh id; its answer comes on the channel.
func (s *rawSession) start(t *testing.T, req *locksv1.SessionRequest) (int64, chan *locksv1.SessionResponse) {
	t.Helper()
	s.mu.Lock()
	s.next++
	id := s.next
	ch := make(chan *locksv1.SessionResponse, 1)
	s.answers[id] = ch
	s.mu.Unlock()
	req.Id = id
	if err := s.stream.Send(req); err != nil {
		t.Fatalf("Send(%v): %v", req, err)
	}
	return id, ch
}

func (s *rawSession) do(t *testing.T, req *locksv1.SessionRequest) *locksv1.SessionResponse {
	t.Helper()
	_, ch := s.start(t, req)
	return <-ch
}

// sessionCaller runs unary-shaped calls over a raw session.
type sessionCaller struct {
	t *testing.T
	s *rawSession
}

func (c sessionCaller) Acquire(_ context.Context, in *locksv1.AcquireRequest, _ ...grpc.CallOption) (*locksv1.AcquireResponse, error) {
	r := c.s.do(c.t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: in}})
	return r.GetAcquire(), sessionErr(r)
}

func (c sessionCaller) Release(_ context.Context, in *locksv1.ReleaseRequest, _ ...grpc.CallOption) (*locksv1.ReleaseResponse, error) {
	r := c.s.do(c.t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Release{Release: in}})
	return r.GetRelease(), sessionErr(r)
}

func (c sessionCaller) Renew(_ context.Context, in *locksv1.RenewRequest, _ ...grpc.CallOption) (*locksv1.RenewResponse, error) {
	r := c.s.do(c.t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Renew{Renew: in}})
	return r.GetRenew(), sessionErr(r)
}

func sessionErr(r *locksv1.SessionResponse) error {
	if e := r.GetError(); e != nil {
		return status.Error(codes.Code(e.GetCode()), e.GetMessage())
	}
	return nil
}

// caller is what the semantics table runs on: the unary client, or a session.
type caller interface {
	Acquire(context.Context, *locksv1.AcquireRequest, ...grpc.CallOption) (*locksv1.AcquireResponse, error)
	Release(context.Context, *locksv1.ReleaseRequest, ...grpc.CallOption) (*locksv1.ReleaseResponse, error)
	Renew(context.Context, *locksv1.RenewRequest, ...grpc.CallOption) (*locksv1.RenewResponse, error)
}

// TestSessionMeansWhatUnaryMeans runs one table of calls through the unary calls and through a
// session, each on a lock of its own, and wants the same answers (tokens compared by the
// order they appear in, times by whether they are set).
func TestSessionMeansWhatUnaryMeans(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	type step struct {
		op            string // acquire, release, renew
		resource      string // "" is the table's lock
		owner         string
		ttlMs, waitMs *int64
	}
	steps := []step{
		{op: "acquire", owner: "alice"},
		{op: "acquire", owner: "alice", ttlMs: ms(60000)},
		{op: "acquire", owner: "bob"},
		{op: "release", owner: "bob"},
		{op: "renew", owner: "bob"},
		{op: "renew", owner: "alice", ttlMs: ms(45000)},
		{op: "acquire", owner: "carol", waitMs: ms(150)},
		{op: "release", owner: "alice"},
		{op: "release", owner: "alice"},
		{op: "acquire", owner: "bob", waitMs: ms(1000)},
		{op: "renew", owner: "alice"},
		{op: "acquire", owner: "dave", ttlMs: ms(99)},
		{op: "acquire", owner: "dave", ttlMs: ms(1 << 53)},
		{op: "acquire", owner: "dave", waitMs: ms(-1)},
		{op: "acquire", owner: ""},
		{op: "release", owner: "a\nb"},
		{op: "renew", owner: "bob", ttlMs: ms(0)},
		{op: "acquire", resource: "bad\x00name", owner: "bob"},
		{op: "release", owner: "bob"},
	}
	run := func(c caller, lock string) []string {
		var out []string
		tokens := map[int64]string{}
		tok := func(v int64) string {
			if v == 0 {
				return "0"
			}
			if _, ok := tokens[v]; !ok {
				tokens[v] = fmt.Sprintf("T%d", len(tokens)+1)
			}
			return tokens[v]
		}
		ctx := context.Background()
		for _, s := range steps {
			r := lock
			if s.resource != "" {
				r = s.resource
			}
			var got string
			var err error
			switch s.op {
			case "acquire":
				var a *locksv1.AcquireResponse
				if a, err = c.Acquire(ctx, &locksv1.AcquireRequest{Resource: r, Owner: s.owner, TtlMs: s.ttlMs, WaitMs: s.waitMs}); err == nil {
					got = fmt.Sprintf("acquired=%v token=%s holder=%v expires=%v", a.GetAcquired(), tok(a.GetFencingToken()), a.Holder != nil && a.GetHolder() != "", a.GetExpiresAt() > 0)
					if a.Holder != nil {
						got += " by " + a.GetHolder()
					}
				}
			case "release":
				var rel *locksv1.ReleaseResponse
				if rel, err = c.Release(ctx, &locksv1.ReleaseRequest{Resource: r, Owner: s.owner}); err == nil {
					got = fmt.Sprintf("released=%v", rel.GetReleased())
				}
			case "renew":
				var rn *locksv1.RenewResponse
				if rn, err = c.Renew(ctx, &locksv1.RenewRequest{Resource: r, Owner: s.owner, TtlMs: s.ttlMs}); err == nil {
					got = fmt.Sprintf("renewed=%v expires=%v", rn.GetRenewed(), rn.ExpiresAt != nil)
				}
			}
			if err != nil {
				st := status.Convert(err)
				got = fmt.Sprintf("error %v %q", st.Code(), st.Message())
			}
			out = append(out, fmt.Sprintf("%s(%s) -> %s", s.op, s.owner, got))
		}
		return out
	}
	unary := run(e.locks, "semantics-unary")
	session := run(sessionCaller{t, openSession(t, e.locks)}, "semantics-session")
	for i := range steps {
		if unary[i] != session[i] {
			t.Errorf("step %d: unary %s, session %s", i+1, unary[i], session[i])
		}
	}
	if t.Failed() {
		t.Logf("unary answers:\n%v", unary)
	}
}

// A waiting acquire holds up nothing else on its stream; a cancel takes it out of the queue.
func TestSessionWaitDoesNotBlockAndCancelLeaves(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	acquire(t, e.locks, "busy-door", "holder", 30000, 0)
	s := openSession(t, e.locks)
	waitID, waiting := s.start(t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: &locksv1.AcquireRequest{
		Resource: "busy-door", Owner: "patient", WaitMs: ms(60000)}}})
	wait.Until(t, "the session's acquire queued", func() bool { return e.queueLen(t, "busy-door") == 1 })

	// Other calls on the same stream are answered while the acquire waits.
	for i := range 20 {
		r := fmt.Sprintf("free-%d", i)
		a := s.do(t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: &locksv1.AcquireRequest{Resource: r, Owner: "patient"}}})
		if !a.GetAcquire().GetAcquired() {
			t.Fatalf("Acquire(%s) on the session = %v, want acquired while another acquire waits", r, a)
		}
		rel := s.do(t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Release{Release: &locksv1.ReleaseRequest{Resource: r, Owner: "patient"}}})
		if !rel.GetRelease().GetReleased() {
			t.Fatalf("Release(%s) on the session = %v, want released", r, rel)
		}
	}
	select {
	case r := <-waiting:
		t.Fatalf("the waiting acquire answered %v while the lock was held", r)
	default:
	}

	// The same id again while it is in flight is refused.
	if err := s.stream.Send(&locksv1.SessionRequest{Id: waitID, Call: &locksv1.SessionRequest_Renew{Renew: &locksv1.RenewRequest{Resource: "x", Owner: "y"}}}); err != nil {
		t.Fatal(err)
	}
	if r := <-waiting; r.GetError().GetCode() != int32(codes.InvalidArgument) {
		t.Fatalf("a request reusing an id in flight = %v, want InvalidArgument", r)
	}

	if err := s.stream.Send(&locksv1.SessionRequest{Call: &locksv1.SessionRequest_Cancel{Cancel: &locksv1.CancelRequest{Id: waitID}}}); err != nil {
		t.Fatal(err)
	}
	if r := <-waiting; r.GetError().GetCode() != int32(codes.Canceled) {
		t.Fatalf("the cancelled acquire answered %v, want a Canceled error", r)
	}
	if n := e.queueLen(t, "busy-door"); n != 0 {
		t.Errorf("queue holds %d waiters after the cancel, want 0", n)
	}
	if bad := s.do(t, &locksv1.SessionRequest{Id: 0}); bad.GetError().GetCode() != int32(codes.InvalidArgument) {
		t.Errorf("a request with no call = %v, want InvalidArgument", bad)
	}
}

// A stream that breaks takes its waiters out of the queues and releases nothing it held.
func TestBrokenSessionLeavesQueuesAndKeepsHolds(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	acquire(t, e.locks, "gate", "holder", 30000, 0)
	s := openSession(t, e.locks)
	if a := s.do(t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: &locksv1.AcquireRequest{Resource: "kept", Owner: "session-owner"}}}); !a.GetAcquire().GetAcquired() {
		t.Fatalf("Acquire(kept) on the session = %v", a)
	}
	for _, o := range []string{"w1", "w2"} {
		s.start(t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: &locksv1.AcquireRequest{Resource: "gate", Owner: o, WaitMs: ms(60000)}}})
	}
	wait.Until(t, "both session waiters queued", func() bool { return e.queueLen(t, "gate") == 2 })
	stays := e.enqueue(t, &locksv1.AcquireRequest{Resource: "gate", Owner: "unary-waiter", WaitMs: ms(60000)}, 3)

	s.cancel() // the client goes away
	if err := <-s.ended; status.Code(err) != codes.Canceled {
		t.Errorf("the broken stream ended with %v, want Canceled", err)
	}
	wait.Until(t, "the session's waiters to leave the queue", func() bool { return e.queueLen(t, "gate") == 1 })
	g, err := e.locks.Get(context.Background(), &locksv1.GetRequest{Resource: "kept"})
	if err != nil || g.GetOwner() != "session-owner" {
		t.Errorf("Get(kept) after the stream broke = %v, %v; want still held by session-owner", g, err)
	}
	release(t, e.locks, "gate", "holder")
	if res := <-stays; !res.GetAcquired() {
		t.Fatalf("the unary waiter's Acquire = %v, want acquired: the gone waiters ahead of it must be skipped", res)
	}
}

// Waiters on different sessions (different connections) are served in arrival order.
func TestSessionWaitersServedInArrivalOrder(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	first := acquire(t, e.locks, "fifo", "holder", 30000, 0)
	owners := []string{"s1", "s2", "s3", "s4", "s5"}
	answers := make([]chan *locksv1.SessionResponse, len(owners))
	for i, o := range owners {
		s := openSession(t, locksv1.NewLockServiceClient(servertest.Dial(t, e.addr)))
		_, answers[i] = s.start(t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: &locksv1.AcquireRequest{
			Resource: "fifo", Owner: o, TtlMs: ms(30000), WaitMs: ms(60000)}}})
		wait.Until(t, o+" queued", func() bool { return e.queueLen(t, "fifo") == int64(i+1) })
	}
	prev, holder := first.GetFencingToken(), "holder"
	for i, o := range owners {
		if !release(t, e.locks, "fifo", holder) {
			t.Fatalf("Release(fifo, %s) = false", holder)
		}
		r := <-answers[i]
		if !r.GetAcquire().GetAcquired() || r.GetAcquire().GetFencingToken() <= prev {
			t.Fatalf("%s's waiting acquire = %v, want acquired with a token > %d", o, r, prev)
		}
		for _, later := range answers[i+1:] {
			select {
			case r := <-later:
				t.Fatalf("a later waiter answered %v before %s", r, o)
			default:
			}
		}
		prev, holder = r.GetAcquire().GetFencingToken(), o
	}
}

// A draining replica ends its sessions cleanly (so clients reopen them elsewhere) and takes
// their waiters out of the queues instead of holding up the drain. Every call it answered ran;
// the waiter, taken out of its queue, gets no answer, which tells the client it did not run.
func TestDrainingReplicaEndsSessions(t *testing.T) {
	t.Parallel()
	e := startLocks(t) // a second replica on the same keys, which outlives the first
	addr, stop := e.stoppableReplica(t)
	acquire(t, e.locks, "drain-session", "holder", 30000, 0)
	s := openSession(t, locksv1.NewLockServiceClient(servertest.Dial(t, addr)))
	if a := s.do(t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: &locksv1.AcquireRequest{Resource: "drain-ran", Owner: "w"}}}); !a.GetAcquire().GetAcquired() {
		t.Fatalf("acquire of a free lock on the session = %v, want acquired", a)
	}
	_, waiter := s.start(t, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: &locksv1.AcquireRequest{Resource: "drain-session", Owner: "w", WaitMs: ms(60000)}}})
	wait.Until(t, "the session's waiter queued", func() bool { return e.queueLen(t, "drain-session") == 1 })
	stop()
	if err := <-s.ended; !errors.Is(err, io.EOF) {
		t.Errorf("the session on a drained replica ended with %v, want a clean end (EOF)", err)
	}
	select {
	case a := <-waiter:
		t.Errorf("the waiter taken out by the drain was answered %v; want no answer (it did not run)", a)
	default:
	}
	if n := e.queueLen(t, "drain-session"); n != 0 {
		t.Errorf("queue holds %d waiters after their replica drained, want 0", n)
	}
	if !release(t, e.locks, "drain-ran", "w") {
		t.Error("the lock acquired on the session before the drain is not held; an answered call must have run")
	}
}
