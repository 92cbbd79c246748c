package room

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/gateway/bridge"
	"github.com/vigil-dev/vigil/gateway/socket"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
)

// One upstream RoomService.Attach stream per practice room with sockets on this gateway (a
// practiceRoom), carrying every socket's session, and the local fan-out (the chat's design):
//
//   - Each socket is a session under a session id and client id fixed for its life. Its
//     hello goes on the room's stream; the service answers it with the session's State (or
//     its refusal), and its controls (leader) with an Ack or an Error carrying the session id.
//     The gateway numbers a socket's controls itself (the refs the service sees); a control
//     the client sent with a ref of its own is answered on the socket with that ref: an ack
//     frame (with the Ack's room-clock at) or the error frame.
//   - The room's relayed frames and occupancy arrive once, with the room's version: the room
//     frames each once (socket.TextFrame) and queues it on every socket that is attached and
//     has not seen that version (relayed leader frames go to viewers only). It keeps the last
//     few, so a socket whose State arrives after a frame newer than it still gets that frame.
//   - When the stream breaks because the Room service went away (a drain's UNAVAILABLE, a
//     killed replica, a refused connection), no socket closes: the room opens a new stream on
//     any live replica and re-sends every socket's hello (same session id, client id, role and
//     token), which the service treats as a re-attach (not counted again); each socket gets
//     its fresh State, then its controls still unanswered are re-sent with their refs (a
//     repeat is acked and not applied again). A control sent while detached waits for that.
//   - What ends a socket is told apart: the client leaving (its session is detached, a normal
//     leave, logged at debug), the room ending (4000 with the reason), the service dropping
//     the session (1013, reconnect), the room gone or the token refused on a re-attach (4000
//     "ended", 1008), and the gateway shutting down (1001).
//
// The room's goroutine only receives: every Send happens on a socket's reader goroutine or a
// short-lived one, under sendMu, so a stream blocked by flow control never stalls the fan-out.

// roomHelloTimeout bounds the Room service's answer to a socket's first hello.
const roomHelloTimeout = 10 * time.Second

// maxUnanswered bounds the controls a socket holds without an answer; while its session
// re-attaches, one more is refused with an error frame.
const maxUnanswered = 64

// roomRecentFrames is how many of the room's latest frames a room keeps for sockets whose
// State arrives after them.
const roomRecentFrames = 64

// practiceRoom is the gateway's side of one practice room: its Attach stream and its sockets.
type practiceRoom struct {
	bridge.Room // its code, reference count and life
	b           *Bridge

	sendMu sync.Mutex // serialises Send on the stream; never taken by the receiving goroutine

	mu      sync.Mutex
	stream  roomv1.RoomService_AttachClient // nil while re-attaching
	gen     int                             // counts the room's streams
	members map[string]*roomMember          // by session id
	recent  []roomRecent                    // the latest room frames, in version order
	// leaving are the sessions of sockets that left, until the service answers their detach:
	// a detach lost with its stream (or sent while there was none) is sent again, after the
	// session's hello, on the next stream, so the Lobby counts the leave then, not at the
	// session's lease end.
	leaving map[string]*roomv1.Hello
	ended   bool
}

// roomRecent is one of the room's frames, framed once for every socket.
type roomRecent struct {
	version     int64
	frame       socket.Frame
	viewersOnly bool
}

// roomMember is one socket's session.
type roomMember struct {
	r      *practiceRoom
	hello  *roomv1.Hello
	viewer bool

	// Guarded by r.mu.
	sock       *socket.Conn   // nil until upgraded
	pending    []socket.Frame // frames before the upgrade
	seen       int64          // the room version the socket is at
	stateGen   int            // the stream its last State came on
	live       int            // the stream its controls go to (0: hold them)
	nextRef    int64
	unanswered []*roomv1.JoinRequest // sent or waiting, no Ack/Error yet, in ref order
	clientRefs map[int64]int64       // the socket's own ref of an unanswered control, by its ref here
	ready      chan struct{}         // closed at the first State or refusal
	readyErr   error
	// closing is set when the socket was to be closed before its upgrade.
	closing     bool
	closeCode   websocket.StatusCode
	closeReason string
}

// join adds a socket's session to its room, starting the room's stream if it is the first,
// and waits for its first State (nil) or its refusal.
func (b *Bridge) join(hello *roomv1.Hello) (*roomMember, error) {
	r := b.rooms.Join(hello.GetCode())
	m := &roomMember{r: r, hello: hello, viewer: hello.GetRole() != roomv1.Role_ROLE_LEADER, ready: make(chan struct{})}
	r.mu.Lock()
	r.members[hello.GetSessionId()] = m
	stream := r.stream
	r.mu.Unlock()
	if stream != nil {
		r.send(stream, &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Hello{Hello: hello}})
	}
	t := time.NewTimer(roomHelloTimeout)
	defer t.Stop()
	select {
	case <-m.ready:
		r.mu.Lock()
		err := m.readyErr
		r.mu.Unlock()
		if err == nil {
			return m, nil
		}
		b.leave(m)
		return nil, err
	case <-t.C:
		b.leave(m)
		return nil, status.Error(codes.DeadlineExceeded, "hello timed out")
	}
}

// leave removes a socket's session: it is closed at the service (a detach), and the room's
// stream ends with its last socket.
func (b *Bridge) leave(m *roomMember) {
	r := m.r
	id := m.hello.GetSessionId()
	r.mu.Lock()
	var stream roomv1.RoomService_AttachClient
	if r.members[id] == m {
		delete(r.members, id)
		if !r.ended {
			r.leaving[id] = m.hello
			stream = r.stream
		}
	}
	r.mu.Unlock()
	if stream != nil {
		r.send(stream, &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Detach{Detach: id}})
	}
	b.rooms.Leave(r)
}

func newPracticeRoom(b *Bridge) *practiceRoom {
	return &practiceRoom{b: b, members: map[string]*roomMember{}, leaving: map[string]*roomv1.Hello{}}
}

var (
	_ bridge.Upstream = (*practiceRoom)(nil)
	_ bridge.Pinger   = (*practiceRoom)(nil)
)

// send sends one request on stream; a failed send is repaired by the next stream.
func (r *practiceRoom) send(stream roomv1.RoomService_AttachClient, req *roomv1.AttachRequest) {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	_ = stream.Send(req)
}

// Closed closes every socket: the gateway is shutting down.
func (r *practiceRoom) Closed() { r.closeAll(socket.GoingAway, "gateway shutting down") }

// Broken refuses every socket still waiting for its first State (503), as a Join that could
// not reach the service was: it has no session to keep. The others' sessions re-attach on the
// next stream.
func (r *practiceRoom) Broken(err error) {
	r.refuseWaiting(err)
	r.b.log.Info("room stream broke; re-attaching its sessions", "event", "room_reattach",
		"code", r.Name(), "grpc.code", status.Code(err).String(), "err", err)
}

// Ping asks the service for a pong on the room's stream (the bridge's heartbeat): a replica
// that stopped answering is noticed in seconds. It may block behind a stream held by flow
// control; the bridge calls it from a goroutine of its own.
func (r *practiceRoom) Ping() {
	r.mu.Lock()
	stream := r.stream
	r.mu.Unlock()
	if stream != nil {
		r.send(stream, pingRequest())
	}
}

// pingRequest is a heartbeat; its number (any, not 0) comes back in the pong.
func pingRequest() *roomv1.AttachRequest {
	return &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Ping{Ping: time.Now().UnixNano()}}
}

// Attach runs one stream until it breaks: it sends every socket's hello, then receives.
// answered reports whether the service answered anything on it.
func (r *practiceRoom) Attach(ctx context.Context) (answered bool, err error) {
	stream, err := r.b.client.Attach(ctx) // ends with ctx, which the loop ends when Attach returns
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	r.gen++
	gen := r.gen
	r.stream = stream
	hellos := make([]*roomv1.AttachRequest, 0, len(r.members)+2*len(r.leaving)+1)
	for _, m := range r.members {
		hellos = append(hellos, &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Hello{Hello: m.hello}})
	}
	// A socket that left with its detach unanswered: its session is re-attached and closed, so
	// the Lobby counts its leave now rather than when its lease ends.
	for _, h := range r.leaving {
		hellos = append(hellos,
			&roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Hello{Hello: h}},
			&roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Detach{Detach: h.GetSessionId()}})
	}
	// A first ping with the hellos: its pong tells the bridge at once that the service answers
	// pings, so the heartbeat judges this stream from its start.
	hellos = append(hellos, pingRequest())
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.stream = nil
		for _, m := range r.members {
			m.live = 0 // controls wait for the next stream
		}
		r.mu.Unlock()
	}()
	go func() {
		r.sendMu.Lock()
		defer r.sendMu.Unlock()
		for _, h := range hellos {
			if stream.Send(h) != nil {
				return // the stream broke: the next one sends them
			}
		}
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = status.Error(codes.Unavailable, "the room service ended the stream")
			}
			return answered, err
		}
		answered = true
		if resp.GetPong() != 0 {
			r.Pong()
			continue
		}
		r.Heard()
		if resp.GetSessionId() == "" {
			if ended := resp.GetFrame().GetEnded(); ended != nil {
				r.end(ended.GetReason())
				return true, bridge.ErrEnded
			}
			r.fanOut(gen, resp)
			continue
		}
		r.session(stream, gen, resp)
	}
}

// fanOut queues one of the room's frames, framed once, on every socket attached on this
// stream that has not seen its version.
func (r *practiceRoom) fanOut(gen int, resp *roomv1.AttachResponse) {
	f := roomRecent{
		version:     resp.GetVersion(),
		frame:       socket.TextFrame(encodeRoomFrame(resp.GetFrame())),
		viewersOnly: !forEveryone(resp.GetFrame()),
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recent) >= 2*roomRecentFrames {
		r.recent = append(r.recent[:0:0], r.recent[len(r.recent)-roomRecentFrames:]...)
	}
	r.recent = append(r.recent, f)
	for _, m := range r.members {
		if m.stateGen == gen {
			m.deliver(f)
		}
	}
}

// forEveryone reports whether a room frame goes to the leader too: occupancy and people's
// join and leave frames do; relayed leader frames go to the viewers only.
func forEveryone(f *roomv1.JoinResponse) bool {
	return f.GetOccupancy() != nil || f.GetJoin() != nil || f.GetLeave() != nil
}

// deliver queues f unless the socket has seen it or it is not for its role. Called with r.mu.
func (m *roomMember) deliver(f roomRecent) {
	if f.version <= m.seen || (f.viewersOnly && !m.viewer) {
		return
	}
	m.seen = f.version
	m.queue(f.frame)
}

// queue sends f to the socket, or keeps it until the upgrade. Called with r.mu.
func (m *roomMember) queue(f socket.Frame) {
	if m.sock != nil {
		m.sock.SendFrame(f)
		return
	}
	m.pending = append(m.pending, f)
}

// session handles a frame for one socket's session.
func (r *practiceRoom) session(stream roomv1.RoomService_AttachClient, gen int, resp *roomv1.AttachResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.members[resp.GetSessionId()]
	if m == nil {
		if resp.GetEnd() != nil {
			delete(r.leaving, resp.GetSessionId()) // its detach is answered: it is closed
		}
		return // it left
	}
	if e := resp.GetEnd(); e != nil {
		r.sessionEnded(m, gen, status.Error(codes.Code(e.GetCode()), e.GetMessage()))
		return
	}
	switch f := resp.GetFrame().GetFrame().(type) {
	case *roomv1.JoinResponse_State:
		first := m.stateGen == 0
		m.stateGen = gen
		m.seen = resp.GetVersion()
		state := socket.TextFrame(encodeRoomFrame(resp.GetFrame()))
		if m.sock == nil {
			m.pending = append(m.pending[:0], state) // a fresh state replaces what was waiting
		} else {
			m.sock.SendFrame(state)
		}
		for _, f := range r.recent {
			m.deliver(f) // newer than the state, and sent before it
		}
		if first {
			close(m.ready)
		} else {
			r.b.log.Info("room session re-attached", "event", "room_reattached", "code", r.Name(), "resumed", f.State.GetResumed())
		}
		go r.activate(m, stream, gen)
	case *roomv1.JoinResponse_Ack:
		if ref := m.answered(f.Ack.GetRef()); ref > 0 {
			m.queue(socket.TextFrame(roomAckFrame(ref, f.Ack)))
		}
	case *roomv1.JoinResponse_Error:
		var ref int64
		if r := f.Error.GetRef(); r > 0 {
			ref = m.answered(r)
		}
		m.queue(socket.TextFrame(roomRefusalFrame(f.Error.GetMessage(), ref)))
	}
}

// sessionEnded handles the service ending one session on the stream: a refused first hello
// refuses the socket; a final end closes it with the matching code; the Room service being
// unavailable for it (its store, say) retries its hello. Called with r.mu.
func (r *practiceRoom) sessionEnded(m *roomMember, gen int, err error) {
	if m.stateGen == 0 {
		delete(r.members, m.hello.GetSessionId())
		m.readyErr = err
		close(m.ready)
		return
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Aborted:
		// The service dropped the session (its lease lapsed): the client reconnects and starts
		// from the state.
		m.close(socket.TryAgainLater, st.Message())
	case codes.NotFound:
		m.close(roomCloseCode, "ended")
	case codes.Unauthenticated, codes.PermissionDenied:
		m.close(websocket.StatusPolicyViolation, st.Message())
	case codes.InvalidArgument, codes.FailedPrecondition:
		r.b.log.Warn("room session refused on re-attach", "event", "room_reattach_refused",
			"code", r.Name(), "grpc.code", st.Code().String(), "err", st.Message())
		m.close(websocket.StatusInternalError, "The room service refused this session; reconnect.")
	default:
		m.live = 0
		r.b.log.Info("room session not re-attached; trying again", "event", "room_reattach_retry",
			"code", r.Name(), "grpc.code", st.Code().String(), "err", st.Message())
		time.AfterFunc(time.Second, func() { r.retry(m, gen) })
	}
}

// retry sends a session's hello again on stream gen, if it is still the room's.
func (r *practiceRoom) retry(m *roomMember, gen int) {
	r.mu.Lock()
	stream := r.stream
	ok := r.gen == gen && stream != nil && r.members[m.hello.GetSessionId()] == m
	r.mu.Unlock()
	if ok {
		r.send(stream, &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Hello{Hello: m.hello}})
	}
}

// close closes the socket for good (its reader then leaves the room). Called with r.mu.
func (m *roomMember) close(code websocket.StatusCode, reason string) {
	m.live = 0
	if sock := m.sock; sock != nil {
		go sock.Close(code, reason)
		return
	}
	m.closing, m.closeCode, m.closeReason = true, code, reason
}

// end closes every socket: the room ended.
func (r *practiceRoom) end(reason string) {
	r.b.rooms.Forget(r)
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	r.closeAll(roomCloseCode, reason)
}

// closeAll closes every socket with code; a socket still waiting for its first State is
// refused.
func (r *practiceRoom) closeAll(code websocket.StatusCode, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, m := range r.members {
		if m.stateGen == 0 {
			delete(r.members, id)
			m.readyErr = status.Error(codes.NotFound, "ended")
			if code == socket.GoingAway {
				m.readyErr = status.Error(codes.Unavailable, reason)
			}
			close(m.ready)
			continue
		}
		m.close(code, reason)
	}
}

// refuseWaiting refuses every socket still waiting for its first State with err.
func (r *practiceRoom) refuseWaiting(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, m := range r.members {
		if m.stateGen == 0 {
			delete(r.members, id)
			m.readyErr = err
			close(m.ready)
		}
	}
}

// activate makes stream gen the one a session's controls go to, after re-sending (in order)
// those still unanswered.
func (r *practiceRoom) activate(m *roomMember, stream roomv1.RoomService_AttachClient, gen int) {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	if r.gen != gen || r.stream != stream || r.members[m.hello.GetSessionId()] != m {
		r.mu.Unlock()
		return
	}
	m.live = gen
	resend := append([]*roomv1.JoinRequest(nil), m.unanswered...)
	r.mu.Unlock()
	for _, req := range resend {
		if stream.Send(m.controlRequest(req)) != nil {
			return // the stream broke: the next one re-sends them
		}
	}
}

func (m *roomMember) controlRequest(req *roomv1.JoinRequest) *roomv1.AttachRequest {
	return &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Control{Control: &roomv1.SessionControl{SessionId: m.hello.GetSessionId(), Request: req}}}
}

// answered forgets the control the service answered and returns the socket's own ref of it
// (0: it had none). Called with r.mu.
func (m *roomMember) answered(ref int64) int64 {
	if i := slices.IndexFunc(m.unanswered, func(req *roomv1.JoinRequest) bool { return req.GetRef() == ref }); i >= 0 {
		m.unanswered = slices.Delete(m.unanswered, i, i+1)
	}
	client := m.clientRefs[ref]
	delete(m.clientRefs, ref)
	return client
}

// control numbers a client's control frame and sends it, or holds it until the session is
// re-attached. It returns the sentence of an error frame when the frame cannot be taken.
func (m *roomMember) control(req *roomv1.JoinRequest) string {
	r := m.r
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	if len(m.unanswered) >= maxUnanswered {
		if m.live == 0 {
			r.mu.Unlock()
			return "The room service is not answering; this frame was not sent. Send it again shortly."
		}
		// Attached, the oldest was sent long ago on a live stream: stop holding it. (Only a
		// service that does not answer refs leaves this many.)
		delete(m.clientRefs, m.unanswered[0].GetRef())
		m.unanswered = append(m.unanswered[:0], m.unanswered[1:]...)
	}
	m.nextRef++
	if client := req.GetRef(); client > 0 {
		if m.clientRefs == nil {
			m.clientRefs = map[int64]int64{}
		}
		m.clientRefs[m.nextRef] = client
	}
	req.Ref = m.nextRef
	m.unanswered = append(m.unanswered, req)
	var stream roomv1.RoomService_AttachClient
	if m.live != 0 && m.live == r.gen {
		stream = r.stream
	}
	r.mu.Unlock()
	if stream != nil {
		// A failed send is repaired by the next stream's activate.
		_ = stream.Send(m.controlRequest(req))
	}
	return ""
}

// upgraded hands the session its socket and the frames that waited for it.
func (m *roomMember) upgraded(sock *socket.Conn) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	m.sock = sock
	if m.closing {
		go sock.Close(m.closeCode, m.closeReason)
		return
	}
	if len(m.pending) > 0 {
		sock.SendFrames(m.pending)
		m.pending = nil
	}
}

// readSocket is the socket's reader: it checks the client's frames and hands controls to the
// session; a bad frame gets an error frame and the socket stays open. When the socket closes
// the session leaves.
func (m *roomMember) readSocket() {
	sock := m.sock
	defer func() {
		m.r.b.leave(m)
		sock.CloseNow()
		m.r.b.log.Debug("room socket left", "event", "ws_left", "route", "room", "code", m.r.Name())
	}()
	for {
		data, err := sock.Read()
		if err != nil {
			return
		}
		if !sock.Allow() {
			sock.Send(roomRefusalFrame("Too many frames; slow down.", frameRef(data)))
			continue
		}
		req, msg := decodeRoomFrame(data)
		if msg == "" {
			msg = m.control(req)
		}
		if msg != "" {
			sock.Send(roomRefusalFrame(msg, frameRef(data)))
		}
	}
}
