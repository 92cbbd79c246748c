package room

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/gateway/socket"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// fakeRoomService answers Attach streams as the Room service does, scripted by the test: a
// hello gets the session's State (or the end the test queued for that client), a detach its
// end, a ping its pong, and a leader's mark its Ack and, relayed to the stream with the room's
// next version, the mark frame. It records every request of every stream, and fails the test
// on what the real service refuses: a control for a session whose State this stream has not
// sent.
type fakeRoomService struct {
	roomv1.UnimplementedRoomServiceServer
	t *testing.T

	mu      sync.Mutex
	down    bool // new streams are refused: the replica is away
	streams []*fakeStream
	refuse  map[string][]error // by client id: the ends its next hellos get
	version int64
}

// fakeStream is one Attach stream the fake serves; its fields past srv are guarded by the
// fake's mu.
type fakeStream struct {
	srv  roomv1.RoomService_AttachServer
	kill chan error // ends the stream with this error
	got  []*roomv1.AttachRequest
	open map[string]bool // sessions whose State went on this stream
}

func (f *fakeRoomService) Attach(srv roomv1.RoomService_AttachServer) error {
	f.mu.Lock()
	if f.down {
		f.mu.Unlock()
		return status.Error(codes.Unavailable, "the replica is away")
	}
	s := &fakeStream{srv: srv, kill: make(chan error, 1), open: map[string]bool{}}
	f.streams = append(f.streams, s)
	f.mu.Unlock()
	reqs, recvErr := make(chan *roomv1.AttachRequest), make(chan error, 1)
	go func() {
		for {
			req, err := srv.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-srv.Context().Done():
				return
			}
		}
	}()
	for {
		select {
		case err := <-s.kill:
			return err
		case <-recvErr:
			return nil
		case req := <-reqs:
			// This goroutine is the stream's only sender.
			for _, resp := range f.answer(s, req) {
				if err := srv.Send(resp); err != nil {
					return err
				}
			}
		}
	}
}

// answer records req on s and returns the answers to send.
func (f *fakeRoomService) answer(s *fakeStream, req *roomv1.AttachRequest) []*roomv1.AttachResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.got = append(s.got, req)
	switch x := req.GetFrame().(type) {
	case *roomv1.AttachRequest_Ping:
		return []*roomv1.AttachResponse{{Pong: x.Ping}}
	case *roomv1.AttachRequest_Hello:
		id, client := x.Hello.GetSessionId(), x.Hello.GetClientId()
		if ends := f.refuse[client]; len(ends) > 0 {
			f.refuse[client] = ends[1:]
			st := status.Convert(ends[0])
			return []*roomv1.AttachResponse{{SessionId: id, End: &roomv1.SessionEnd{Code: int32(st.Code()), Message: st.Message()}}}
		}
		s.open[id] = true
		return []*roomv1.AttachResponse{{SessionId: id, Version: f.version, Frame: &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_State{
			State: &roomv1.State{Video: &roomv1.Video{Title: "Fake", DurationMs: 60000}},
		}}}}
	case *roomv1.AttachRequest_Detach:
		delete(s.open, x.Detach)
		return []*roomv1.AttachResponse{{SessionId: x.Detach, End: &roomv1.SessionEnd{}}}
	case *roomv1.AttachRequest_Control:
		id, c := x.Control.GetSessionId(), x.Control.GetRequest()
		if !s.open[id] {
			f.t.Errorf("stream %d: control %v of session %s before its State on this stream", len(f.streams), c, id)
			return []*roomv1.AttachResponse{{SessionId: id, Frame: &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Error{
				Error: &roomv1.Error{Message: "This session is not open on this stream; send its hello first.", Ref: c.GetRef()},
			}}}}
		}
		f.version++
		return []*roomv1.AttachResponse{
			{SessionId: id, Frame: &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Ack{Ack: &roomv1.Ack{Ref: c.GetRef(), At: 1000 + f.version}}}},
			{Version: f.version, Frame: &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Mark{Mark: c.GetMark()}}},
		}
	}
	return nil
}

// breakStream ends the newest stream with UNAVAILABLE, as a draining replica does; with away,
// the replica refuses new streams until back is called.
func (f *fakeRoomService) breakStream(away bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = away
	f.streams[len(f.streams)-1].kill <- status.Error(codes.Unavailable, "The room service is restarting; reconnect.")
}

func (f *fakeRoomService) back() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = false
}

// requests returns, for stream n (from 1), each request as "hello lead", "detach v2",
// "mark gap", with sessions named by their client ids; pings are left out.
func (f *fakeRoomService) requests(n int, clients map[string]string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n > len(f.streams) {
		return nil
	}
	var out []string
	for _, req := range f.streams[n-1].got {
		switch x := req.GetFrame().(type) {
		case *roomv1.AttachRequest_Hello:
			clients[x.Hello.GetSessionId()] = x.Hello.GetClientId()
			out = append(out, "hello "+x.Hello.GetClientId())
		case *roomv1.AttachRequest_Detach:
			out = append(out, "detach "+clients[x.Detach])
		case *roomv1.AttachRequest_Control:
			out = append(out, "mark "+x.Control.GetRequest().GetMark().GetLabel())
		}
	}
	return out
}

// streamCount is how many streams the fake has accepted.
func (f *fakeRoomService) streamCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.streams)
}

// syncBuffer is a log destination safe for the gateway's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// bridgeEnv is a Bridge over a fakeRoomService on a real gRPC connection, serving sockets on a
// real HTTP server.
type bridgeEnv struct {
	svc  *fakeRoomService
	url  string
	logs *syncBuffer
}

func newBridgeEnv(t *testing.T) *bridgeEnv {
	t.Helper()
	svc := &fakeRoomService{t: t, refuse: map[string][]error{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	roomv1.RegisterRoomServiceServer(gs, svc)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := socket.NewRegistry(socket.Options{Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	b := NewBridge(conn, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), reg, socket.Limits{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /rooms/{code}/websocket", b.ServeSocket)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		_ = conn.Close()
		gs.Stop()
	})
	return &bridgeEnv{svc: svc, url: srv.URL, logs: logs}
}

// testSocket is a client's socket on the bridge; a goroutine reads its frames.
type testSocket struct {
	t      *testing.T
	c      *websocket.Conn
	frames chan map[string]any
	closed chan error
}

func (e *bridgeEnv) dial(t *testing.T, query string) *testSocket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait.Deadline)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+"/rooms/abc/websocket?"+query, nil)
	if err != nil {
		t.Fatalf("dial ?%s: %v", query, err)
	}
	s := &testSocket{t: t, c: c, frames: make(chan map[string]any, 100), closed: make(chan error, 1)}
	go func() {
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				s.closed <- err
				return
			}
			var f map[string]any
			d := json.NewDecoder(bytes.NewReader(data))
			d.UseNumber()
			if err := d.Decode(&f); err != nil {
				s.closed <- err
				return
			}
			s.frames <- f
		}
	}()
	t.Cleanup(func() { _ = c.CloseNow() })
	return s
}

func (s *testSocket) send(frame string) {
	s.t.Helper()
	if err := s.c.Write(context.Background(), websocket.MessageText, []byte(frame)); err != nil {
		s.t.Fatalf("write %s: %v", frame, err)
	}
}

// next is the socket's next frame, which must be of type typ.
func (s *testSocket) next(typ string) map[string]any {
	s.t.Helper()
	select {
	case f := <-s.frames:
		if f["type"] != typ {
			s.t.Fatalf("frame %v, want a %s frame", f, typ)
		}
		return f
	case err := <-s.closed:
		s.t.Fatalf("socket closed (%v) while waiting for a %s frame", err, typ)
	case <-time.After(wait.Deadline):
		s.t.Fatalf("no %s frame within %v", typ, wait.Deadline)
	}
	return nil
}

// quiet fails if the socket has a frame waiting or was closed.
func (s *testSocket) quiet() {
	s.t.Helper()
	select {
	case f := <-s.frames:
		s.t.Fatalf("unexpected frame %v", f)
	case err := <-s.closed:
		s.t.Fatalf("socket closed: %v", err)
	default:
	}
}

// mark sends a leader's mark with the page's ref and checks its ack.
func (s *testSocket) mark(label string, ref int) {
	s.t.Helper()
	s.send(fmt.Sprintf(`{"type": "mark", "positionMs": 1000, "label": %q, "ref": %d}`, label, ref))
}

// waitRequests waits until stream n's requests (pings left out) are want, in that order.
func (e *bridgeEnv) waitRequests(t *testing.T, n int, want ...string) {
	t.Helper()
	clients := map[string]string{}
	wait.For(t, fmt.Sprintf("stream %d's requests %q", n, want), func() error {
		if got := e.svc.requests(n, clients); strings.Join(got, ", ") != strings.Join(want, ", ") {
			return fmt.Errorf("got %q", got)
		}
		return nil
	})
}

// TestStreamRestartReattachesEverySession: when the room's stream breaks, the next stream
// carries every open socket's hello; a socket that left in the gap gets its hello and then its
// detach (so the service counts its leave); a control the leader sent in the gap waits for
// its session's State and is sent then, once, and acked with the page's ref; a control already
// answered is not sent again, nor a detach already answered; no socket closes.
func TestStreamRestartReattachesEverySession(t *testing.T) {
	t.Parallel()
	e := newBridgeEnv(t)
	lead := e.dial(t, "role=leader&clientId=lead&token=t")
	lead.next("state")
	v1 := e.dial(t, "clientId=v1")
	v1.next("state")
	v2 := e.dial(t, "clientId=v2")
	v2.next("state")
	lead.mark("before", 1)
	if a := lead.next("ack"); a["ref"] != json.Number("1") {
		t.Fatalf("ack = %v, want ref 1", a)
	}
	for _, v := range []*testSocket{v1, v2} {
		if m := v.next("mark"); m["label"] != "before" {
			t.Fatalf("viewer's mark = %v, want before", m)
		}
	}
	e.waitRequests(t, 1, "hello lead", "hello v1", "hello v2", "mark before")

	e.svc.breakStream(true)
	wait.Until(t, "the gateway saw the stream break", func() bool { return e.logs.count(`"event":"room_reattach"`) >= 1 })
	lead.mark("in the gap", 2)
	// The reader takes frames in order: the refusal of the next one says the mark was taken.
	lead.send(`{"type": "dance"}`)
	lead.next("error")
	_ = v2.c.Close(websocket.StatusNormalClosure, "bye")
	wait.Until(t, "the gateway saw v2 leave", func() bool { return e.logs.count(`"event":"ws_left"`) >= 1 })
	e.svc.back()

	lead.next("state")
	if a := lead.next("ack"); a["ref"] != json.Number("2") {
		t.Fatalf("ack after the re-attach = %v, want ref 2", a)
	}
	v1.next("state")
	if m := v1.next("mark"); m["label"] != "in the gap" {
		t.Fatalf("v1's mark after the re-attach = %v, want the one sent in the gap", m)
	}
	// Members are queued in map order; the one who left comes after them, with its detach.
	e.waitRequests(t, 2, orderedHellos(e.svc.requests(2, map[string]string{}), "lead", "v1", "hello v2", "detach v2", "mark in the gap")...)
	if got := strings.Join(e.svc.requests(2, map[string]string{}), ", "); strings.Index(got, "hello lead") > strings.Index(got, "mark in the gap") {
		t.Fatalf("stream 2's requests %s: the held mark went before its session's hello", got)
	}

	// Everything is answered now: the next stream carries the open sessions' hellos only.
	e.svc.breakStream(false)
	lead.next("state")
	v1.next("state")
	e.waitRequests(t, 3, orderedHellos(e.svc.requests(3, map[string]string{}), "lead", "v1")...)
	lead.mark("after", 3)
	if a := lead.next("ack"); a["ref"] != json.Number("3") {
		t.Fatalf("ack = %v, want ref 3", a)
	}
	if m := v1.next("mark"); m["label"] != "after" {
		t.Fatalf("v1's mark = %v, want after (and no mark twice)", m)
	}
	lead.quiet()
	v1.quiet()
	if n := e.svc.streamCount(); n != 3 {
		t.Errorf("the fake served %d streams, want 3", n)
	}
}

// orderedHellos is the hellos of clients a and b in the order got has them (a room queues its
// members in map order), followed by rest.
func orderedHellos(got []string, a, b string, rest ...string) []string {
	first, second := "hello "+a, "hello "+b
	for _, g := range got {
		if g == second {
			first, second = second, first
			break
		}
		if g == first {
			break
		}
	}
	return append([]string{first, second}, rest...)
}

// TestSessionUnavailableOnReattachIsRetried: when the service is unavailable for one session's
// re-attach (its store, say), the socket stays open and its hello goes again on the same
// stream a second later; a control its page sends meanwhile waits for the session's State and
// is answered then.
func TestSessionUnavailableOnReattachIsRetried(t *testing.T) {
	t.Parallel()
	e := newBridgeEnv(t)
	lead := e.dial(t, "role=leader&clientId=lead&token=t")
	lead.next("state")
	v := e.dial(t, "clientId=v")
	v.next("state")

	e.svc.mu.Lock()
	e.svc.refuse["lead"] = []error{status.Error(codes.Unavailable, "the store is away")}
	e.svc.mu.Unlock()
	e.svc.breakStream(false)
	v.next("state")
	wait.Until(t, "the gateway retries the leader's session", func() bool {
		return e.logs.count(`"event":"room_reattach_retry"`) >= 1
	})
	lead.mark("while retrying", 7)
	lead.next("state")
	if a := lead.next("ack"); a["ref"] != json.Number("7") {
		t.Fatalf("ack = %v, want ref 7", a)
	}
	if m := v.next("mark"); m["label"] != "while retrying" {
		t.Fatalf("viewer's mark = %v", m)
	}
	e.waitRequests(t, 2, orderedHellos(e.svc.requests(2, map[string]string{}), "lead", "v", "hello lead", "mark while retrying")...)
	lead.quiet()
	v.quiet()
}

// TestJoinWhileTheServiceIsDownIsRefusedAtOnce: a socket that joins a room whose stream broke
// (the Room service is down) and has not begun again is refused at once with the reason
// (UNAVAILABLE: a 503), as Broken refused the ones waiting, not left waiting for its hello's
// answer until roomHelloTimeout (DeadlineExceeded). Before, a join that came after Broken
// waited out the timeout: TestWebSocketOrigins's upgrades timed out on it under the race
// detector.
func TestJoinWhileTheServiceIsDownIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	conn, err := grpc.NewClient(servertest.DownAddr(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	reg, err := socket.NewRegistry(socket.Options{Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	b := NewBridge(conn, slog.New(slog.NewJSONHandler(&syncBuffer{}, nil)), reg, socket.Limits{})

	// A reference held on the room keeps it (and its broken stream) between the joins.
	r := b.rooms.Join("down01")
	defer b.rooms.Leave(r)
	wait.Until(t, "the room's stream to break", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.down != nil
	})
	_, err = b.join(&roomv1.Hello{Code: "down01", Role: roomv1.Role_ROLE_VIEWER, ClientId: "c1", SessionId: "s1"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("join while the service is down: %v, want UNAVAILABLE at once", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.members) != 0 {
		t.Errorf("the refused socket is still a member: %d members", len(r.members))
	}
}
