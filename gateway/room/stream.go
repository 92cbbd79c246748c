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
//     frames each once (socket.TextFrame) and queues it on every socket whose State came on
//     that stream and has not seen that version (relayed leader frames go to viewers only). It
//     keeps the last few, so a socket whose State arrives after a frame newer than it still
//     gets that frame.
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
// One lock, the room's mu, owns all of this state, and nobody blocks while holding it: what
// goes to the service is queued on the stream (upstream) for the stream's one sender
// goroutine, and what goes to a socket on the socket's own queue, which never blocks. So a
// stream held by flow control stalls neither the fan-out (the room's goroutine only
// receives) nor a socket's reader.

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

	// mu guards every field below and the mutable fields of every roomMember, and is never held
	// across a call that can block. Whenever it is free:
	//   - up is the stream the room's requests are queued on (nil between streams), and each
	//     session in members has its hello queued on it once, each session in leaving its hello
	//     and then its detach (a hello the service was unavailable for is queued again a second
	//     later).
	//   - A member is open only while its State came on up (m.on == up); its controls are queued
	//     on up then and only then, after the ones it held: the service gets a session's
	//     controls after its hello, in ref order.
	//   - A member with no State yet (m.on == nil) is a socket waiting in join: it gets exactly
	//     one answer on m.ready, and leaves members when that is a refusal.
	mu      sync.Mutex
	up      *upstream
	members map[string]*roomMember // by session id
	recent  []roomRecent           // the latest room frames, in version order
	// leaving are the sessions of sockets that left, until the service answers their detach:
	// a detach lost with its stream (or sent while there was none) is sent again, after the
	// session's hello, on the next stream, so the Lobby counts the leave then, not at the
	// session's lease end.
	leaving map[string]*roomv1.Hello
	ended   bool
	// down is why the room's last stream broke, from Broken until the next stream begins (nil
	// while one runs, and before the first): a socket that joins meanwhile is refused with it
	// at once, as Broken refused the ones waiting, rather than waiting out roomHelloTimeout
	// for a service that is not there.
	down error
}

// upstream is one Attach stream with the requests queued for it, which its one sender
// goroutine (practiceRoom.send) sends in order.
type upstream struct {
	stream roomv1.RoomService_AttachClient
	out    []*roomv1.AttachRequest // queued, not yet taken by the sender; guarded by the room's mu
	wake   chan struct{}           // holds a token while out may have requests
}

// queue queues reqs for the sender. Called with the room's mu.
func (up *upstream) queue(reqs ...*roomv1.AttachRequest) {
	up.out = append(up.out, reqs...)
	select {
	case up.wake <- struct{}{}:
	default:
	}
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
	ready  chan error // buffered; its one value, sent under r.mu, answers the first hello: nil (a State) or the refusal

	// Guarded by r.mu.
	on          *upstream      // the stream its last State came on (nil: none yet)
	open        bool           // its controls go on r.up (on == r.up); false: they wait
	sock        *socket.Conn   // nil until upgraded
	pending     []socket.Frame // frames before the upgrade
	closeCode   websocket.StatusCode
	closeReason string // with closeCode (not 0): the socket is to be closed at its upgrade
	seen        int64  // the room version the socket is at
	nextRef     int64
	unanswered  []*roomv1.JoinRequest // sent or waiting, no Ack/Error yet, in ref order
	clientRefs  map[int64]int64       // the socket's own ref of an unanswered control, by its ref here
}

// join adds a socket's session to its room, starting the room's stream if it is the first,
// and waits for its first State (nil) or its refusal.
func (b *Bridge) join(hello *roomv1.Hello) (*roomMember, error) {
	r := b.rooms.Join(hello.GetCode())
	m := &roomMember{r: r, hello: hello, viewer: hello.GetRole() != roomv1.Role_ROLE_LEADER, ready: make(chan error, 1)}
	r.mu.Lock()
	if r.up == nil && r.down != nil {
		err := r.down
		r.mu.Unlock()
		b.rooms.Leave(r)
		return nil, err
	}
	r.members[hello.GetSessionId()] = m
	if r.up != nil {
		r.up.queue(helloRequest(hello))
	}
	r.mu.Unlock()
	t := time.NewTimer(roomHelloTimeout)
	defer t.Stop()
	select {
	case err := <-m.ready:
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
	if r.members[id] == m {
		delete(r.members, id)
		if !r.ended {
			r.leaving[id] = m.hello
			if r.up != nil {
				r.up.queue(detachRequest(id))
			}
		}
	}
	r.mu.Unlock()
	b.rooms.Leave(r)
}

func newPracticeRoom(b *Bridge) *practiceRoom {
	return &practiceRoom{b: b, members: map[string]*roomMember{}, leaving: map[string]*roomv1.Hello{}}
}

var (
	_ bridge.Upstream = (*practiceRoom)(nil)
	_ bridge.Pinger   = (*practiceRoom)(nil)
)

func helloRequest(h *roomv1.Hello) *roomv1.AttachRequest {
	return &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Hello{Hello: h}}
}

func detachRequest(sessionID string) *roomv1.AttachRequest {
	return &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Detach{Detach: sessionID}}
}

// pingRequest is a heartbeat; its number (any, not 0) comes back in the pong.
func pingRequest() *roomv1.AttachRequest {
	return &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Ping{Ping: time.Now().UnixNano()}}
}

// Closed closes every socket: the gateway is shutting down.
func (r *practiceRoom) Closed() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeAll(socket.GoingAway, "gateway shutting down")
}

// Broken refuses every socket still waiting for its first State (503), as a Join that could
// not reach the service was: it has no session to keep, and so is every socket that joins
// before the next stream begins (down). The others' sessions re-attach on the next stream.
func (r *practiceRoom) Broken(err error) {
	r.mu.Lock()
	r.down = err
	for id, m := range r.members {
		if m.on == nil {
			delete(r.members, id)
			m.ready <- err
		}
	}
	r.mu.Unlock()
	r.b.log.Info("room stream broke; re-attaching its sessions", "event", "room_reattach",
		"code", r.Name(), "grpc.code", status.Code(err).String(), "err", err)
}

// Ping asks the service for a pong on the room's stream (the bridge's heartbeat): a replica
// that stopped answering is noticed in seconds.
func (r *practiceRoom) Ping() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.up != nil {
		r.up.queue(pingRequest())
	}
}

// Attach runs one stream until it breaks: it queues every socket's hello, then receives.
// answered reports whether the service answered anything on it.
func (r *practiceRoom) Attach(ctx context.Context) (answered bool, err error) {
	stream, err := r.b.client.Attach(ctx) // ends with ctx, which the loop ends when Attach returns
	if err != nil {
		return false, err
	}
	up := &upstream{stream: stream, wake: make(chan struct{}, 1)}
	r.begin(up)
	defer r.broke(up)
	go r.send(ctx, up)
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
			r.fanOut(up, resp)
			continue
		}
		r.session(up, resp)
	}
}

// begin makes up the room's stream and queues on it every session's hello; the hello and then
// the detach of every socket that left with its detach unanswered (its session is re-attached
// and closed, so the Lobby counts its leave now rather than when its lease ends); and a first
// ping, whose pong tells the bridge at once that the service answers pings, so the heartbeat
// judges this stream from its start.
func (r *practiceRoom) begin(up *upstream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.up, r.down = up, nil
	for _, m := range r.members {
		up.queue(helloRequest(m.hello))
	}
	for id, h := range r.leaving {
		up.queue(helloRequest(h), detachRequest(id))
	}
	up.queue(pingRequest())
}

// broke ends up's time as the room's stream: controls wait for the next one.
func (r *practiceRoom) broke(up *upstream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.up = nil
	for _, m := range r.members {
		m.open = false
	}
}

// send is up's sender: it sends what is queued, in order, until the stream breaks or ctx (the
// stream's own) ends. What it could not send is sent again on the next stream (its hellos,
// detaches and unanswered controls) or not needed there (a ping).
func (r *practiceRoom) send(ctx context.Context, up *upstream) {
	for {
		select {
		case <-up.wake:
		case <-ctx.Done():
			return
		}
		r.mu.Lock()
		reqs := up.out
		up.out = nil
		r.mu.Unlock()
		for _, req := range reqs {
			if up.stream.Send(req) != nil {
				return // the stream broke: Recv says why
			}
		}
	}
}

// fanOut queues one of the room's frames, framed once, on every socket whose State came on
// up and has not seen its version.
func (r *practiceRoom) fanOut(up *upstream, resp *roomv1.AttachResponse) {
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
		if m.on == up {
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

// session handles a frame for one socket's session, received on up.
func (r *practiceRoom) session(up *upstream, resp *roomv1.AttachResponse) {
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
		r.sessionEnded(m, up, status.Error(codes.Code(e.GetCode()), e.GetMessage()))
		return
	}
	switch f := resp.GetFrame().GetFrame().(type) {
	case *roomv1.JoinResponse_State:
		first := m.on == nil
		m.on, m.seen = up, resp.GetVersion()
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
			m.ready <- nil
		} else {
			r.b.log.Info("room session re-attached", "event", "room_reattached", "code", r.Name(), "resumed", f.State.GetResumed())
		}
		// The session is open on up: the controls it holds go first, in ref order.
		for _, req := range m.unanswered {
			up.queue(m.controlRequest(req))
		}
		m.open = true
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

// sessionEnded handles the service ending one session on up: a refused first hello refuses
// the socket; a final end closes it with the matching code; the Room service being
// unavailable for it (its store, say) retries its hello. Called with r.mu.
func (r *practiceRoom) sessionEnded(m *roomMember, up *upstream, err error) {
	if m.on == nil {
		delete(r.members, m.hello.GetSessionId())
		m.ready <- err
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
		m.open = false
		r.b.log.Info("room session not re-attached; trying again", "event", "room_reattach_retry",
			"code", r.Name(), "grpc.code", st.Code().String(), "err", st.Message())
		time.AfterFunc(time.Second, func() { r.retry(m, up) })
	}
}

// retry queues a session's hello again on up, if it is still the room's stream (a new stream
// has queued it already).
func (r *practiceRoom) retry(m *roomMember, up *upstream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.up == up && r.members[m.hello.GetSessionId()] == m {
		up.queue(helloRequest(m.hello))
	}
}

// close closes the socket for good (its reader then leaves the room). Called with r.mu.
func (m *roomMember) close(code websocket.StatusCode, reason string) {
	m.open = false
	if sock := m.sock; sock != nil {
		go sock.Close(code, reason)
		return
	}
	m.closeCode, m.closeReason = code, reason
}

// end closes every socket: the room ended.
func (r *practiceRoom) end(reason string) {
	r.b.rooms.Forget(r)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	r.closeAll(roomCloseCode, reason)
}

// closeAll closes every socket with code; a socket still waiting for its first State is
// refused. Called with r.mu.
func (r *practiceRoom) closeAll(code websocket.StatusCode, reason string) {
	for id, m := range r.members {
		if m.on == nil {
			delete(r.members, id)
			if code == socket.GoingAway {
				m.ready <- status.Error(codes.Unavailable, reason)
			} else {
				m.ready <- status.Error(codes.NotFound, "ended")
			}
			continue
		}
		m.close(code, reason)
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

// control numbers a client's control frame and queues it on the stream, or holds it until the
// session is open again. It returns the sentence of an error frame when the frame cannot be
// taken.
func (m *roomMember) control(req *roomv1.JoinRequest) string {
	r := m.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(m.unanswered) >= maxUnanswered {
		if !m.open {
			return "The room service is not answering; this frame was not sent. Send it again shortly."
		}
		// Open, the oldest was sent long ago on a live stream: stop holding it. (Only a
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
	if m.open {
		r.up.queue(m.controlRequest(req))
	}
	return ""
}

// upgraded hands the session its socket and the frames that waited for it.
func (m *roomMember) upgraded(sock *socket.Conn) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	m.sock = sock
	if m.closeCode != 0 {
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
func (m *roomMember) readSocket(sock *socket.Conn) {
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
