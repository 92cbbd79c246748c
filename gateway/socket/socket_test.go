package socket

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// newRegistry is a socket registry with its metrics on a registry of its own.
func newRegistry(t *testing.T, o Options) *Registry {
	t.Helper()
	if o.Metrics == nil {
		o.Metrics = prometheus.NewRegistry()
	}
	reg, err := NewRegistry(o)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// echoServer serves one socket route through a registry: the room is the "room" query value;
// each accepted socket is handed to the returned channel, and its reader goroutine echoes
// frames back with SendFrame.
func echoServer(t *testing.T, reg *Registry, lim Limits) (*httptest.Server, chan *Conn, chan error) {
	t.Helper()
	socks := make(chan *Conn, 16)
	ended := make(chan error, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ticket, ok := reg.Admit(w, r, Key{Route: "chat", Name: r.URL.Query().Get("room")})
		if !ok {
			return
		}
		s, err := ticket.Accept(w, r, lim)
		if err != nil {
			return
		}
		socks <- s
		go func() {
			defer s.CloseNow()
			for {
				data, err := s.Read()
				if err != nil {
					ended <- err
					return
				}
				s.SendFrame(TextFrame(data))
			}
		}()
	}))
	t.Cleanup(srv.Close)
	return srv, socks, ended
}

func dial(t *testing.T, srv *httptest.Server, query string, opts *websocket.DialOptions) (*websocket.Conn, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/?"+query, opts)
	code := 0
	if res != nil {
		code = res.StatusCode
	}
	if c != nil {
		t.Cleanup(func() { _ = c.CloseNow() })
	}
	return c, code, err
}

func mustDial(t *testing.T, srv *httptest.Server, query string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	c, code, err := dial(t, srv, query, opts)
	if err != nil {
		t.Fatalf("dial ?%s = %d %v", query, code, err)
	}
	return c
}

// TestKeepAlive: a client that answers pings stays; one that does not is closed.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	srv, _, ended := echoServer(t, newRegistry(t, Options{}), Limits{PingInterval: 30 * time.Millisecond, PongTimeout: 300 * time.Millisecond})

	var pings atomic.Int32
	live := mustDial(t, srv, "room=a", &websocket.DialOptions{OnPingReceived: func(context.Context, []byte) bool {
		pings.Add(1)
		return true
	}})
	go func() {
		for {
			if _, _, err := live.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	wait.Until(t, "5 pings answered", func() bool { return pings.Load() >= 5 })
	select {
	case err := <-ended:
		t.Fatalf("a client answering pings was closed: %v", err)
	default:
	}

	// A client that never reads never answers a ping: the server closes it.
	mustDial(t, srv, "room=a", nil)
	wait.Until(t, "the silent client closed", func() bool { return len(ended) > 0 })
}

// TestEchoAndLimits: frames are delivered in order, a plain request gets 426, and an
// oversized frame closes with 1009.
func TestEchoAndLimits(t *testing.T) {
	t.Parallel()
	srv, _, _ := echoServer(t, newRegistry(t, Options{}), Limits{MaxFrame: 1024})
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUpgradeRequired || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("plain GET = %d %s, want 426 with an error sentence", res.StatusCode, body)
	}
	c := mustDial(t, srv, "room=a", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, msg := range []string{"a", strings.Repeat("b", 200), strings.Repeat("c", 1024)} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != msg {
			t.Fatalf("echo of %d bytes = %d bytes, %v", len(msg), len(got), err)
		}
	}
	_ = c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("d", 1025)))
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("after an oversized frame: %v, want close 1009", err)
	}
}

// TestSlowConsumer: a full send queue refuses further frames and closes the socket.
func TestSlowConsumer(t *testing.T) {
	t.Parallel()
	srv, socks, _ := echoServer(t, newRegistry(t, Options{}), Limits{SendQueue: 4})
	mustDial(t, srv, "room=a", nil) // never reads
	s := <-socks
	frame := TextFrame([]byte(strings.Repeat("x", 64<<10)))
	refused := false
	for range 10000 {
		if !s.SendFrame(frame) {
			refused = true
			break
		}
	}
	if !refused {
		t.Fatal("10,000 frames of 64 KiB to a client that never reads were all queued")
	}
	if s.SendFrame(TextFrame([]byte("after"))) {
		t.Error("a socket closed as a slow consumer accepted another frame")
	}
}

// TestFrameRate: frames over the socket's rate are refused (Allow false) until tokens refill.
func TestFrameRate(t *testing.T) {
	t.Parallel()
	srv, socks, _ := echoServer(t, newRegistry(t, Options{}), Limits{Rate: 1, Burst: 3})
	mustDial(t, srv, "room=a", nil)
	s := <-socks
	for i := range 3 {
		if !s.Allow() {
			t.Fatalf("frame %d of a burst of 3 refused", i+1)
		}
	}
	if s.Allow() {
		t.Fatal("a 4th frame at once was allowed with a burst of 3")
	}
}

// TestOrigins: a cross-site upgrade from an origin not on the list is refused with 403 before
// the route runs; the request's own origin, listed origins and non-browser clients are let in.
func TestOrigins(t *testing.T) {
	t.Parallel()
	srv, _, _ := echoServer(t, newRegistry(t, Options{OriginPatterns: []string{"app.example.com", "https://*.vigil.test"}}), Limits{})
	host := strings.TrimPrefix(srv.URL, "http://")
	cases := []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"http://" + host, true},
		{"https://app.example.com", true},
		{"https://ui.vigil.test", true},
		{"http://ui.vigil.test", false},
		{"https://evil.example", false},
		{"https://app.example.com.evil.example", false},
		{"null", false},
	}
	for _, c := range cases {
		h := http.Header{}
		if c.origin != "" {
			h.Set("Origin", c.origin)
		}
		_, code, err := dial(t, srv, "room=a", &websocket.DialOptions{HTTPHeader: h})
		if c.ok && err != nil {
			t.Errorf("upgrade from origin %q = %d %v, want open", c.origin, code, err)
		}
		if !c.ok && code != http.StatusForbidden {
			t.Errorf("upgrade from origin %q = %d %v, want 403", c.origin, code, err)
		}
	}
}

// TestPerRoomCap: one socket over the room's cap is refused with 429; another room is not
// affected; closing one frees its slot.
func TestPerRoomCap(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, Options{MaxPerRoom: 2})
	srv, _, _ := echoServer(t, reg, Limits{})
	first := mustDial(t, srv, "room=full", nil)
	mustDial(t, srv, "room=full", nil)
	if _, code, err := dial(t, srv, "room=full", nil); err == nil || code != http.StatusTooManyRequests {
		t.Fatalf("third socket in the room = %d %v, want 429", code, err)
	}
	mustDial(t, srv, "room=other", nil)
	_ = first.Close(websocket.StatusNormalClosure, "")
	wait.Until(t, "the closed socket's slot freed", func() bool { return reg.Count(Key{"chat", "full"}) == 1 })
	mustDial(t, srv, "room=full", nil)
}

// TestShutdownClosesEverySocketWithGoingAway: Shutdown closes every open socket with 1001,
// returns once they are all closed, and refuses new upgrades with 503.
func TestShutdownClosesEverySocketWithGoingAway(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, Options{})
	srv, _, _ := echoServer(t, reg, Limits{})
	const n = 20
	closed := make(chan websocket.StatusCode, n)
	for i := range n {
		c := mustDial(t, srv, fmt.Sprintf("room=r%d", i%3), nil)
		go func() {
			_, _, err := c.Read(context.Background())
			closed <- websocket.CloseStatus(err)
		}()
	}
	wait.Until(t, "20 sockets registered", func() bool { return reg.Open() == n })
	if err := reg.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if open := reg.Open(); open != 0 {
		t.Fatalf("%d sockets open after Shutdown returned", open)
	}
	for range n {
		if code := <-closed; code != websocket.StatusGoingAway {
			t.Fatalf("a socket closed with %d, want 1001", code)
		}
	}
	if _, code, err := dial(t, srv, "room=late", nil); err == nil || code != http.StatusServiceUnavailable {
		t.Fatalf("upgrade after Shutdown = %d %v, want 503", code, err)
	}
}

// TestMetricsHaveNoRoomLabel: sockets are counted by route only, however many rooms there are.
func TestMetricsHaveNoRoomLabel(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, Options{})
	srv, _, _ := echoServer(t, reg, Limits{})
	var conns []*websocket.Conn
	for i := range 5 {
		conns = append(conns, mustDial(t, srv, fmt.Sprintf("room=metric-%d", i), nil))
	}
	wait.Until(t, "5 sockets counted", func() bool { return testutil.ToFloat64(reg.m.open.WithLabelValues("chat")) == 5 })
	if got := testutil.ToFloat64(reg.m.rooms.WithLabelValues("chat")); got != 5 {
		t.Fatalf("vigil_gateway_socket_rooms{route=chat} = %v, want 5", got)
	}
	if n := testutil.CollectAndCount(reg.m.open); n != 1 {
		t.Fatalf("vigil_gateway_sockets has %d series, want one per route", n)
	}
	if n := testutil.CollectAndCount(reg.m.rooms); n != 1 {
		t.Fatalf("vigil_gateway_socket_rooms has %d series, want one per route", n)
	}
	for _, c := range conns {
		_ = c.Close(websocket.StatusNormalClosure, "")
	}
	wait.Until(t, "the sockets uncounted", func() bool { return testutil.ToFloat64(reg.m.open.WithLabelValues("chat")) == 0 })
}

// TestMetricsPerRegisterer: two socket registries on two Prometheus registries each count
// their own sockets; two on one Prometheus registry share its gauges.
func TestMetricsPerRegisterer(t *testing.T) {
	t.Parallel()
	promA, promB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a, b := newRegistry(t, Options{Metrics: promA}), newRegistry(t, Options{Metrics: promB})
	srvA, _, _ := echoServer(t, a, Limits{})
	srvB, _, _ := echoServer(t, b, Limits{})
	for i := range 3 {
		defer mustDial(t, srvA, fmt.Sprintf("room=a-%d", i), nil).CloseNow()
	}
	defer mustDial(t, srvB, "room=b", nil).CloseNow()
	want := func(reg *prometheus.Registry, sockets, rooms int) func() error {
		return func() error {
			exp := fmt.Sprintf(`
# HELP vigil_gateway_socket_rooms Rooms with at least one open WebSocket on this gateway, by route (chat, room).
# TYPE vigil_gateway_socket_rooms gauge
vigil_gateway_socket_rooms{route="chat"} %d
# HELP vigil_gateway_sockets Open WebSocket connections on this gateway, by route (chat, room).
# TYPE vigil_gateway_sockets gauge
vigil_gateway_sockets{route="chat"} %d
`, rooms, sockets)
			return testutil.GatherAndCompare(reg, strings.NewReader(exp))
		}
	}
	wait.For(t, "registry A counts its 3 sockets", want(promA, 3, 3))
	wait.For(t, "registry B counts its 1 socket", want(promB, 1, 1))

	shared := newRegistry(t, Options{Metrics: promA})
	if shared.m.open != a.m.open || shared.m.rooms != a.m.rooms {
		t.Fatal("a second socket registry on the same Registerer made new gauges, want the registered ones")
	}
}

// TestPackFrames: packed frames carry the payloads in order, newline-separated, under every
// header length.
func TestPackFrames(t *testing.T) {
	t.Parallel()
	payloads := []string{"a", strings.Repeat("b", 200), strings.Repeat("c", 70000)}
	var frames []Frame
	for _, p := range payloads {
		f := TextFrame([]byte(p))
		if string(f.Payload()) != p {
			t.Fatalf("payload of a %d-byte frame is %d bytes", len(p), len(f.Payload()))
		}
		frames = append(frames, f)
	}
	got := PackFrames(frames)
	if want := strings.Join(payloads, "\n"); string(got.Payload()) != want || got[0] != 0x81 {
		t.Fatalf("packed frame: header %x, %d payload bytes; want text, %d", got[0], len(got.Payload()), len(want))
	}
}

// TestFanOutToIdleSocketsStartsNoWriters: a burst to sockets whose kernel buffers have room is
// written by the shared flushers, so a room's fan-out to its idle sockets starts no goroutine
// per socket. Each writer goroutine left a goroutine struct and half-empty stack spans behind: an
// idle practice-room socket held ~2.5 KiB more than a chat socket (docs/BENCHMARKS.md).
func TestFanOutToIdleSocketsStartsNoWriters(t *testing.T) {
	t.Parallel()
	const sockets, bursts = 100, 20
	reg := newRegistry(t, Options{})
	srv, socks, _ := echoServer(t, reg, Limits{})
	var received atomic.Int64
	conns := make([]*Conn, 0, sockets)
	for range sockets {
		c := mustDial(t, srv, "room=a", nil)
		go func() {
			for {
				if _, _, err := c.Read(context.Background()); err != nil {
					return
				}
				received.Add(1)
			}
		}()
		conns = append(conns, <-socks)
	}
	burst := []Frame{TextFrame([]byte(`{"type":"join","clientId":"v1"}`)), TextFrame([]byte(`{"type":"occupancy","viewers":1}`))}
	before := reg.flushers.writerStarts.Load()
	for range bursts {
		for _, s := range conns {
			if !s.SendFrames(burst) {
				t.Fatal("SendFrames refused a burst on an open socket")
			}
		}
	}
	wait.Until(t, "every frame received", func() bool { return received.Load() == sockets*bursts*int64(len(burst)) })
	if n := reg.flushers.writerStarts.Load() - before; n != 0 {
		t.Errorf("%d bursts to %d idle sockets started %d writer goroutines, want 0", bursts, sockets, n)
	}
}

// TestFullKernelBufferKeepsOrder: frames a client is not reading (13 MB) fill the kernel's
// buffers, most likely in the middle of one; the rest of it and every later frame, left to a
// writer goroutine, arrive whole and in order once the client reads.
func TestFullKernelBufferKeepsOrder(t *testing.T) {
	t.Parallel()
	srv, socks, _ := echoServer(t, newRegistry(t, Options{}), Limits{})
	c := mustDial(t, srv, "room=a", nil)
	c.SetReadLimit(1 << 20)
	s := <-socks
	const frames = 200
	payload := func(i int) string { return fmt.Sprintf("%04d%s", i, strings.Repeat("x", 64<<10+i)) }
	for i := range frames {
		if !s.SendFrames([]Frame{TextFrame([]byte(payload(i)))}) {
			t.Fatalf("frame %d refused", i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range frames {
		_, got, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read frame %d: %v", i, err)
		}
		if want := payload(i); string(got) != want {
			t.Fatalf("frame %d = %.8q… (%d bytes), want %.8q… (%d bytes)", i, got, len(got), want, len(want))
		}
	}
}
