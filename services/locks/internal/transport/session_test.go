package transport

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/locks/internal/app"
)

// A session's workers take turns reading: the one that read a call runs it, and the next read
// goes to an idle worker instead of a new goroutine; at most maxIdleWorkers wait between
// calls, and they end with the session.
func TestSessionReusesItsWorkers(t *testing.T) {
	st := &gateStore{gate: make(chan struct{})}
	srv := testServer(st, context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	stream := &fakeStream{ctx: ctx, reqs: make(chan *locksv1.SessionRequest)}
	ss, served := serveSession(srv, ctx, cancel, stream)

	const n = 100
	for id := int64(1); id <= n; id++ {
		stream.reqs <- releaseReq(id)
	}
	wait.Until(t, "100 releases running at once", func() bool { return st.running.Load() == n })
	// One each, and one reading the next request.
	wait.Until(t, "a worker reading", func() bool { return ss.workers.Load() == n+1 })
	if got := ss.started.Load(); got != n+1 {
		t.Fatalf("100 calls at once started %d workers, want one each and a reader", got)
	}
	close(st.gate)
	wait.Until(t, "100 answers", func() bool { return stream.answered() == n })
	wait.Until(t, "the workers beyond maxIdleWorkers to end", func() bool {
		return ss.workers.Load() == maxIdleWorkers+1 && ss.idle.Load() == maxIdleWorkers
	})

	for id := int64(n + 1); id <= n+10; id++ {
		stream.reqs <- releaseReq(id)
		wait.Until(t, "the answer to the call", func() bool { return stream.answered() == int(id) })
	}
	if got := ss.started.Load(); got != n+1 {
		t.Errorf("10 calls on a session with idle workers started %d new workers, want 0", got-n-1)
	}
	if ids := stream.ids(); len(ids) != n+10 {
		t.Errorf("answered %d distinct calls, want %d, each once", len(ids), n+10)
	}

	close(stream.reqs) // the client closes its side
	if err := <-served; err != nil {
		t.Fatalf("session ended with %v, want nil", err)
	}
	wait.Until(t, "the session's workers to end with it", func() bool { return ss.workers.Load() == 0 })
}

func releaseReq(id int64) *locksv1.SessionRequest {
	return &locksv1.SessionRequest{Id: id, Call: &locksv1.SessionRequest_Release{
		Release: &locksv1.ReleaseRequest{Resource: "printer", Owner: "worker-1"}}}
}

// testServer is a Server over st that logs nothing; stopping's end drains it.
func testServer(st app.Store, stopping context.Context) *Server {
	log := slog.New(slog.DiscardHandler)
	return NewServer(app.New(st, app.Options{Logger: log}), log, stopping, nil)
}

// serveSession serves a session of srv on stream; served gets what serve returns, and cancel
// ends the session's context.
func serveSession(srv *Server, ctx context.Context, cancel context.CancelFunc, stream locksv1.LockService_SessionServer) (ss *session, served chan error) {
	ss = srv.newSession(ctx, stream)
	served = make(chan error, 1)
	go func() { served <- ss.serve(cancel) }()
	return ss, served
}

// sessionEnd waits for the session to end and returns what serve returned.
func sessionEnd(t *testing.T, served chan error) error {
	t.Helper()
	var err error
	wait.Until(t, "the session to end", func() bool {
		select {
		case err = <-served:
			return true
		default:
			return false
		}
	})
	return err
}

// fakeStream is the server side of a Session stream: requests from reqs, answers kept.
type fakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	reqs chan *locksv1.SessionRequest

	mu    sync.Mutex
	resps []*locksv1.SessionResponse
}

func (f *fakeStream) Context() context.Context { return f.ctx }

func (f *fakeStream) Recv() (*locksv1.SessionRequest, error) {
	select {
	case r, ok := <-f.reqs:
		if !ok {
			return nil, io.EOF
		}
		return r, nil
	case <-f.ctx.Done():
		return nil, f.ctx.Err()
	}
}

func (f *fakeStream) Send(r *locksv1.SessionResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resps = append(f.resps, r)
	return nil
}

func (f *fakeStream) answered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.resps)
}

// ids are the released calls answered, by id.
func (f *fakeStream) ids() map[int64]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := map[int64]bool{}
	for _, r := range f.resps {
		if r.GetRelease().GetReleased() {
			ids[r.GetId()] = true
		}
	}
	return ids
}

// gateStore releases every lock once gate is closed; the rest is not called here.
type gateStore struct {
	app.Store
	gate    chan struct{}
	running atomic.Int64
}

func (s *gateStore) Release(ctx context.Context, resource, owner string, _ int64) (bool, error) {
	s.running.Add(1)
	select {
	case <-s.gate:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}
