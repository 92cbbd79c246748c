package transport

import (
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/usererr"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
)

// Attach implements the RPC: many sessions of one room on one stream (a gateway's sockets of
// the room). The room's events are read once, from one hub listener, and sent once; each
// session's State, Ack, Error and end carry its id.
//
// Goroutines: the reader applies controls in order and starts one short-lived goroutine per
// hello and per detach; this goroutine is the only one that sends. How the stream ends decides
// its sessions' fate, as on Join: the client ending it closes them; this replica stopping (or
// the stream falling behind the room) detaches them, open under their leases, to be
// re-attached on another stream with a fresh State.
func (s *Server) Attach(stream roomv1.RoomService_AttachServer) error {
	a := &attachStream{
		s: s, stream: stream, members: map[string]*member{},
		out: make(chan *roomv1.AttachResponse, 64), quit: make(chan struct{}), listen: make(chan *hub.Session, 1),
	}
	return a.serve()
}

// member is one session of an Attach stream.
type member struct {
	sess *hub.Session // nil while its hello is being answered
	left bool         // detached while its hello was being answered
}

type attachStream struct {
	s      *Server
	stream roomv1.RoomService_AttachServer
	out    chan *roomv1.AttachResponse // per-session answers, to the sender
	quit   chan struct{}               // closed when the handler returns
	listen chan *hub.Session           // hands the listener to the sender

	mu       sync.Mutex
	code     string // the stream's room, fixed by its first accepted hello
	listener *hub.Session
	members  map[string]*member
	stopped  bool // no more requests are applied
	inflight sync.WaitGroup
}

func (a *attachStream) serve() error {
	ctx := a.stream.Context()
	detach := false
	defer func() { a.finish(detach) }()
	readDone := make(chan error, 1)
	go a.read(readDone)

	var events <-chan hub.Event
	var listenerDone <-chan struct{}
	var listener *hub.Session
	for {
		select {
		case l := <-a.listen:
			listener, events, listenerDone = l, l.Events, l.Done()
		case ev := <-events:
			frame := eventFrame(ev)
			if frame == nil {
				continue
			}
			if err := a.stream.Send(&roomv1.AttachResponse{Frame: frame, Version: ev.Version}); err != nil {
				return streamEnd(ctx, err)
			}
		case <-listenerDone:
			reason := listener.Reason()
			if reason != domain.ReasonExpired && reason != domain.ReasonEnded {
				// The stream fell behind the room: its sessions re-attach with a fresh State.
				detach = true
				return status.Error(codes.Aborted, reason)
			}
			a.stop()
			a.flush()
			_ = a.stream.Send(&roomv1.AttachResponse{Frame: &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Ended{Ended: &roomv1.Ended{Reason: reason}}}})
			return nil
		case resp := <-a.out:
			if err := a.stream.Send(resp); err != nil {
				return streamEnd(ctx, err)
			}
		case err := <-readDone:
			// The client ended its side: its sessions end with it, after the answers to what
			// it sent.
			a.stop()
			a.flush()
			return streamEnd(ctx, err)
		case <-ctx.Done():
			return streamEnd(ctx, ctx.Err())
		case <-a.s.stopping.Done():
			a.stop()
			a.flush()
			detach = true
			return status.Error(codes.Unavailable, "The room service is restarting; reconnect.")
		}
	}
}

// stop applies no more requests.
func (a *attachStream) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
}

// flush waits for the requests being applied and sends their answers.
func (a *attachStream) flush() {
	idle := make(chan struct{})
	go func() { a.inflight.Wait(); close(idle) }()
	for {
		select {
		case resp := <-a.out:
			if a.stream.Send(resp) != nil {
				return
			}
		case <-idle:
			for {
				select {
				case resp := <-a.out:
					if a.stream.Send(resp) != nil {
						return
					}
				default:
					return
				}
			}
		}
	}
}

// finish ends the stream's sessions: closed (they leave the count) or detached (open under
// their leases), and lets go of the listener.
func (a *attachStream) finish(detach bool) {
	a.stop()
	close(a.quit)
	a.inflight.Wait()
	a.mu.Lock()
	sessions := make([]*hub.Session, 0, len(a.members))
	for id, m := range a.members {
		if m.sess != nil {
			sessions = append(sessions, m.sess)
		}
		delete(a.members, id)
	}
	l := a.listener
	a.mu.Unlock()
	for _, sess := range sessions {
		if detach {
			a.s.app.Detach(sess)
		} else {
			a.s.app.Close(sess)
		}
	}
	if l != nil {
		a.s.app.Unlisten(l)
	}
}

// read receives the client's requests until the stream ends or stops.
func (a *attachStream) read(done chan<- error) {
	for {
		req, err := a.stream.Recv()
		if err != nil {
			done <- err
			return
		}
		a.mu.Lock()
		if a.stopped {
			a.mu.Unlock()
			return
		}
		a.inflight.Add(1)
		a.mu.Unlock()
		switch f := req.GetFrame().(type) {
		case *roomv1.AttachRequest_Hello:
			a.hello(f.Hello)
		case *roomv1.AttachRequest_Detach:
			a.detach(f.Detach)
		case *roomv1.AttachRequest_Control:
			a.control(f.Control)
		case *roomv1.AttachRequest_Ping:
			// The gateway's heartbeat: answered by the sender, behind what is already queued,
			// so a pong also says the stream's answers are flowing.
			a.send(&roomv1.AttachResponse{Pong: f.Ping})
			a.inflight.Done()
		default:
			a.inflight.Done()
		}
	}
}

// send hands a session's answer to the sender.
func (a *attachStream) send(resp *roomv1.AttachResponse) {
	select {
	case a.out <- resp:
	case <-a.quit:
	}
}

// end answers a session's hello with its refusal, or says the service ended it.
func (a *attachStream) end(id string, err error) {
	st := status.Convert(a.s.status(a.stream.Context(), err))
	a.send(&roomv1.AttachResponse{SessionId: id, End: &roomv1.SessionEnd{Code: int32(st.Code()), Message: st.Message()}})
}

// hello opens or re-attaches a session; the answer (State or end) follows from its goroutine.
// Called by the reader with one inflight count, which the hello's goroutine gives back.
func (a *attachStream) hello(h *roomv1.Hello) {
	ctx := a.stream.Context()
	id := h.GetSessionId()
	if id == "" {
		a.end(id, usererr.Invalid("A hello on an Attach stream needs a session_id."))
		a.inflight.Done()
		return
	}
	a.mu.Lock()
	code, l := a.code, a.listener
	a.mu.Unlock()
	if code == "" {
		// The stream's first hello: listen to the room before any session reads its state.
		var err error
		if l, err = a.s.app.Listen(ctx, h.GetCode()); err != nil {
			a.end(id, a.s.status(ctx, err))
			a.inflight.Done()
			return
		}
		a.mu.Lock()
		a.code, a.listener = h.GetCode(), l
		a.mu.Unlock()
		a.listen <- l
	} else if h.GetCode() != code {
		a.end(id, usererr.Invalid("Every hello on one Attach stream names the same room."))
		a.inflight.Done()
		return
	}
	m := &member{}
	a.mu.Lock()
	a.members[id] = m
	a.mu.Unlock()
	a.s.work.Go(func() {
		defer a.inflight.Done()
		sess, joined, err := a.s.app.Open(ctx, appHello(h, true))
		a.mu.Lock()
		if err != nil {
			if a.members[id] == m {
				delete(a.members, id)
			}
			a.mu.Unlock()
			a.end(id, a.s.status(ctx, err))
			return
		}
		if m.left {
			a.mu.Unlock()
			a.s.app.Close(sess)
			a.send(&roomv1.AttachResponse{SessionId: id, End: &roomv1.SessionEnd{}})
			return
		}
		m.sess = sess
		a.mu.Unlock()
		state := stateProto(joined.State)
		state.Resumed = joined.Resumed
		a.send(&roomv1.AttachResponse{SessionId: id, Frame: &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_State{State: state}}, Version: joined.State.Version})
		go a.watch(id, m, sess)
	})
}

// watch tells the client when the service ends one session on its own: its lease lapsed, or
// it was re-attached on another stream. A room's end is the stream's, sent by the listener.
func (a *attachStream) watch(id string, m *member, sess *hub.Session) {
	select {
	case <-sess.Done():
	case <-a.quit:
		return
	}
	reason := sess.Reason()
	if reason == domain.ReasonExpired || reason == domain.ReasonEnded {
		// The room ended: the whole stream ends with it (once, from the listener), also when
		// only the lease renewal noticed it.
		a.mu.Lock()
		l := a.listener
		a.mu.Unlock()
		l.Kill(reason)
		return
	}
	a.mu.Lock()
	current := a.members[id] == m && !a.stopped
	if current {
		delete(a.members, id)
	}
	a.mu.Unlock()
	if !current {
		return
	}
	if reason == hub.Replaced {
		a.s.app.Detach(sess) // the session lives on in its new stream
	} else {
		a.s.app.Close(sess)
	}
	a.end(id, status.Error(codes.Aborted, reason))
}

// detach closes a session, as a Join stream its client ended does, and answers with the
// session's end (code OK) once it is closed (or was not open on this stream).
func (a *attachStream) detach(id string) {
	a.mu.Lock()
	m := a.members[id]
	if m == nil {
		a.mu.Unlock()
		a.send(&roomv1.AttachResponse{SessionId: id, End: &roomv1.SessionEnd{}})
		a.inflight.Done()
		return
	}
	delete(a.members, id)
	if m.sess == nil {
		m.left = true // its hello's goroutine closes it
		a.mu.Unlock()
		a.inflight.Done()
		return
	}
	a.mu.Unlock()
	a.s.work.Go(func() {
		defer a.inflight.Done()
		a.s.app.Close(m.sess)
		a.send(&roomv1.AttachResponse{SessionId: id, End: &roomv1.SessionEnd{}})
	})
}

// control applies a leader's control frame, in order, and answers it like Join does.
func (a *attachStream) control(c *roomv1.SessionControl) {
	defer a.inflight.Done()
	ctx := a.stream.Context()
	req := c.GetRequest()
	a.mu.Lock()
	var sess *hub.Session
	if m := a.members[c.GetSessionId()]; m != nil {
		sess = m.sess
	}
	a.mu.Unlock()
	var ans *roomv1.JoinResponse
	if sess == nil {
		ans = &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Error{Error: &roomv1.Error{
			Message: "This session is not open on this stream; send its hello first.", Ref: req.GetRef(),
		}}}
	} else {
		ans = a.s.apply(ctx, sess, req)
	}
	if ans != nil {
		a.send(&roomv1.AttachResponse{SessionId: c.GetSessionId(), Frame: ans})
	}
}
