package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// openStreams is how many streams of the RoomService method are open on this process's room
// services: started minus handled, from their gRPC server metrics.
func openStreams(t *testing.T, method string) int {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		sign := 0.0
		switch mf.GetName() {
		case "grpc_server_started_total":
			sign = 1
		case "grpc_server_handled_total":
			sign = -1
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["grpc_service"] == "vigil.room.v1.RoomService" && labels["grpc_method"] == method {
				n += sign * m.GetCounter().GetValue()
			}
		}
	}
	return int(n)
}

// One upstream stream per room per gateway: 20 sockets of one room (a leader and 19 viewers)
// hold ONE Attach stream to the Room service and no Join stream; the leader's frame reaches
// all 19 viewers through it, and the stream ends with the room's last socket.
func TestPracticeRoomOneStreamPerRoom(t *testing.T) {
	s := newRoomStack(t, 15*time.Second)
	s.startRoom(t)
	s.startGateway(t)
	attach0, join0 := openStreams(t, "Attach"), openStreams(t, "Join")
	code, lead, vs := s.openRoom(t, 19)
	if n := openStreams(t, "Attach") - attach0; n != 1 {
		t.Fatalf("%d Attach streams open for 20 sockets of one room, want 1", n)
	}
	if n := openStreams(t, "Join") - join0; n != 0 {
		t.Fatalf("%d Join streams open, want 0", n)
	}
	lead.send(`{"type": "sync", "playing": true, "positionMs": 777}`)
	for i, v := range vs {
		if f := v.next("sync"); f["positionMs"] != json.Number("777") {
			t.Fatalf("viewer %d's sync = %v", i, f)
		}
	}
	// A second room is a second stream.
	code2, _ := s.createRoom(t)
	other := mustDialRoom(t, s.gw, code2, "role=viewer&clientId=x")
	other.next("state")
	if n := openStreams(t, "Attach") - attach0; n != 2 {
		t.Fatalf("%d Attach streams open for two rooms, want 2", n)
	}
	_ = other.c.Close(websocket.StatusNormalClosure, "bye")
	for _, v := range vs {
		_ = v.c.Close(websocket.StatusNormalClosure, "bye")
	}
	wait.For(t, "the Lobby counts the 19 viewers' leave", lobbyViewers(t, s.gw, code, 0, true))
	_ = lead.c.Close(websocket.StatusNormalClosure, "bye")
	wait.Until(t, "every Attach stream ends with its room's last socket", func() bool {
		return openStreams(t, "Attach") == attach0
	})
	s.assertNoErrors(t)
}

// stallListener hands out connections; once stall is called, the connection accepted next
// blocks its writes (after the first stalled-at byte count) until release: a client that
// stopped reading, with every buffer on the way full.
type stallListener struct {
	net.Listener
	mu      sync.Mutex
	armed   bool
	stalled *stallConn
}

type stallConn struct {
	net.Conn
	mu      sync.Mutex
	stalled bool
	release chan struct{}
}

func (l *stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.armed {
		l.armed = false
		sc := &stallConn{Conn: c, release: make(chan struct{})}
		l.stalled = sc
		return sc, nil
	}
	return c, nil
}

func (c *stallConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	stalled := c.stalled
	c.mu.Unlock()
	if stalled {
		<-c.release
	}
	return c.Conn.Write(p)
}

func (c *stallConn) stall() {
	c.mu.Lock()
	c.stalled = true
	c.mu.Unlock()
}

// A socket whose writes block does not stall the room: while one viewer's connection cannot
// take a byte, the leader's 60 frames reach every other viewer, in order; released, the slow
// viewer gets them too, in order (or is closed as a slow consumer, never mixed up).
func TestPracticeRoomSlowSocketDoesNotStallOthers(t *testing.T) {
	s := newRoomStack(t, 15*time.Second)
	s.startRoom(t)
	g, err := New(context.Background(), Options{Backends: Backends{Lobby: s.lobbyAddr, Room: s.roomAddr}, Logger: s.log.With("service", "gateway")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g.Handler())
	sl := &stallListener{Listener: srv.Listener}
	srv.Listener = sl
	srv.Start()
	t.Cleanup(func() { srv.Close(); g.Close() })
	s.gw = srv.URL

	code, token := s.createRoom(t)
	lead := mustDialRoom(t, s.gw, code, "role=leader&clientId=lead&token="+token)
	lead.next("state")
	var vs []*roomSocket
	for i := range 4 {
		v := mustDialRoom(t, s.gw, code, fmt.Sprintf("role=viewer&clientId=v%d", i))
		v.next("state")
		vs = append(vs, v)
	}
	sl.mu.Lock()
	sl.armed = true
	sl.mu.Unlock()
	slow := mustDialRoom(t, s.gw, code, "role=viewer&clientId=slow")
	slow.next("state")
	sl.mu.Lock()
	sc := sl.stalled
	sl.mu.Unlock()
	if sc == nil {
		t.Fatal("the slow viewer's connection was not the stalled one")
	}
	sc.stall()
	wait.For(t, "the Lobby counts 5 viewers", lobbyViewers(t, s.gw, code, 5, true))

	const frames = 60
	for i := 1; i <= frames; i++ {
		// Paced under the socket's frame limit (burst 40, 20/s).
		if i > 30 {
			time.Sleep(60 * time.Millisecond)
		}
		lead.send(fmt.Sprintf(`{"type": "sync", "playing": true, "positionMs": %d}`, i))
	}
	for n, v := range vs {
		for i := 1; i <= frames; i++ {
			if f := v.next("sync"); f["positionMs"] != json.Number(fmt.Sprint(i)) {
				t.Fatalf("viewer %d's sync %d = %v, want positionMs %d", n, i, f, i)
			}
		}
	}
	close(sc.release)
	next := 1
	for next <= frames {
		select {
		case f := <-slow.frames:
			if f["type"] != "sync" {
				continue
			}
			if f["positionMs"] != json.Number(fmt.Sprint(next)) {
				t.Fatalf("slow viewer's sync = %v, want positionMs %d", f, next)
			}
			next++
		case err := <-slow.closed:
			if !strings.Contains(err.Error(), "1013") {
				t.Fatalf("slow viewer ended with %v after %d frames, want its frames or 1013", err, next-1)
			}
			next = frames + 1
		}
	}
	assertOpen(t, append([]*roomSocket{lead}, vs...)...)
}

// A viewer who leaves while the Room service is away is counted when the room's stream is
// back, not at its session's lease end: the lease here is longer than any wait of the test.
func TestPracticeRoomLeaveDuringRestartIsCounted(t *testing.T) {
	t.Parallel()
	s := newRoomStack(t, 10*time.Minute)
	room := s.startRoom(t)
	s.startGateway(t)
	code, lead, vs := s.openRoom(t, 3)

	room.Stop()
	_ = vs[0].c.Close(websocket.StatusNormalClosure, "bye")
	wait.Until(t, "the gateway saw the viewer leave", func() bool {
		return len(s.logs.Events(map[string]any{"event": "ws_left", "service": "gateway"})) >= 1
	})
	s.startRoom(t)
	lead.nextWithin("state", wait.Deadline) // re-attached
	wait.For(t, "the Lobby counts the viewer who left in the gap", lobbyViewers(t, s.gw, code, 2, true))
	lead.send(`{"type": "sync", "playing": true, "positionMs": 99}`)
	for _, v := range vs[1:] {
		if f := v.nextWithin("sync", wait.Deadline); f["positionMs"] != json.Number("99") {
			t.Fatalf("viewer's sync = %v", f)
		}
	}
	assertOpen(t, lead, vs[1], vs[2])
}
