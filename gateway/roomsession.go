package gateway

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/gateway/socket"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
)

// A room session is one socket's session with the Room service. It outlives its Join stream:
//
//   - The socket's reader (readSocket) numbers each control frame (ref 1, 2, 3, …), keeps it
//     until the service answers it (Ack, or an Error carrying its ref), and sends it on the
//     current stream, or holds it while there is none.
//   - run reads the stream and copies frames to the socket. When the stream breaks because
//     the Room service went away (a drain's UNAVAILABLE, a killed replica, a refused
//     connection), the socket stays open: run re-opens the session on any live replica with
//     the same hello (same session id, client id, role and token), which the service treats
//     as a re-attach (not counted again), sends the socket the fresh state, and re-sends every
//     control still unanswered; the service applies each at most once (a repeat is acked).
//   - What ends a socket is told apart: the client leaving (the socket's read fails: the
//     session's context is cancelled and the stream ends Canceled, logged at debug), the room
//     ending (4000 with the reason), the session being dropped by the service (1013, reconnect),
//     the room gone or the token refused on a re-attach (4000 "ended", 1008), and the gateway
//     shutting down (1001).

// roomHelloTimeout bounds the Room service's answer to a hello.
const roomHelloTimeout = 10 * time.Second

// maxUnanswered bounds the controls a socket holds without an answer; while its session
// re-attaches, one more is refused with an error frame.
const maxUnanswered = 64

// roomSession is one room socket's session (see above).
type roomSession struct {
	b     *roomBridge
	hello *roomv1.Hello
	sock  *socket.Conn
	// ctx is the session's life: cancelled when the socket closes.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	stream     roomv1.RoomService_JoinClient // nil while re-attaching
	nextRef    int64
	unanswered []*roomv1.JoinRequest // sent or waiting, no Ack/Error yet, in ref order

	sendMu sync.Mutex // serialises Send on the stream
}

func newRoomSession(b *roomBridge, hello *roomv1.Hello) *roomSession {
	ctx, cancel := context.WithCancel(context.Background())
	return &roomSession{b: b, hello: hello, ctx: ctx, cancel: cancel}
}

// attached is an open Join stream and its first answer (the State).
type attached struct {
	stream roomv1.RoomService_JoinClient
	cancel context.CancelFunc
	resp   *roomv1.JoinResponse
}

// attach opens a Join stream with the session's hello and waits (up to roomHelloTimeout) for
// the State.
func (s *roomSession) attach() (attached, error) {
	ctx, cancel := context.WithCancel(s.ctx)
	timer := time.AfterFunc(roomHelloTimeout, cancel)
	stream, err := s.b.client.Join(ctx)
	if err == nil {
		err = stream.Send(&roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Hello{Hello: s.hello}})
	}
	var first *roomv1.JoinResponse
	if err == nil {
		first, err = stream.Recv()
	}
	if !timer.Stop() && err != nil && s.ctx.Err() == nil {
		err = status.Error(codes.DeadlineExceeded, "hello timed out")
	}
	if err == nil && first.GetState() == nil {
		err = status.Error(codes.Internal, "the room service answered a hello without a state")
	}
	if err != nil {
		cancel()
		return attached{}, err
	}
	return attached{stream: stream, cancel: cancel, resp: first}, nil
}

// run serves the session's streams until the socket closes or the session ends for good.
func (s *roomSession) run(a attached) {
	defer s.cancel()
	backoff := 10 * time.Millisecond
	for {
		s.setStream(a.stream)
		err := s.pump(a.stream)
		s.setStream(nil)
		a.cancel()
		if s.ctx.Err() != nil {
			// The client left (or the gateway closed the socket): not an error.
			s.b.log.Debug("room socket left", "event", "ws_left", "route", "room", "code", s.hello.GetCode())
			return
		}
		if s.closeFor(err) {
			return
		}
		s.b.log.Info("room stream broke; re-attaching the session", "event", "room_reattach",
			"code", s.hello.GetCode(), "grpc.code", status.Code(err).String(), "err", err)
		for {
			t := time.NewTimer(backoff)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(backoff*2, time.Second)
			if a, err = s.attach(); err == nil {
				break
			}
			if s.ctx.Err() != nil || s.closeFor(err) {
				return
			}
		}
		backoff = 10 * time.Millisecond
		s.b.log.Info("room session re-attached", "event", "room_reattached", "code", s.hello.GetCode(),
			"resumed", a.resp.GetState().GetResumed())
		// Frames published while detached are in this state.
		s.sock.Send(encodeRoomFrame(a.resp))
	}
}

// errRoomEnded is pump's answer when the room ended (the socket is closed already).
var errRoomEnded = errors.New("room ended")

// pump copies the stream's frames to the socket until it breaks.
func (s *roomSession) pump(stream roomv1.RoomService_JoinClient) error {
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return status.Error(codes.Unavailable, "the room service ended the stream")
			}
			return err
		}
		switch f := resp.GetFrame().(type) {
		case *roomv1.JoinResponse_Ended:
			s.sock.Close(roomCloseCode, f.Ended.GetReason())
			return errRoomEnded
		case *roomv1.JoinResponse_Ack:
			s.answered(f.Ack.GetRef())
			continue
		case *roomv1.JoinResponse_Error:
			if ref := f.Error.GetRef(); ref > 0 {
				s.answered(ref)
			}
		}
		s.sock.Send(encodeRoomFrame(resp))
	}
}

// closeFor closes the socket when err ends the session for good, with the matching code, and
// reports whether it did. Errors that mean the Room service went away are not final: the
// session re-attaches.
func (s *roomSession) closeFor(err error) bool {
	if errors.Is(err, errRoomEnded) {
		return true
	}
	if s.b.conn.GetState() == connectivity.Shutdown {
		s.sock.Close(socket.GoingAway, "gateway shutting down")
		return true
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Aborted:
		// The service dropped the session (it fell behind, or its lease lapsed): the client
		// reconnects and starts from the state.
		s.sock.Close(socket.TryAgainLater, st.Message())
	case codes.NotFound:
		s.sock.Close(roomCloseCode, "ended")
	case codes.Unauthenticated, codes.PermissionDenied:
		s.sock.Close(websocket.StatusPolicyViolation, st.Message())
	case codes.InvalidArgument, codes.FailedPrecondition:
		s.b.log.Warn("room session refused on re-attach", "event", "room_reattach_refused",
			"code", s.hello.GetCode(), "grpc.code", st.Code().String(), "err", st.Message())
		s.sock.Close(websocket.StatusInternalError, "The room service refused this session; reconnect.")
	default:
		return false
	}
	return true
}

// setStream makes stream the one controls go to (nil while re-attaching) and re-sends the
// controls still unanswered, in order.
func (s *roomSession) setStream(stream roomv1.RoomService_JoinClient) {
	s.mu.Lock()
	s.stream = stream
	resend := append([]*roomv1.JoinRequest(nil), s.unanswered...)
	s.mu.Unlock()
	if stream == nil {
		return
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	for _, req := range resend {
		if stream.Send(req) != nil {
			return // the stream broke: the next one re-sends them
		}
	}
}

// answered forgets the control the service answered.
func (s *roomSession) answered(ref int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, req := range s.unanswered {
		if req.GetRef() == ref {
			s.unanswered = append(s.unanswered[:i], s.unanswered[i+1:]...)
			return
		}
	}
}

// control numbers a client's control frame and sends it, or holds it until the session is
// re-attached. It returns the sentence of an error frame when the frame cannot be taken.
func (s *roomSession) control(req *roomv1.JoinRequest) string {
	s.mu.Lock()
	if len(s.unanswered) >= maxUnanswered {
		if s.stream == nil {
			s.mu.Unlock()
			return "The room service is not answering; this frame was not sent. Send it again shortly."
		}
		// Attached, the oldest was sent long ago on a live stream: stop holding it. (Only a
		// service that does not answer refs leaves this many.)
		s.unanswered = append(s.unanswered[:0], s.unanswered[1:]...)
	}
	s.nextRef++
	req.Ref = s.nextRef
	s.unanswered = append(s.unanswered, req)
	stream := s.stream
	s.mu.Unlock()
	if stream != nil {
		s.sendMu.Lock()
		// A failed send is retried by the next stream's setStream.
		_ = stream.Send(req)
		s.sendMu.Unlock()
	}
	return ""
}

// readSocket is the socket's reader: it checks the client's frames and hands controls to the
// session; a bad frame gets an error frame and the socket stays open. When the socket closes
// the session ends (the stream's end closes it at the service).
func (s *roomSession) readSocket() {
	defer func() {
		s.cancel()
		s.sock.CloseNow()
	}()
	for {
		data, err := s.sock.Read()
		if err != nil {
			return
		}
		if !s.sock.Allow() {
			s.sock.Send(roomErrorFrame("Too many frames; slow down."))
			continue
		}
		req, msg := decodeRoomFrame(data)
		if msg == "" {
			msg = s.control(req)
		}
		if msg != "" {
			s.sock.Send(roomErrorFrame(msg))
		}
	}
}
