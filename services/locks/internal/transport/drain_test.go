package transport

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/locks/internal/app"
	"github.com/vigil-dev/vigil/services/locks/internal/domain"
)

// waitingStore keeps every acquire waiting in its queue until its context ends (the drain
// takes it out), and releases at once.
type waitingStore struct {
	app.Store
	waiting atomic.Int64
	left    atomic.Int64
}

func (s *waitingStore) Acquire(ctx context.Context, resource, owner string, ttl, wait time.Duration) (domain.Acquired, error) {
	s.waiting.Add(1)
	<-ctx.Done()
	s.left.Add(1)
	return domain.Acquired{}, ctx.Err()
}

func (s *waitingStore) Release(context.Context, string, string, int64) (bool, error) {
	return true, nil
}

// deafStream is a Session stream whose client sent reqs, closed its side, and reads nothing:
// a Send blocks until the stream ends (as gRPC's does once the client's window is full).
type deafStream struct {
	fakeStream
	sending atomic.Int64
}

func (d *deafStream) Send(*locksv1.SessionResponse) error {
	d.sending.Add(1)
	<-d.ctx.Done()
	return d.ctx.Err()
}

func waitingAcquireReq(id int64) *locksv1.SessionRequest {
	w := int64(60_000)
	return &locksv1.SessionRequest{Id: id, Call: &locksv1.SessionRequest_Acquire{
		Acquire: &locksv1.AcquireRequest{Resource: "printer", Owner: "worker-2", WaitMs: &w}}}
}

// A client that half-closed with an acquire waiting does not hold up the drain: the acquire
// leaves its queue unanswered (it did not run) and the session ends cleanly, at once.
func TestDrainEndsAHalfClosedSessionsWaits(t *testing.T) {
	st := &waitingStore{}
	stopping, stop := context.WithCancel(context.Background())
	defer stop()
	srv := testServer(st, stopping)
	srv.drainGrace = time.Hour // the session must end without the grace running out
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := &fakeStream{ctx: ctx, reqs: make(chan *locksv1.SessionRequest)}
	_, served := serveSession(srv, ctx, cancel, stream)

	stream.reqs <- waitingAcquireReq(1)
	wait.Until(t, "the acquire waiting in its queue", func() bool { return st.waiting.Load() == 1 })
	close(stream.reqs) // the client half-closes
	stop()             // the replica drains

	err := sessionEnd(t, served)
	if err != nil {
		t.Errorf("session ended with %v, want nil (clean: unanswered calls did not run)", err)
	}
	if st.left.Load() != 1 {
		t.Errorf("%d acquires left their queue, want 1", st.left.Load())
	}
	if n := stream.answered(); n != 0 {
		t.Errorf("%d answers sent, want none for a drained acquire", n)
	}
}

// A client that half-closed and reads nothing does not hold up the drain either: the session
// waits DrainGrace for the answer it cannot send, then ends UNAVAILABLE (an answered call may
// have run), and the stuck send ends with the stream.
func TestDrainEndsASessionWhoseClientDoesNotRead(t *testing.T) {
	st := &waitingStore{}
	stopping, stop := context.WithCancel(context.Background())
	defer stop()
	srv := testServer(st, stopping)
	srv.drainGrace = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := &deafStream{fakeStream: fakeStream{ctx: ctx, reqs: make(chan *locksv1.SessionRequest)}}
	ss, served := serveSession(srv, ctx, cancel, stream)

	stream.reqs <- releaseReq(1)
	stream.reqs <- waitingAcquireReq(2)
	wait.Until(t, "the release's answer stuck sending and the acquire waiting", func() bool {
		return stream.sending.Load() == 1 && st.waiting.Load() == 1
	})
	close(stream.reqs)
	stop()

	err := sessionEnd(t, served)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("session ended with %v, want UNAVAILABLE (an answer was not delivered)", err)
	}
	wait.Until(t, "the drained acquire to leave its queue", func() bool { return st.left.Load() == 1 })
	wait.Until(t, "the session's workers to end", func() bool { return ss.workers.Load() == 0 })
}
