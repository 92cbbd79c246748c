package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// wsClient is a test's WebSocket: a goroutine reads every frame into frames.
type wsClient struct {
	t      *testing.T
	c      *websocket.Conn
	frames chan map[string]any
	closed chan error // the read error that ended the socket
}

func dialChat(t *testing.T, gwURL, query string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(gwURL, "http") + "/websocket?" + query
	c, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	c.SetReadLimit(8 << 20)
	w := &wsClient{t: t, c: c, frames: make(chan map[string]any, 10000), closed: make(chan error, 1)}
	go readFrames(c, w.frames, w.closed)
	t.Cleanup(func() { _ = c.CloseNow() })
	return w
}

func (w *wsClient) send(s string) {
	w.t.Helper()
	writeFrame(w.t, w.c, s)
}

func (w *wsClient) say(body string) {
	w.t.Helper()
	b, _ := json.Marshal(map[string]string{"body": body})
	w.send(string(b))
}

// next returns the next frame, failing the test if none comes within 10s.
func (w *wsClient) next() map[string]any {
	w.t.Helper()
	select {
	case f := <-w.frames:
		return f
	case err := <-w.closed:
		w.t.Fatalf("socket closed while waiting for a frame: %v", err)
	case <-time.After(wait.Deadline):
		w.t.Fatalf("no frame within %v", wait.Deadline)
	}
	return nil
}

// nextOfType returns the next frame, which must have the given type.
func (w *wsClient) nextOfType(typ string) map[string]any {
	w.t.Helper()
	f := w.next()
	if f["type"] != typ {
		w.t.Fatalf("got frame %v, want type %q", f, typ)
	}
	return f
}

func historyIDs(t *testing.T, f map[string]any) []int64 {
	t.Helper()
	msgs, ok := f["messages"].([]any)
	if !ok {
		t.Fatalf("history frame %v has no messages array", f)
	}
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = num(t, m.(map[string]any)["id"])
	}
	return out
}

func seqIDs(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func sameIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func postChat(t *testing.T, gwURL, room, body string) int64 {
	t.Helper()
	res := call(t, "POST", gwURL+"/chat/rooms/"+room+"/messages", fmt.Sprintf(`{"userId":"rest","username":"Rest","body":%q}`, body))
	if res.code != http.StatusCreated {
		t.Fatalf("POST message = %d %s, want 201", res.code, res.raw)
	}
	return num(t, res.body["id"])
}

// TestChatRoomConversation: two members see each other's messages (the sender too), a third
// gets them as history, and REST posts and lists the same room.
func TestChatRoomConversation(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)

	ann := dialChat(t, gw.URL, "room=lobby-1&userId=u-ann&username=Ann")
	if ids := historyIDs(t, ann.nextOfType("history")); len(ids) != 0 {
		t.Fatalf("history of a new room = %v, want empty", ids)
	}
	bob := dialChat(t, gw.URL, "room=lobby-1&userId=u-bob&username=Bob")
	bob.nextOfType("history")

	ann.say("hello bob")
	for _, w := range []*wsClient{ann, bob} {
		f := w.nextOfType("message")
		if num(t, f["id"]) != 1 || f["user"] != "Ann" || f["userId"] != "u-ann" || f["body"] != "hello bob" || num(t, f["ts"]) <= 0 {
			t.Fatalf("message frame = %v, want id 1 from Ann", f)
		}
	}
	bob.say("hi ann ✓")
	for _, w := range []*wsClient{ann, bob} {
		if f := w.nextOfType("message"); num(t, f["id"]) != 2 || f["user"] != "Bob" || f["body"] != "hi ann ✓" {
			t.Fatalf("message frame = %v, want id 2 from Bob", f)
		}
	}
	if id := postChat(t, gw.URL, "lobby-1", "from rest"); id != 3 {
		t.Fatalf("REST post id = %d, want 3", id)
	}
	for _, w := range []*wsClient{ann, bob} {
		if f := w.nextOfType("message"); num(t, f["id"]) != 3 || f["user"] != "Rest" {
			t.Fatalf("message frame = %v, want id 3 from Rest", f)
		}
	}

	cy := dialChat(t, gw.URL, "room=lobby-1&username=Cy")
	h := cy.nextOfType("history")
	if ids := historyIDs(t, h); !sameIDs(ids, []int64{1, 2, 3}) {
		t.Fatalf("third member's history = %v, want [1 2 3]", ids)
	}
	first := h["messages"].([]any)[0].(map[string]any)
	if first["body"] != "hello bob" || first["user"] != "Ann" {
		t.Errorf("history[0] = %v, want Ann's hello", first)
	}

	res := call(t, "GET", gw.URL+"/chat/rooms/lobby-1/messages?limit=2", "")
	if res.code != 200 {
		t.Fatalf("GET messages = %d %s", res.code, res.raw)
	}
	if ids := historyIDs(t, res.body); !sameIDs(ids, []int64{2, 3}) {
		t.Errorf("GET messages?limit=2 = %v, want [2 3]", ids)
	}
	res = call(t, "GET", gw.URL+"/chat/rooms/lobby-1/messages?limit=50&before=3", "")
	if ids := historyIDs(t, res.body); res.code != 200 || !sameIDs(ids, []int64{1, 2}) {
		t.Errorf("GET messages?before=3 = %d %v, want [1 2]", res.code, ids)
	}
}

// TestChatRESTErrors: the REST routes answer API.md's 400s.
func TestChatRESTErrors(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)
	for _, tc := range []struct {
		method, path, body, want string
	}{
		{"POST", "/chat/rooms/bad%0Aroom/messages", `{"userId":"u","body":"x"}`, "room must be 1 to 128 bytes"},
		{"POST", "/chat/rooms/room-a/messages", `{"userId":"u","body":""}`, "body must be 1 to 4096"},
		{"POST", "/chat/rooms/room-a/messages", fmt.Sprintf(`{"userId":"u","body":%q}`, strings.Repeat("x", 4097)), "body must be 1 to 4096"},
		{"POST", "/chat/rooms/room-a/messages", `{"userId":"a\tb","body":"x"}`, "userId"},
		{"POST", "/chat/rooms/room-a/messages", `{"userId":"u","body":7}`, "body must be"},
		{"GET", "/chat/rooms/room-a/messages?limit=0", "", ""},
		{"GET", "/chat/rooms/room-a/messages?limit=1001", "", "limit must be"},
		{"GET", "/chat/rooms/room-a/messages?before=0", "", "before must be"},
	} {
		res := call(t, tc.method, gw.URL+tc.path, tc.body)
		if tc.want == "" {
			if res.code != 200 {
				t.Errorf("%s %s = %d %s, want 200", tc.method, tc.path, res.code, res.raw)
			}
			continue
		}
		if msg, _ := res.body["error"].(string); res.code != 400 || !strings.Contains(msg, tc.want) {
			t.Errorf("%s %s %s = %d %s, want 400 with %q", tc.method, tc.path, tc.body, res.code, res.raw, tc.want)
		}
	}
}

// TestChatResumeSince: a reconnect with since gets exactly the messages after it, from the
// gateway's recent list or, when older, from the service.
func TestChatResumeSince(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)
	for i := 1; i <= 300; i++ {
		postChat(t, gw.URL, "resume", fmt.Sprintf("m%d", i))
	}
	// The room is not open at the gateway yet: it starts with the last 50 (251..300), so
	// since=2 is read from the service and joined to them.
	old := dialChat(t, gw.URL, "room=resume&since=2")
	if ids := historyIDs(t, old.nextOfType("history")); !sameIDs(ids, seqIDs(3, 300)) {
		t.Fatalf("since=2 history = %d ids [%v…], want 3..300", len(ids), ids[:min(3, len(ids))])
	}
	recent := dialChat(t, gw.URL, "room=resume&since=297")
	if ids := historyIDs(t, recent.nextOfType("history")); !sameIDs(ids, []int64{298, 299, 300}) {
		t.Fatalf("since=297 history = %v, want [298 299 300]", ids)
	}
	fresh := dialChat(t, gw.URL, "room=resume")
	if ids := historyIDs(t, fresh.nextOfType("history")); !sameIDs(ids, seqIDs(251, 300)) {
		t.Fatalf("join history = %v, want the last 50 (251..300)", ids)
	}
	current := dialChat(t, gw.URL, "room=resume&since=300")
	if ids := historyIDs(t, current.nextOfType("history")); len(ids) != 0 {
		t.Fatalf("since=300 history = %v, want empty", ids)
	}
	recent.say("live")
	for _, w := range []*wsClient{old, recent, fresh, current} {
		if f := w.nextOfType("message"); num(t, f["id"]) != 301 {
			t.Fatalf("live frame = %v, want id 301", f)
		}
	}
}

// TestChatFanOutAcrossReplicas: members attached through two gateways to two chat replicas see
// every message once, in the room's order.
func TestChatFanOutAcrossReplicas(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t)
	a := env.startChat(t, "", nil)
	b := env.startChat(t, "", nil)
	gwA := startGateway(t, Backends{Chat: a.Addr})
	gwB := startGateway(t, Backends{Chat: b.Addr})
	var clients []*wsClient
	for i := range 4 {
		gw := gwA
		if i%2 == 1 {
			gw = gwB
		}
		w := dialChat(t, gw.URL, fmt.Sprintf("room=fan-out&userId=u%d", i))
		w.nextOfType("history")
		clients = append(clients, w)
	}
	const perClient = 15
	var wg sync.WaitGroup
	for i, w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perClient {
				b, _ := json.Marshal(map[string]string{"body": fmt.Sprintf("c%d-%d", i, j)})
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = w.c.Write(ctx, websocket.MessageText, b)
				cancel()
			}
		}()
	}
	wg.Wait()
	total := int64(perClient * len(clients))
	var order []string
	for ci, w := range clients {
		var bodies []string
		for want := int64(1); want <= total; want++ {
			f := w.nextOfType("message")
			if id := num(t, f["id"]); id != want {
				t.Fatalf("client %d got id %d, want %d", ci, id, want)
			}
			bodies = append(bodies, f["body"].(string))
		}
		if ci == 0 {
			order = bodies
		} else if strings.Join(bodies, ",") != strings.Join(order, ",") {
			t.Fatalf("client %d saw another order than client 0", ci)
		}
	}
}

// chaosProxy forwards TCP to a backend until it is cut: then it stops listening and resets
// every connection, as a killed process would.
type chaosProxy struct {
	lis     net.Listener
	backend string
	mu      sync.Mutex
	conns   []net.Conn
	cut     bool
}

func startChaosProxy(t *testing.T, backend string) *chaosProxy {
	t.Helper()
	p := &chaosProxy{backend: backend}
	p.lis = proxyAccept(t, backend, func(c, u net.Conn) bool {
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			_ = u.Close()
			return false
		}
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
		go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
		return true
	})
	t.Cleanup(p.kill)
	return p
}

func (p *chaosProxy) addr() string { return p.lis.Addr().String() }

// kill closes the listener and resets every proxied connection.
func (p *chaosProxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	_ = p.lis.Close()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

// TestChatSurvivesReplicaLoss: the room's replica is killed abruptly mid-conversation, then
// the next one is rolled (its Run cancelled); the members keep their sockets, and each sees
// every message once, in order.
func TestChatSurvivesReplicaLoss(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t)
	a := env.startChat(t, "", nil)
	proxyA := startChaosProxy(t, a.Addr)
	addrB, addrC := servertest.FreeAddr(t), servertest.FreeAddr(t)
	// Only A runs, so the room's stream is on A.
	gwLogs, ann, bob := twoMembers(t, proxyA.addr()+","+addrB+","+addrC, "failover")
	b := env.startChat(t, addrB, nil)
	env.startChat(t, addrC, nil)

	const perClient = 60
	received := map[*wsClient][]map[string]any{}
	var mu sync.Mutex
	count := func(w *wsClient) int {
		mu.Lock()
		defer mu.Unlock()
		return len(received[w])
	}
	for _, w := range []*wsClient{ann, bob} {
		go func() {
			for {
				select {
				case f := <-w.frames:
					mu.Lock()
					received[w] = append(received[w], f)
					mu.Unlock()
				case <-w.closed:
					return
				}
			}
		}()
	}
	senders := sync.WaitGroup{}
	for _, w := range []*wsClient{ann, bob} {
		senders.Add(1)
		go func() {
			defer senders.Done()
			tick := time.NewTicker(60 * time.Millisecond) // pacing under the rate limit
			defer tick.Stop()
			for j := range perClient {
				<-tick.C
				b, _ := json.Marshal(map[string]string{"body": fmt.Sprintf("%s-%d", map[*wsClient]string{ann: "ann", bob: "bob"}[w], j)})
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_ = w.c.Write(ctx, websocket.MessageText, b)
				cancel()
			}
		}()
	}
	wait.For(t, "30 frames before the kill", func() error {
		if n := count(ann); n < 30 {
			return fmt.Errorf("ann has %d frames", n)
		}
		return nil
	})
	proxyA.kill()
	wait.For(t, "70 frames after the kill", func() error {
		if n := count(ann); n < 70 {
			return fmt.Errorf("ann has %d frames", n)
		}
		return nil
	})
	b.Stop()
	senders.Wait()
	total := 2 * perClient
	wait.For(t, "every frame at every member", func() error {
		for _, w := range []*wsClient{ann, bob} {
			if n := count(w); n < total {
				return fmt.Errorf("a member has %d of %d frames", n, total)
			}
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, w := range []*wsClient{ann, bob} {
		seen := map[string]bool{}
		for i, f := range received[w] {
			if f["type"] != "message" {
				t.Fatalf("frame %d = %v, want a message (nothing lost, no error)", i, f)
			}
			if id := num(t, f["id"]); id != int64(i+1) {
				t.Fatalf("frame %d has id %d, want %d: lost or repeated", i, id, i+1)
			}
			body := f["body"].(string)
			if seen[body] {
				t.Fatalf("body %q delivered twice", body)
			}
			seen[body] = true
		}
		if len(received[w]) != total {
			t.Fatalf("member got %d frames, want %d", len(received[w]), total)
		}
	}
	if n := len(gwLogs.Events(map[string]any{"event": "chat_reattach"})); n < 1 {
		t.Errorf("gateway re-attached %d times, want at least 1", n)
	}
	select {
	case err := <-ann.closed:
		t.Errorf("ann's socket closed: %v", err)
	default:
	}
}

// TestChatBadFrames: bad frames get an error frame and the socket stays open; an oversized
// frame closes it with 1009.
func TestChatBadFrames(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)
	w := dialChat(t, gw.URL, "room=bad-frames")
	w.nextOfType("history")
	for _, tc := range []struct{ frame, want string }{
		{"not json", "JSON object"},
		{`["body"]`, "JSON object"},
		{`{"text":"hi"}`, "JSON object"},
		{`{"body":5}`, "JSON object"},
		{`{"body":""}`, "body must be 1 to 4096"},
		{fmt.Sprintf(`{"body":%q}`, strings.Repeat("é", 4097)), "body must be 1 to 4096"},
	} {
		w.send(tc.frame)
		f := w.nextOfType("error")
		if msg, _ := f["error"].(string); !strings.Contains(msg, tc.want) {
			t.Errorf("frame %.40q: error %q, want it to contain %q", tc.frame, msg, tc.want)
		}
	}
	w.say(strings.Repeat("é", 4096))
	if f := w.nextOfType("message"); num(t, f["id"]) != 1 {
		t.Fatalf("after bad frames, message = %v, want id 1", f)
	}

	big := `{"body":"` + strings.Repeat("x", 16<<10) + `"}`
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = w.c.Write(wctx, websocket.MessageText, []byte(big)) // the server may cut it off mid-frame
	wcancel()
	select {
	case err := <-w.closed:
		if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Fatalf("oversized frame closed the socket with %v, want 1009", err)
		}
	case f := <-w.frames:
		t.Fatalf("oversized frame answered %v, want close 1009", f)
	case <-time.After(wait.Deadline):
		t.Fatal("oversized frame did not close the socket within 10s")
	}
}

// TestChatRateLimit: a burst over the per-socket limit gets error frames; the socket stays.
func TestChatRateLimit(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)
	w := dialChat(t, gw.URL, "room=rate-limit")
	w.nextOfType("history")
	const n = 200
	for i := range n {
		w.say(fmt.Sprintf("m%d", i))
	}
	var msgs, errs int
	for range n {
		f := w.next()
		switch f["type"] {
		case "message":
			msgs++
		case "error":
			if !strings.Contains(f["error"].(string), "too fast") {
				t.Fatalf("error frame %v, want the rate limit's", f)
			}
			errs++
		}
	}
	if errs == 0 || msgs < 40 {
		t.Fatalf("burst of %d: %d messages and %d rate-limit errors; want >= 40 and > 0", n, msgs, errs)
	}
}

// TestChatNotAWebSocket: a plain request gets 426; bad parameters get 400 before the upgrade.
func TestChatNotAWebSocket(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)
	res := call(t, "GET", gw.URL+"/websocket?room=general", "")
	if res.code != http.StatusUpgradeRequired || res.body["error"] == nil {
		t.Fatalf("plain GET /websocket = %d %s, want 426 with an error", res.code, res.raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range []string{
		"room=" + strings.Repeat("r", 129), "room=a%01b", "username=%07", "username=" + strings.Repeat("ü", 65),
		"since=-1", "since=x", "since=9007199254740992", "userId=" + strings.Repeat("u", 129),
	} {
		_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(gw.URL, "http")+"/websocket?"+q, nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			t.Errorf("dial ?%s = %d, %v; want 400", q, code, err)
		}
	}
}

// TestChatSlowConsumerIsClosed: a member that does not read is cut off, and the room keeps
// delivering to the others.
func TestChatSlowConsumerIsClosed(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A raw client that never reads, with a small receive buffer.
	dialer := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	slowConn, err := dialer.DialContext(ctx, "tcp", strings.TrimPrefix(gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer slowConn.Close()
	fmt.Fprintf(slowConn, "GET /websocket?room=slow-room HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	fast := dialChat(t, gw.URL, "room=slow-room")
	fast.nextOfType("history")
	body := strings.Repeat("x", 4000)
	const n = 3000
	for range n {
		postChat(t, gw.URL, "slow-room", body)
	}
	for want := int64(1); want <= n; want++ {
		if f := fast.nextOfType("message"); num(t, f["id"]) != want {
			t.Fatalf("fast member got id %v, want %d", f["id"], want)
		}
	}
	// The slow socket was closed: reading it to the end ends without hanging.
	_ = slowConn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, slowConn); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("slow socket was not closed: %v", err)
	}
}

// TestChatPackedBursts: a member that asks for packed frames (pack=1) gets every message once,
// in order, however the bursts are packed.
func TestChatPackedBursts(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)
	packed := dialChat(t, gw.URL, "room=packed&pack=1")
	packed.nextOfType("history")
	plain := dialChat(t, gw.URL, "room=packed")
	plain.nextOfType("history")
	const posters, each = 8, 25
	var wg sync.WaitGroup
	for p := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res := call(t, "POST", gw.URL+"/chat/rooms/packed/messages", fmt.Sprintf(`{"userId":"p%d","body":"m%d"}`, p, i))
				if res.code != http.StatusCreated {
					t.Errorf("POST = %d %s", res.code, res.raw)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, w := range []*wsClient{packed, plain} {
		for want := int64(1); want <= posters*each; want++ {
			if f := w.nextOfType("message"); num(t, f["id"]) != want {
				t.Fatalf("got id %v, want %d", f["id"], want)
			}
		}
	}
}
