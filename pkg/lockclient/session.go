package lockclient

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
)

// session is one open LockService.Session stream, shared by every mutex of a Client: each
// call is a request with an id of its own, answered by id, so a waiting Lock holds up nothing
// else on the stream.
type session struct {
	stream grpc.BidiStreamingClient[locksv1.SessionRequest, locksv1.SessionResponse]
	cancel context.CancelFunc
	done   chan struct{} // closed when the stream broke; err says why

	sendMu sync.Mutex // SendMsg is not safe for concurrent use

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *locksv1.SessionResponse
	err     error
}

// errSessionClosed is a call's answer after Client.Close.
var errSessionClosed = status.Error(codes.Canceled, "lockclient: client closed")

// errDrained fails the calls a session left unanswered when it ended cleanly: its replica
// drained, and promises that none of them ran. call and waitingAcquire send them again on a
// new session, up to maxResends times.
var errDrained = status.Error(codes.Unavailable, "lockclient: the lock service replica shut down before running the call")

// maxResends bounds how often one call is sent again after a drain (a new session may land on
// a replica that drains too).
const maxResends = 4

// opening is a session being opened; callers wait for it or for their own context.
type opening struct {
	done chan struct{}
	s    *session
	err  error
}

// session returns the open session, opening one when there is none or the last one broke. It
// waits for the opening no longer than ctx allows (a stream waits for its connection).
func (c *Client) session(ctx context.Context) (*session, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errSessionClosed
	}
	if s := c.sess; s != nil {
		select {
		case <-s.done:
		default:
			c.mu.Unlock()
			return s, nil
		}
	}
	op := c.opening
	if op == nil {
		op = &opening{done: make(chan struct{})}
		c.opening = op
		go c.open(op)
	}
	c.mu.Unlock()
	select {
	case <-op.done:
		return op.s, op.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// open opens a session stream for op; it outlives the callers that asked for it.
func (c *Client) open(op *opening) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.c.Session(ctx)
	c.mu.Lock()
	c.opening = nil
	switch {
	case err != nil:
		cancel()
		op.err = err
	case c.closed:
		cancel()
		op.err = errSessionClosed
	default:
		s := &session{stream: stream, cancel: cancel, done: make(chan struct{}), pending: map[int64]chan *locksv1.SessionResponse{}}
		go s.receive()
		c.sess, op.s = s, s
	}
	c.mu.Unlock()
	close(op.done)
}

// receive hands each answer to its call until the stream ends, then fails every call still
// waiting with UNAVAILABLE (retryable: the next call opens a new session): errDrained when the
// stream ended cleanly, so the calls did not run.
func (s *session) receive() {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			s.mu.Lock()
			if st, ok := status.FromError(err); ok && st.Code() == codes.Canceled {
				s.err = errSessionClosed
			} else if errors.Is(err, io.EOF) {
				s.err = errDrained
			} else {
				s.err = status.Errorf(codes.Unavailable, "lockclient: lock session ended: %v", err)
			}
			s.pending = nil
			s.mu.Unlock()
			close(s.done)
			s.cancel()
			return
		}
		s.mu.Lock()
		ch := s.pending[resp.GetId()]
		delete(s.pending, resp.GetId())
		s.mu.Unlock()
		if ch != nil {
			ch <- resp
		}
	}
}

// start registers a call and sends it; the answer arrives on the returned channel.
func (s *session) start(req *locksv1.SessionRequest) (int64, chan *locksv1.SessionResponse, error) {
	ch := make(chan *locksv1.SessionResponse, 1)
	s.mu.Lock()
	if s.pending == nil {
		err := s.err
		s.mu.Unlock()
		return 0, nil, err
	}
	s.nextID++
	id := s.nextID
	s.pending[id] = ch
	s.mu.Unlock()
	req.Id = id
	if err := s.send(req); err != nil {
		s.forget(id)
		return 0, nil, err
	}
	return id, ch, nil
}

func (s *session) send(req *locksv1.SessionRequest) error {
	s.sendMu.Lock()
	err := s.stream.Send(req)
	s.sendMu.Unlock()
	if err != nil {
		// The stream is broken; Recv says why, and fails the pending calls.
		<-s.done
		return s.err
	}
	return nil
}

func (s *session) forget(id int64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// answer waits for call id's answer, or until ctx ends (the answer is then dropped).
func (s *session) answer(ctx context.Context, id int64, ch chan *locksv1.SessionResponse) (*locksv1.SessionResponse, error) {
	select {
	case resp := <-ch:
		return resp, respErr(resp)
	case <-s.done:
		select {
		case resp := <-ch: // answered just before the stream broke
			return resp, respErr(resp)
		default:
		}
		return nil, s.err
	case <-ctx.Done():
		s.forget(id)
		return nil, ctx.Err()
	}
}

// call sends req and waits for its answer; a call its session's drain left unanswered (so not
// run) is sent again on a new session.
func (c *Client) call(ctx context.Context, req *locksv1.SessionRequest) (resp *locksv1.SessionResponse, err error) {
	for range maxResends + 1 {
		var s *session
		if s, err = c.session(ctx); err != nil {
			return nil, err
		}
		var id int64
		var ch chan *locksv1.SessionResponse
		if id, ch, err = s.start(req); err == nil {
			resp, err = s.answer(ctx, id, ch)
		}
		if !errors.Is(err, errDrained) {
			return resp, err
		}
	}
	return nil, err
}

// waitingAcquire sends a waiting acquire. When ctx ends first it cancels the acquire on the
// service and waits for the final answer, so a grant that crossed the cancel is not missed:
// it gives that lock back and returns ctx's error. An acquire its
// session's drain took out of the queue is sent again on a new session, for what is left of
// its wait, at the back of the queue.
func (c *Client) waitingAcquire(ctx context.Context, req *locksv1.AcquireRequest) (res *locksv1.AcquireResponse, err error) {
	deadline := time.Now().Add(time.Duration(req.GetWaitMs()) * time.Millisecond)
	for range maxResends + 1 {
		if res, err = c.waitOnce(ctx, req); !errors.Is(err, errDrained) {
			return res, err
		}
		left := max(time.Until(deadline).Milliseconds(), 1)
		req = proto.CloneOf(req)
		req.WaitMs = &left
	}
	return nil, err
}

// waitOnce is waitingAcquire on one session.
func (c *Client) waitOnce(ctx context.Context, req *locksv1.AcquireRequest) (*locksv1.AcquireResponse, error) {
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	id, ch, err := s.start(&locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: req}})
	if err != nil {
		return nil, err
	}
	var resp *locksv1.SessionResponse
	select {
	case resp = <-ch:
	case <-s.done:
		select {
		case resp = <-ch:
		default:
			return nil, s.err
		}
	case <-ctx.Done():
		if err := s.send(&locksv1.SessionRequest{Call: &locksv1.SessionRequest_Cancel{Cancel: &locksv1.CancelRequest{Id: id}}}); err != nil {
			return nil, ctx.Err() // the stream broke: the service drops the waiter itself
		}
		timer := time.NewTimer(c.cancelWait)
		defer timer.Stop()
		select {
		case resp = <-ch:
		case <-s.done:
			return nil, ctx.Err()
		case <-timer.C:
			// No answer to the cancel (the replica is paused or cut off, say): the caller
			// does not wait for keepalive to end the session. A grant that crossed the
			// cancel and arrives before the session ends is still given back.
			go c.giveBackLate(s, ch, req)
			return nil, ctx.Err()
		}
		if resp.GetAcquire().GetAcquired() {
			// Granted as the wait was cancelled: give it back, as the caller no longer waits.
			c.giveBack(req, resp.GetAcquire().GetFencingToken())
		}
		return nil, ctx.Err()
	}
	if err := respErr(resp); err != nil {
		return nil, err
	}
	return resp.GetAcquire(), nil
}

// giveBack releases the hold (its fencing token) granted to an acquire whose caller no longer
// waits; a later hold of the same owner is left alone.
func (c *Client) giveBack(req *locksv1.AcquireRequest, token int64) {
	rctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
	defer cancel()
	_, _ = c.call(rctx, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Release{Release: &locksv1.ReleaseRequest{
		Resource: req.GetResource(), Owner: req.GetOwner(), FencingToken: &token}}})
}

// giveBackLate waits for the answer to an acquire whose caller left before the answer to its
// cancel came, until the session ends (keepalive bounds that on a silent peer), and gives back
// a grant.
func (c *Client) giveBackLate(s *session, ch chan *locksv1.SessionResponse, req *locksv1.AcquireRequest) {
	select {
	case resp := <-ch:
		if resp.GetAcquire().GetAcquired() {
			c.giveBack(req, resp.GetAcquire().GetFencingToken())
		}
	case <-s.done:
	}
}

// respErr is the status error a session answer carries, if any.
func respErr(resp *locksv1.SessionResponse) error {
	if e := resp.GetError(); e != nil {
		return status.Error(codes.Code(e.GetCode()), e.GetMessage())
	}
	return nil
}

// Close ends the client's session: calls in flight fail, waiting acquires leave their queues
// on the service, and locks still held stay held until their lease ends (renewal stops with
// the session). A Client from Dial closes its connection too. A closed Client answers every
// call with a CANCELLED error.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	s := c.sess
	c.mu.Unlock()
	if s != nil {
		s.cancel()
		<-s.done
	}
	if c.conn != nil {
		return c.conn.Close()
	}
	return nil
}

var errNoAnswer = errors.New("lockclient: the service answered with an empty result")
