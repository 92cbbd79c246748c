package transport

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/input"
	"github.com/vigil-dev/vigil/pkg/usererr"
	"github.com/vigil-dev/vigil/services/locks/internal/domain"
)

// MaxSessionCalls bounds the calls one session may have in flight at once (waiting acquires
// included); one more is answered RESOURCE_EXHAUSTED at once.
const MaxSessionCalls = 4096

// DrainGrace bounds how long a draining session waits for the calls it is running to finish
// and their answers to be sent. A call runs for milliseconds; what outlasts this is an answer
// the client does not read (its receive window is full), and the session then ends UNAVAILABLE
// without waiting for it, so the client knows its unanswered calls may have run. Well below
// the server's drain timeout (10s by default), so the drain need not cut the session.
const DrainGrace = 2 * time.Second

// errUndelivered ends a drained session whose answers the client did not read in DrainGrace.
var errUndelivered = status.Error(codes.Unavailable, "the lock service replica shut down before the client read its answers; calls not answered may have run")

// maxIdleWorkers bounds the goroutines a session keeps waiting for their next turn to read. A
// busy session reuses its goroutines, and the stacks they grew in gRPC and go-redis, instead of
// starting and growing one per call (6 % of the CPU of 32 uncontended clients went to growing
// fresh stacks).
const maxIdleWorkers = 64

// Session implements LockService.Session. The session's goroutines take turns reading the
// stream: the one that reads a request hands the next read to an idle goroutine (or starts one)
// and runs the call itself, so a call starts at once instead of after waking a goroutine for
// it (that wake was 50–80 µs of a contended hand-off on a 2-core VM). A waiting acquire thus
// holds up nothing else on the stream, and answers go out in the order they are ready. When the
// stream breaks, the calls still running are cancelled: waiting acquires leave their queues
// (the store gives back a lock granted to one meanwhile), a grant whose answer cannot be sent
// is given back by its fencing token, and nothing else held is released.
//
// When the replica drains, the session ends cleanly (status OK) with a promise the client can
// act on: every call it answered ran, and every call it did not answer did not run. Calls
// already running finish and are answered; waiting acquires leave their queues unanswered (one
// granted before it left is answered); requests read after the drain began are not started.
// The client sends the unanswered ones again, on a session with another replica.
func (s *Server) Session(stream locksv1.LockService_SessionServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	return s.newSession(ctx, stream).serve(cancel)
}

func (s *Server) newSession(ctx context.Context, stream locksv1.LockService_SessionServer) *session {
	return &session{srv: s, stream: stream, ctx: ctx, calls: map[int64]*call{},
		turn: make(chan struct{}), recvErr: make(chan error, 1)}
}

// serve runs the session until the stream ends or the service drains; cancel ends ss.ctx.
func (ss *session) serve(cancel context.CancelFunc) error {
	s := ss.srv
	ss.passTurn()
	var err error
	select {
	case err = <-ss.recvErr:
		if err == nil {
			// The client closed its side: the calls in flight finish and are answered, unless
			// the replica drains first (a waiting acquire would hold the drain for its wait).
			finished := ss.finished()
			select {
			case <-finished:
			case <-s.stopping.Done():
				ss.drain()
				err = ss.await(finished)
			}
		}
	case <-s.stopping.Done():
		ss.drain()
		err = ss.await(ss.finished())
	}
	ss.mu.Lock()
	ss.done = true // no call starts after this
	ss.mu.Unlock()
	cancel()
	if err == errUndelivered {
		// A call is stuck sending to a client that does not read: it ends when the stream
		// does, as this handler returns; nothing else is sent, as ss.ctx has ended.
		return err
	}
	ss.wg.Wait()
	ss.sendMu.Lock()
	ss.closed = true // nothing is sent after the handler returns
	ss.sendMu.Unlock()
	return err
}

// finished is closed once the calls running have ended. Only once no call can start (reading
// ended, or the drain began): WaitGroup.Add must not race Wait at zero.
func (ss *session) finished() <-chan struct{} {
	ch := make(chan struct{})
	go func() { ss.wg.Wait(); close(ch) }()
	return ch
}

// await waits for finished for at most the drain grace; errUndelivered when it ran out.
func (ss *session) await(finished <-chan struct{}) error {
	t := time.NewTimer(ss.srv.drainGrace)
	defer t.Stop()
	select {
	case <-finished:
		return nil
	case <-t.C:
		ss.srv.log.Warn("lock session drained with answers the client did not read", "event", "session_drain_undelivered")
		return errUndelivered
	}
}

// drain stops the session taking calls and takes its waiting acquires out of their queues.
func (ss *session) drain() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.done = true
	for _, c := range ss.calls {
		if c.waits {
			c.drained = true
			c.stop()
		}
	}
}

// session is one open Session stream.
type session struct {
	srv    *Server
	stream locksv1.LockService_SessionServer
	ctx    context.Context
	wg     sync.WaitGroup

	turn    chan struct{} // the next read, to an idle worker
	recvErr chan error    // how reading ended: nil when the client closed its side
	idle    atomic.Int32  // workers waiting for a turn
	workers atomic.Int32  // workers alive
	started atomic.Int64  // workers ever started

	sendMu sync.Mutex // SendMsg is not safe for concurrent use
	closed bool       // under sendMu: Session has returned

	mu    sync.Mutex
	calls map[int64]*call // in flight, by request id
	done  bool            // under mu: the session drains or returns; no call starts
}

// call is one request running on a session.
type call struct {
	stop    context.CancelFunc
	waits   bool // an acquire that may wait in a queue
	drained bool // under session.mu: stopped by the drain, so it is not answered unless it ran
}

// next reads requests until one is to run, and returns it with its context; cancels and
// refused requests are dealt with here. ok is false when reading ended (recvErr says how).
func (ss *session) next() (ctx context.Context, c *call, req *locksv1.SessionRequest, ok bool) {
	for {
		req, err := ss.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			ss.recvErr <- err
			return nil, nil, nil, false
		}
		id := req.GetId()
		if err := input.Int("id", id, 0, input.MaxSafeInt); err != nil {
			ss.fail(id, err)
			continue
		}
		if c, ok := req.GetCall().(*locksv1.SessionRequest_Cancel); ok {
			ss.mu.Lock()
			running := ss.calls[c.Cancel.GetId()]
			ss.mu.Unlock()
			if running != nil {
				running.stop()
			}
			continue
		}
		if req.GetCall() == nil {
			ss.fail(id, usererr.Invalid("Each session request needs an acquire, release, renew or cancel."))
			continue
		}
		ctx, stop := context.WithCancel(ss.ctx)
		ss.mu.Lock()
		if ss.done {
			// Draining: the request is not run, and its missing answer says so.
			ss.mu.Unlock()
			stop()
			continue
		}
		_, dup := ss.calls[id]
		full := len(ss.calls) >= MaxSessionCalls
		c := &call{stop: stop, waits: req.GetAcquire().GetWaitMs() > 0}
		if !dup && !full {
			ss.calls[id] = c
			ss.wg.Add(1)
		}
		ss.mu.Unlock()
		switch {
		case dup:
			stop()
			ss.fail(id, usererr.Invalid("Request id %d is already in flight on this session; use a new id.", id))
			continue
		case full:
			stop()
			ss.fail(id, usererr.New(usererr.ErrExhausted, "This session has %d calls in flight; wait for some answers.", MaxSessionCalls))
			continue
		}
		return ctx, c, req, true
	}
}

// passTurn hands the next read to an idle worker, or starts a worker for it.
func (ss *session) passTurn() {
	select {
	case ss.turn <- struct{}{}:
	default:
		ss.workers.Add(1)
		ss.started.Add(1)
		go ss.worker()
	}
}

// worker reads the next request, passes the turn on and runs the call, then waits for another
// turn while fewer than maxIdleWorkers wait; it ends with the session, or when reading ends.
func (ss *session) worker() {
	defer ss.workers.Add(-1)
	for {
		ctx, c, req, ok := ss.next()
		if !ok {
			return
		}
		ss.passTurn()
		ss.handle(ctx, c, req)
		if ss.idle.Add(1) > maxIdleWorkers {
			ss.idle.Add(-1)
			return
		}
		select {
		case <-ss.turn:
			ss.idle.Add(-1)
		case <-ss.ctx.Done():
			ss.idle.Add(-1)
			return
		}
	}
}

// handle runs one call and sends its answer.
func (ss *session) handle(ctx context.Context, c *call, req *locksv1.SessionRequest) {
	defer ss.wg.Done()
	id := req.GetId()
	resp := &locksv1.SessionResponse{Id: id}
	start := time.Now()
	var err error
	var kind string
	switch r := req.GetCall().(type) {
	case *locksv1.SessionRequest_Acquire:
		kind = "acquire"
		var a *locksv1.AcquireResponse
		if a, err = ss.srv.acquire(ctx, r.Acquire); err == nil {
			resp.Result = &locksv1.SessionResponse_Acquire{Acquire: a}
		}
	case *locksv1.SessionRequest_Release:
		kind = "release"
		var rel *locksv1.ReleaseResponse
		if rel, err = ss.srv.release(ctx, r.Release); err == nil {
			resp.Result = &locksv1.SessionResponse_Release{Release: rel}
		}
	case *locksv1.SessionRequest_Renew:
		kind = "renew"
		var ren *locksv1.RenewResponse
		if ren, err = ss.srv.renew(ctx, r.Renew); err == nil {
			resp.Result = &locksv1.SessionResponse_Renew{Renew: ren}
		}
	}
	ss.mu.Lock()
	delete(ss.calls, id)
	drained := c.drained
	ss.mu.Unlock()
	c.stop()
	if err != nil && (drained || errors.Is(err, domain.ErrShuttingDown)) {
		// Taken out of its queue by the drain (the session's, or the store's stopping first):
		// it did not run, and goes unanswered.
		return
	}
	code := codes.OK
	if err != nil {
		code = ss.fail(id, err)
	} else if !ss.send(resp) {
		ss.srv.giveBack(ss.ctx, req.GetAcquire(), resp.GetAcquire())
	}
	ss.srv.metrics.SessionCall(kind, code, time.Since(start))
}

// fail answers request id with err's status, as the unary call would have, and returns its code.
func (ss *session) fail(id int64, err error) codes.Code {
	st := status.Convert(usererr.Status(ss.ctx, ss.srv.log, storeName, err))
	ss.send(&locksv1.SessionResponse{Id: id, Result: &locksv1.SessionResponse_Error{
		Error: &locksv1.SessionError{Code: int32(st.Code()), Message: st.Message()}}})
	return st.Code()
}

// send writes one answer and says whether it went out. A failed send means the stream is gone;
// Session's return ends the calls still running.
func (ss *session) send(resp *locksv1.SessionResponse) bool {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	if ss.closed || ss.ctx.Err() != nil {
		return false
	}
	return ss.stream.Send(resp) == nil
}
