package transport

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/input"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// MaxSessionCalls bounds the calls one session may have in flight at once (waiting acquires
// included); one more is answered RESOURCE_EXHAUSTED at once.
const MaxSessionCalls = 4096

// Session implements LockService.Session: every request runs in its own goroutine, so a
// waiting acquire holds up nothing else on the stream, and answers go out in the order they
// are ready. When the stream ends, the calls still running are cancelled: waiting acquires
// leave their queues (the store gives back a lock granted to one meanwhile), and nothing held
// is released.
func (s *Server) Session(stream locksv1.LockService_SessionServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	ss := &session{srv: s, stream: stream, ctx: ctx, calls: map[int64]context.CancelFunc{}}
	recvErr := make(chan error, 1)
	go func() { recvErr <- ss.receive() }()
	var err error
	select {
	case err = <-recvErr:
	case <-s.stopping:
		// The replica drains: the stream ends with status OK (a normal end, not an error in
		// the logs) once the calls in flight are cancelled; clients open a new session, on
		// another replica.
	}
	if err == nil && !stopping(s.stopping) {
		// The client closed its side: the calls in flight finish and are answered.
		ss.wg.Wait()
	}
	ss.mu.Lock()
	ss.done = true // no call starts after this
	ss.mu.Unlock()
	cancel()
	ss.wg.Wait()
	ss.sendMu.Lock()
	ss.closed = true // nothing is sent after the handler returns
	ss.sendMu.Unlock()
	return err
}

func stopping(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// session is one open Session stream.
type session struct {
	srv    *Server
	stream locksv1.LockService_SessionServer
	ctx    context.Context
	wg     sync.WaitGroup

	sendMu sync.Mutex // SendMsg is not safe for concurrent use
	closed bool       // under sendMu: Session has returned

	mu    sync.Mutex
	calls map[int64]context.CancelFunc // in flight, by request id
	done  bool                         // under mu: Session is returning; no call starts
}

// receive reads requests until the client closes its side (nil) or the stream breaks.
func (ss *session) receive() error {
	for {
		req, err := ss.stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		id := req.GetId()
		if err := input.Int("id", id, 0, input.MaxSafeInt); err != nil {
			ss.fail(id, err)
			continue
		}
		if c, ok := req.GetCall().(*locksv1.SessionRequest_Cancel); ok {
			ss.mu.Lock()
			stop := ss.calls[c.Cancel.GetId()]
			ss.mu.Unlock()
			if stop != nil {
				stop()
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
			ss.mu.Unlock()
			stop()
			return nil
		}
		_, dup := ss.calls[id]
		full := len(ss.calls) >= MaxSessionCalls
		if !dup && !full {
			ss.calls[id] = stop
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
		go ss.handle(ctx, stop, req)
	}
}

// handle runs one call and sends its answer.
func (ss *session) handle(ctx context.Context, stop context.CancelFunc, req *locksv1.SessionRequest) {
	defer ss.wg.Done()
	id := req.GetId()
	resp := &locksv1.SessionResponse{Id: id}
	var err error
	switch c := req.GetCall().(type) {
	case *locksv1.SessionRequest_Acquire:
		var r *locksv1.AcquireResponse
		if r, err = ss.srv.acquire(ctx, c.Acquire); err == nil {
			resp.Result = &locksv1.SessionResponse_Acquire{Acquire: r}
		}
	case *locksv1.SessionRequest_Release:
		var r *locksv1.ReleaseResponse
		if r, err = ss.srv.release(ctx, c.Release); err == nil {
			resp.Result = &locksv1.SessionResponse_Release{Release: r}
		}
	case *locksv1.SessionRequest_Renew:
		var r *locksv1.RenewResponse
		if r, err = ss.srv.renew(ctx, c.Renew); err == nil {
			resp.Result = &locksv1.SessionResponse_Renew{Renew: r}
		}
	}
	ss.mu.Lock()
	delete(ss.calls, id)
	ss.mu.Unlock()
	stop()
	if err != nil {
		ss.fail(id, err)
		return
	}
	ss.send(resp)
}

// fail answers request id with err's status, as the unary call would have.
func (ss *session) fail(id int64, err error) {
	st := status.Convert(usererr.Status(ss.ctx, ss.srv.log, storeName, err))
	ss.send(&locksv1.SessionResponse{Id: id, Result: &locksv1.SessionResponse_Error{
		Error: &locksv1.SessionError{Code: int32(st.Code()), Message: st.Message()}}})
}

// send writes one answer. A failed send means the stream is gone; Session's return ends the
// calls still running.
func (ss *session) send(resp *locksv1.SessionResponse) {
	ss.sendMu.Lock()
	defer ss.sendMu.Unlock()
	if ss.closed || ss.ctx.Err() != nil {
		return
	}
	_ = ss.stream.Send(resp)
}
