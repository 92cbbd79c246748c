package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/protobuf/reflect/protoreflect"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
)

// The chat domain: REST history and posts through grpc-gateway, and the WebSocket bridge
// GET /websocket?room=&userId=&username=[&since=][&pack=1] (pack=1: a burst of frames may
// arrive as one frame of newline-separated JSON objects).
//
// Fan-out happens here, at the edge: the gateway keeps ONE Connect stream per room it has
// members in (a chatRoom), keeps the room's recent messages, and copies each message to its
// local sockets from one JSON encoding. When a stream breaks (a chat replica is killed or
// rolled), the room re-attaches to any replica from the last id it delivered; sockets stay
// open and see every message once, in order. Message ids are JSON numbers: the room's
// sequence, 1, 2, 3, …

func chatDomain(addr string) domain {
	return domain{
		name: "chat",
		addr: backendTarget(addr),
		rest: func(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
			return chatv1.RegisterChatServiceHandler(ctx, mux, conn)
		},
		sockets: func(g *Gateway, mux *router, conn *grpc.ClientConn) {
			b := newChatBridge(conn, g.log, g.socketLimits(0))
			mux.HandleFunc("GET /websocket", b.serveSocket)
		},
		created: map[string]int{
			"/vigil.chat.v1.ChatService/PostMessage": http.StatusCreated,
		},
		fieldErrors: map[protoreflect.FullName]string{
			"vigil.chat.v1.PostMessageRequest.user_id":  "userId must be 1 to 128 printable characters.",
			"vigil.chat.v1.PostMessageRequest.username": "username must be 1 to 64 printable characters.",
			"vigil.chat.v1.PostMessageRequest.body":     "body must be 1 to 4096 characters.",
		},
	}
}

// backendTarget turns a comma-separated list of host:port addresses into a gRPC target that
// balances calls round-robin over all of them (scheme "vigil-list"); one address, or any
// target with a scheme ("dns:///chat:7003"), is returned unchanged. With several chat replicas,
// a room whose stream breaks re-attaches to another listed replica.
func backendTarget(addr string) string {
	if !strings.Contains(addr, ",") || strings.Contains(addr, "://") {
		return addr
	}
	return listScheme + ":///" + addr
}

const listScheme = "vigil-list"

func init() { resolver.Register(listResolverBuilder{}) }

// listResolverBuilder resolves "vigil-list:///a:1,b:2" to those addresses, round-robin.
type listResolverBuilder struct{}

func (listResolverBuilder) Scheme() string { return listScheme }

func (listResolverBuilder) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	var addrs []resolver.Address
	for _, a := range strings.Split(t.Endpoint(), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, resolver.Address{Addr: a})
		}
	}
	sc := cc.ParseServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`)
	if err := cc.UpdateState(resolver.State{Addresses: addrs, ServiceConfig: sc}); err != nil {
		return nil, err
	}
	return listResolver{}, nil
}

type listResolver struct{}

func (listResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (listResolver) Close()                                {}

// chatBridge serves the chat WebSocket route.
type chatBridge struct {
	conn   *grpc.ClientConn
	client chatv1.ChatServiceClient
	log    *slog.Logger
	lim    wsLimits
	// postPrefix makes this gateway's post ids unique; postSeq numbers them.
	postPrefix string
	postSeq    atomic.Uint64
	// joinTimeout bounds how long a new socket waits for its room's history.
	joinTimeout time.Duration
	// postTimeout bounds how long a post waits for the service to store it.
	postTimeout time.Duration

	mu    sync.Mutex
	rooms map[string]*chatRoom
}

func newChatBridge(conn *grpc.ClientConn, log *slog.Logger, lim wsLimits) *chatBridge {
	return &chatBridge{
		conn: conn, client: chatv1.NewChatServiceClient(conn), log: log, lim: lim.withDefaults(),
		postPrefix: randomHex(8) + "-", joinTimeout: 10 * time.Second,
		// Shorter than the pong timeout: the reader goroutine, which reads pongs, waits on a post.
		postTimeout: min(8*time.Second, lim.withDefaults().PongTimeout*4/5),
		rooms:       map[string]*chatRoom{},
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var chatRoomName = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$`)

// printableLen reports whether s is 1..max characters without control characters.
func printableLen(s string, max int) bool {
	if !utf8.ValidString(s) {
		return false
	}
	n := 0
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
		n++
	}
	return n >= 1 && n <= max
}

// serveSocket upgrades GET /websocket and hands the socket to its reader goroutine. Bad query
// parameters get 400 before the upgrade; a plain HTTP request gets 426.
func (b *chatBridge) serveSocket(w http.ResponseWriter, r *http.Request) {
	if !isWebSocketUpgrade(r) {
		refuseNonWebSocket(w)
		return
	}
	q := r.URL.Query()
	room := q.Get("room")
	if room == "" {
		room = "general"
	}
	if !chatRoomName.MatchString(room) {
		writeError(w, http.StatusBadRequest, "Use a lowercase room name containing 3-40 letters, digits, or hyphens.")
		return
	}
	userID := q.Get("userId")
	if userID == "" {
		userID = "u-" + randomHex(6)
	}
	if !printableLen(userID, 128) {
		writeError(w, http.StatusBadRequest, "userId must be 1 to 128 printable characters.")
		return
	}
	username := q.Get("username")
	if username == "" {
		username = userID
	}
	if !printableLen(username, 64) {
		writeError(w, http.StatusBadRequest, "username must be 1 to 64 printable characters.")
		return
	}
	var since *int64
	if s := q.Get("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "since must be a message id: an integer, 0 or more.")
			return
		}
		since = &n
	}
	pack := q.Get("pack") == "1"
	sock, err := acceptSocket(w, r, &b.lim)
	if err != nil {
		b.log.Info("websocket upgrade failed", "event", "ws_refused", "route", "chat", "err", err)
		return
	}
	if pack {
		sock.PackBursts()
	}
	m := &chatMember{sock: sock, userID: userID, username: username}
	// The handler returns now; the reader goroutine is the socket's only goroutine.
	go b.serveMember(room, since, m)
}

// chatMember is one socket in a room.
type chatMember struct {
	sock     *wsSocket
	userID   string
	username string
}

// clientFrame is what a client sends.
type clientFrame struct {
	Body *string `json:"body"`
}

// serveMember is the socket's reader goroutine: join, then read the client's frames until it
// leaves.
func (b *chatBridge) serveMember(roomName string, since *int64, m *chatMember) {
	room, err := b.join(roomName, since, m)
	if err != nil {
		b.log.Warn("chat join failed", "event", "ws_join_failed", "room", roomName, "err", err)
		m.sock.Close(websocket.StatusTryAgainLater, "chat is unavailable; reconnect shortly")
		return
	}
	defer func() {
		b.leave(room, m)
		m.sock.markClosed()
		_ = m.sock.c.CloseNow()
	}()
	for {
		data, err := m.sock.Read()
		if err != nil {
			return
		}
		if !m.sock.Allow() {
			m.sock.Send(errorFrame("You are sending messages too fast; wait a moment."))
			continue
		}
		var f clientFrame
		if err := json.Unmarshal(data, &f); err != nil {
			m.sock.Send(errorFrame(`Send a JSON object like {"body":"hello"}.`))
			continue
		}
		if f.Body == nil {
			m.sock.Send(errorFrame(`Send a JSON object like {"body":"hello"}.`))
			continue
		}
		if n := utf8.RuneCountInString(*f.Body); n < 1 || n > 4096 {
			m.sock.Send(errorFrame("body must be 1 to 4096 characters."))
			continue
		}
		if msg := room.post(m, *f.Body); msg != "" {
			m.sock.Send(errorFrame(msg))
		}
	}
}

func errorFrame(msg string) []byte {
	b, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error string `json:"error"`
	}{"error", msg})
	return b
}

// join adds m to its room, starting the room's upstream stream if it is the first member, and
// sends m its history frame before any live message.
func (b *chatBridge) join(name string, since *int64, m *chatMember) (*chatRoom, error) {
	b.mu.Lock()
	r := b.rooms[name]
	if r == nil {
		r = newChatRoom(b, name)
		b.rooms[name] = r
	}
	r.refs++
	b.mu.Unlock()
	if err := r.addMember(m, since); err != nil {
		b.leave(r, m)
		return nil, err
	}
	return r, nil
}

// leave removes m; the room's upstream stream ends with its last member.
func (b *chatBridge) leave(r *chatRoom, m *chatMember) {
	r.mu.Lock()
	delete(r.members, m)
	r.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	r.refs--
	if r.refs == 0 && b.rooms[r.name] == r {
		delete(b.rooms, r.name)
		r.cancel()
	}
}

// chatRoom is the gateway's side of one room: its upstream stream, its recent messages, and
// its local members.
type chatRoom struct {
	b      *chatBridge
	name   string
	refs   int // members and joiners; guarded by b.mu
	cancel context.CancelFunc

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

	sendMu sync.Mutex // serialises Send on the stream
}

// chatEntry is one message, encoded once for every socket.
type chatEntry struct {
	id int64
	// obj is the message as a JSON object; frame is the message frame, framed once for every
	// socket.
	obj   []byte
	frame wsFrame
}

type pendingPost struct {
	seq  uint64
	post *chatv1.Post
	done chan *chatv1.PostResult
}

// recentMin is how many messages a room keeps at least, to serve joins and short resumes
// without asking the service.
const recentMin = 256

func newChatRoom(b *chatBridge, name string) *chatRoom {
	ctx, cancel := context.WithCancel(context.Background())
	r := &chatRoom{
		b: b, name: name, cancel: cancel, ready: make(chan struct{}),
		members: map[*chatMember]struct{}{}, pending: map[string]*pendingPost{},
	}
	go r.run(ctx)
	return r
}

// run keeps the room attached until ctx ends: when a stream breaks, it re-attaches (to any
// replica) from the last delivered id.
func (r *chatRoom) run(ctx context.Context) {
	backoff := 10 * time.Millisecond
	for {
		gotHistory, err := r.attach(ctx)
		if ctx.Err() != nil {
			return
		}
		if r.b.conn.GetState() == connectivity.Shutdown {
			r.shutdown()
			return
		}
		if gotHistory {
			backoff = 10 * time.Millisecond
		}
		r.b.log.Warn("chat stream broke; re-attaching", "event", "chat_reattach", "room", r.name, "lastId", r.lastIDNow(), "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, time.Second)
	}
}

func (r *chatRoom) lastIDNow() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastID
}

// shutdown closes every member: the gateway is shutting down.
func (r *chatRoom) shutdown() {
	r.mu.Lock()
	members := make([]*chatMember, 0, len(r.members))
	for m := range r.members {
		members = append(members, m)
	}
	r.mu.Unlock()
	for _, m := range members {
		go m.sock.Close(websocket.StatusGoingAway, "gateway shutting down")
	}
}

// attach runs one Connect stream until it breaks.
func (r *chatRoom) attach(ctx context.Context) (gotHistory bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := r.b.client.Connect(sctx)
	if err != nil {
		return false, err
	}
	join := &chatv1.Join{Room: r.name}
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
		r.b.log.Warn("chat messages missed while detached are no longer kept", "event", "chat_gap_lost", "room", r.name, "lastId", r.lastID)
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
	frames := make([]wsFrame, 0, len(batch))
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
		r.fanOut([]wsFrame{e.frame})
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
func (r *chatRoom) fanOut(frames []wsFrame) {
	if len(frames) == 0 {
		return
	}
	for mem := range r.members {
		mem.sock.SendFrames(frames)
	}
}

func encodeChatEntry(m *chatv1.ChatMessage) chatEntry {
	obj, _ := json.Marshal(struct {
		ID     int64  `json:"id"`
		User   string `json:"user"`
		UserID string `json:"userId"`
		Body   string `json:"body"`
		TS     int64  `json:"ts"`
	}{m.GetId(), m.GetUser(), m.GetUserId(), m.GetBody(), m.GetTs()})
	payload := make([]byte, 0, len(obj)+17)
	payload = append(payload, `{"type":"message",`...)
	payload = append(payload, obj[1:]...)
	return chatEntry{id: m.GetId(), obj: obj, frame: textFrame(payload)}
}

func historyFrame(entries []chatEntry) []byte {
	n := 40
	for _, e := range entries {
		n += len(e.obj) + 1
	}
	f := make([]byte, 0, n)
	f = append(f, `{"type":"history","messages":[`...)
	for i, e := range entries {
		if i > 0 {
			f = append(f, ',')
		}
		f = append(f, e.obj...)
	}
	return append(f, "]}"...)
}

// addMember waits for the room's first history, then sends m its history frame and makes it
// a member, atomically with respect to live messages: nothing is missed or repeated.
func (r *chatRoom) addMember(m *chatMember, since *int64) error {
	t := time.NewTimer(r.b.joinTimeout)
	defer t.Stop()
	select {
	case <-r.ready:
	case <-t.C:
		return errors.New("no history from the chat service in time")
	}
	var older []chatEntry
	fetched := false
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		entries, ok := r.historyFor(since, older, fetched)
		if !ok && attempt < 3 {
			r.mu.Unlock()
			var err error
			if older, err = r.fetchSince(*since); err != nil {
				return err
			}
			fetched = true
			continue
		}
		m.sock.Send(historyFrame(entries))
		r.members[m] = struct{}{}
		r.mu.Unlock()
		return nil
	}
}

// historyFor is a joiner's history: the last joinLimit messages, or every message after since.
// ok is false when the recent list does not reach back to since and older (read from the
// service) does not bridge the gap; the entries are then the best available. Called with r.mu.
func (r *chatRoom) historyFor(since *int64, older []chatEntry, fetched bool) ([]chatEntry, bool) {
	if since == nil {
		return r.recent[max(0, len(r.recent)-r.joinLimit):], true
	}
	if *since >= r.lastID {
		return nil, true
	}
	if len(r.recent) > 0 && r.recent[0].id <= *since+1 {
		return r.recent[sortSearchEntries(r.recent, *since+1):], true
	}
	// The service may already have stored messages this room has not delivered yet: those
	// come live, so older stops at lastID.
	older = older[:sortSearchEntries(older, r.lastID+1)]
	next := *since + 1
	if len(older) > 0 {
		next = older[len(older)-1].id + 1
	}
	tail := r.recent[sortSearchEntries(r.recent, next):]
	entries := append(older[:len(older):len(older)], tail...)
	bridged := next > r.lastID || (len(r.recent) > 0 && r.recent[0].id <= next)
	// Nothing kept after since (trimmed): what the room has is all there is.
	return entries, bridged || (fetched && len(older) == 0)
}

// sortSearchEntries is the index of the first entry with id >= id.
func sortSearchEntries(entries []chatEntry, id int64) int {
	lo, hi := 0, len(entries)
	for lo < hi {
		mid := (lo + hi) / 2
		if entries[mid].id < id {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// fetchSince reads the kept messages after since from the service, for a resume older than
// the room's recent list.
func (r *chatRoom) fetchSince(since int64) ([]chatEntry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.b.joinTimeout)
	defer cancel()
	res, err := r.b.client.ListMessages(ctx, &chatv1.ListMessagesRequest{Room: r.name, Since: &since, Limit: 1000})
	if err != nil {
		return nil, err
	}
	out := make([]chatEntry, 0, len(res.GetMessages()))
	for _, m := range res.GetMessages() {
		out = append(out, encodeChatEntry(m))
	}
	return out, nil
}

// setStream makes s the stream posts go to (nil while detached), and re-sends the posts that
// were waiting; their post ids make a repeat harmless.
func (r *chatRoom) setStream(s chatv1.ChatService_ConnectClient) {
	r.mu.Lock()
	r.stream = s
	var resend []*pendingPost
	if s != nil {
		for _, p := range r.pending {
			resend = append(resend, p)
		}
	}
	r.mu.Unlock()
	if len(resend) == 0 {
		return
	}
	// In the order they were posted.
	for i := 1; i < len(resend); i++ {
		for j := i; j > 0 && resend[j].seq < resend[j-1].seq; j-- {
			resend[j], resend[j-1] = resend[j-1], resend[j]
		}
	}
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	for _, p := range resend {
		if err := s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Post{Post: p.post}}); err != nil {
			return
		}
	}
}

// post stores a member's message and waits for the service's answer. It returns "" when the
// message was stored (the member receives it like everyone else), or the sentence of an error
// frame.
func (r *chatRoom) post(m *chatMember, body string) string {
	r.mu.Lock()
	r.postRefs++
	ref := strconv.FormatUint(r.postRefs, 10)
	p := &pendingPost{
		seq: r.postRefs,
		post: &chatv1.Post{
			Ref: ref, PostId: r.b.postPrefix + strconv.FormatUint(r.b.postSeq.Add(1), 36),
			UserId: m.userID, User: m.username, Body: body,
		},
		done: make(chan *chatv1.PostResult, 1),
	}
	r.pending[ref] = p
	s := r.stream
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, ref)
		r.mu.Unlock()
	}()
	if s != nil {
		r.sendMu.Lock()
		// A failed send is retried by the next stream's setStream.
		_ = s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Post{Post: p.post}})
		r.sendMu.Unlock()
	}
	t := time.NewTimer(r.b.postTimeout)
	defer t.Stop()
	select {
	case res := <-p.done:
		return res.GetError()
	case <-t.C:
		return "Chat is unavailable right now; send the message again shortly."
	}
}

// resolve hands a post's result to the waiting member.
func (r *chatRoom) resolve(res *chatv1.PostResult) {
	r.mu.Lock()
	p := r.pending[res.GetRef()]
	r.mu.Unlock()
	if p == nil {
		return // a repeat's answer, or a post that gave up waiting
	}
	select {
	case p.done <- res:
	default:
	}
}
