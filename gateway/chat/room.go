package chat

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/vigil-dev/vigil/gateway/bridge"
	"github.com/vigil-dev/vigil/gateway/socket"
	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
)

// One upstream Connect stream per room with members on this gateway, and its fan-out: each
// message is encoded once and queued on every member's socket; a broken stream re-attaches
// from the last delivered id.

// chatRoom is the gateway's side of one room: its upstream stream, its recent messages, and
// its local members.
type chatRoom struct {
	bridge.Room
	b *Bridge

	ready    chan struct{} // closed when the first history arrived
	readyErr error

	mu        sync.Mutex
	members   map[*chatMember]struct{}
	recent    []chatEntry // contiguous ids ending at lastID
	lastID    int64
	attached  bool // lastID is meaningful: re-attach with since = lastID
	joinLimit int
	stream    chatv1.ChatService_ConnectClient // nil while detached
	pending   map[string]*pendingPost
	postRefs  uint64
	// Who is here (presence.go): the members in order of arrival at pversion (presenceKnown
	// once the first history carried them), the sessions whose exit the service has not
	// confirmed, and the last sockets waiting for that confirmation.
	present       []presentMember
	pversion      int64
	presenceKnown bool
	exits         map[string]struct{}
	exitWaiters   map[string]chan struct{}

	sendMu sync.Mutex // serialises Send on the stream
}

// chatEntry is one message, encoded once for every socket.
type chatEntry struct {
	id int64
	// obj is the message as a JSON object; frame is the message frame, framed once for every
	// socket.
	obj   []byte
	frame socket.Frame
}

// recentMin is how many messages a room keeps at least, to serve joins and short resumes
// without asking the service.
const recentMin = 256

func newChatRoom(b *Bridge) *chatRoom {
	return &chatRoom{b: b, ready: make(chan struct{}), members: map[*chatMember]struct{}{}, pending: map[string]*pendingPost{},
		exits: map[string]struct{}{}, exitWaiters: map[string]chan struct{}{}}
}

var (
	_ bridge.Upstream = (*chatRoom)(nil)
	_ bridge.Pinger   = (*chatRoom)(nil)
)

// Ping asks the service for a pong on the room's stream (the bridge's heartbeat): a replica
// that stopped answering (paused, partitioned) is noticed in seconds. It may block behind a
// stream held by flow control; the bridge calls it from a goroutine of its own.
func (r *chatRoom) Ping() {
	r.mu.Lock()
	stream := r.stream
	r.mu.Unlock()
	if stream == nil {
		return
	}
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	// A failed send shows as the stream's end.
	_ = stream.Send(pingRequest())
}

// pingRequest is a heartbeat; its number (any, not 0) comes back in the pong.
func pingRequest() *chatv1.ConnectRequest {
	return &chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Ping{Ping: time.Now().UnixNano()}}
}

// Broken logs a broken stream; the bridge re-attaches (to any replica) from the last
// delivered id.
func (r *chatRoom) Broken(err error) {
	r.b.log.Warn("chat stream broke; re-attaching", "event", "chat_reattach", "room", r.Name(), "lastId", r.lastIDNow(), "err", err)
}

func (r *chatRoom) lastIDNow() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastID
}

// Closed closes every member: the gateway is shutting down.
func (r *chatRoom) Closed() {
	r.mu.Lock()
	members := make([]*chatMember, 0, len(r.members))
	for m := range r.members {
		members = append(members, m)
	}
	r.mu.Unlock()
	for _, m := range members {
		go m.sock.Close(socket.GoingAway, "gateway shutting down")
	}
}

// Attach runs one Connect stream until it breaks; answered is whether its history arrived.
func (r *chatRoom) Attach(ctx context.Context) (answered bool, err error) {
	sctx, cancel := context.WithCancel(ctx) // a gap in the messages ends the stream early (deliver)
	defer cancel()
	stream, err := r.b.client.Connect(sctx)
	if err != nil {
		return false, err
	}
	join := &chatv1.Join{Room: r.Name(), Presence: true}
	r.mu.Lock()
	if r.attached {
		since := r.lastID
		join.Since = &since
	}
	r.mu.Unlock()
	if err := stream.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Join{Join: join}}); err != nil {
		return false, err
	}
	first, err := stream.Recv()
	if err != nil {
		return false, err
	}
	h := first.GetHistory()
	if h == nil {
		return false, errors.New("chat stream: first response is not a history")
	}
	r.applyHistory(h)
	r.setStream(stream)
	defer r.setStream(nil)
	// One ping at once: its pong tells the bridge this service answers pings, so an idle
	// room's silent stream is judged from now on.
	r.Ping()
	// Post results are handed over as they arrive, not queued behind the fan-out of the
	// messages before them; messages go to the fan-out below, in order.
	msgs := make(chan *chatv1.ChatMessage, 1024)
	recvErr := make(chan error, 1)
	go func() {
		defer close(msgs)
		for {
			resp, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			if resp.GetPong() != 0 {
				r.Pong()
				continue
			}
			r.Heard()
			if r.presenceChange(resp) {
				continue
			}
			switch k := resp.Kind.(type) {
			case *chatv1.ConnectResponse_Message:
				select {
				case msgs <- k.Message:
				case <-sctx.Done():
					recvErr <- sctx.Err()
					return
				}
			case *chatv1.ConnectResponse_PostResult:
				r.resolve(k.PostResult)
			}
		}
	}()
	// Under load, messages that are already waiting are fanned out together: each socket gets
	// them in one queue append and one write.
	var deliverErr error
	batch := make([]*chatv1.ChatMessage, 0, maxFanOutBatch)
	for m := range msgs {
		if deliverErr != nil {
			continue // draining after a gap, until the receiver stops
		}
		batch = append(batch[:0], m)
	more:
		for len(batch) < maxFanOutBatch {
			select {
			case m, ok := <-msgs:
				if !ok {
					break more
				}
				batch = append(batch, m)
			default:
				break more
			}
		}
		if deliverErr = r.deliver(batch); deliverErr != nil {
			cancel()
		}
	}
	if deliverErr != nil {
		return true, deliverErr
	}
	return true, <-recvErr
}

// applyHistory takes a stream's first answer: the room's start, or the messages missed while
// detached.
func (r *chatRoom) applyHistory(h *chatv1.History) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h.GetPresence() != nil {
		r.applyPresenceLocked(h.GetPresence())
	}
	if !r.attached {
		r.attached = true
		r.joinLimit = int(h.GetJoinLimit())
		if r.joinLimit <= 0 {
			r.joinLimit = 50
		}
		r.recent = r.recent[:0]
		for _, m := range h.GetMessages() {
			r.recent = append(r.recent, encodeChatEntry(m))
		}
		r.lastID = h.GetLastId()
		close(r.ready)
		return
	}
	msgs := h.GetMessages()
	if h.GetTruncated() || (len(msgs) > 0 && msgs[0].GetId() > r.lastID+1) {
		// Messages were trimmed from the log while detached: they are lost to this room's
		// members, and the recent list restarts so it stays contiguous.
		r.b.log.Warn("chat messages missed while detached are no longer kept", "event", "chat_gap_lost", "room", r.Name(), "lastId", r.lastID)
		r.recent = r.recent[:0]
	}
	for _, m := range msgs {
		r.deliverLocked(m)
	}
	if h.GetLastId() > r.lastID && len(msgs) == 0 {
		r.lastID = h.GetLastId()
	}
}

// maxFanOutBatch bounds how many waiting messages are fanned out together.
const maxFanOutBatch = 64

// deliver hands live messages, in order, to every member. A gap means the stream lost
// messages: the caller re-attaches from the last id.
func (r *chatRoom) deliver(batch []*chatv1.ChatMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	frames := make([]socket.Frame, 0, len(batch))
	for _, m := range batch {
		if m.GetId() > r.lastID+1 {
			r.fanOut(frames)
			return errors.New("chat stream skipped ids")
		}
		if e, ok := r.appendLocked(m); ok {
			frames = append(frames, e.frame)
		}
	}
	r.fanOut(frames)
	return nil
}

// deliverLocked hands one message to every member. Called with r.mu.
func (r *chatRoom) deliverLocked(m *chatv1.ChatMessage) {
	if e, ok := r.appendLocked(m); ok {
		r.fanOut([]socket.Frame{e.frame})
	}
}

// appendLocked adds m to the recent list; false when it was delivered before. Called with r.mu.
func (r *chatRoom) appendLocked(m *chatv1.ChatMessage) (chatEntry, bool) {
	if m.GetId() <= r.lastID {
		return chatEntry{}, false
	}
	e := encodeChatEntry(m)
	r.lastID = m.GetId()
	r.recent = append(r.recent, e)
	if keep := max(recentMin, r.joinLimit); len(r.recent) >= 2*keep {
		r.recent = append(r.recent[:0:0], r.recent[len(r.recent)-keep:]...)
	}
	return e, true
}

// fanOut queues frames on every member's socket. Called with r.mu.
func (r *chatRoom) fanOut(frames []socket.Frame) {
	if len(frames) == 0 {
		return
	}
	for mem := range r.members {
		mem.sock.SendFrames(frames)
	}
}
