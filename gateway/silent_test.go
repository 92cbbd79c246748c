package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// silentProxy forwards TCP to a backend until it is silenced: then it stops forwarding either
// way and closes nothing, as a paused process or a partition does. Only keepalive notices.
type silentProxy struct {
	lis    net.Listener
	mu     sync.Mutex
	silent chan struct{} // closed when silenced
	conns  []net.Conn
}

func startSilentProxy(t *testing.T, backend string) *silentProxy {
	t.Helper()
	p := &silentProxy{silent: make(chan struct{})}
	p.lis = proxyAccept(t, backend, func(c, u net.Conn) bool {
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go p.pipe(u, c)
		go p.pipe(c, u)
		return true
	})
	t.Cleanup(func() {
		_ = p.lis.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

// proxyAccept listens on a loopback port and hands each accepted connection, with a new one to
// backend, to serve; it stops accepting when serve says so or the listener closes.
func proxyAccept(t *testing.T, backend string, serve func(client, upstream net.Conn) bool) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", backend)
			if err != nil {
				_ = c.Close()
				continue
			}
			if !serve(c, u) {
				return
			}
		}
	}()
	return lis
}

func (p *silentProxy) addr() string { return p.lis.Addr().String() }

// pipe copies src to dst until silenced; then it holds what it read and waits for the test to
// end (the cleanup closes the connections).
func (p *silentProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-p.silent:
			_, _ = io.Copy(io.Discard, src) // read on, forward nothing, close nothing
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// silence stops all forwarding without closing a connection.
func (p *silentProxy) silence() { close(p.silent) }

// TestChatSurvivesASilentReplica: the replica holding the room's stream goes silent (its
// connections stay open, nothing comes back: a paused process). The bridge's heartbeat (a
// ping unanswered) notices, the room
// re-attaches to the other replica through its one reconnect loop, no socket closes, and every
// message stored after the silence reaches every member once, in order.
func TestChatSurvivesASilentReplica(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t)
	a := env.startChat(t, "", nil)
	proxyA := startSilentProxy(t, a.Addr)
	addrB := servertest.FreeAddr(t)
	// Only A runs, so the room's stream is on A.
	gwLogs, ann, bob := twoMembers(t, proxyA.addr()+","+addrB, "silent")
	b := env.startChat(t, addrB, nil)

	client := chatv1.NewChatServiceClient(servertest.Dial(t, b.Addr))
	post := func(body string) {
		t.Helper()
		if _, err := client.PostMessage(context.Background(), &chatv1.PostMessageRequest{Room: "silent", UserId: "carol", Username: "carol", Body: body}); err != nil {
			t.Fatalf("PostMessage(%s) = %v", body, err)
		}
	}
	post("before")
	for _, w := range []*wsClient{ann, bob} {
		if f := w.nextOfType("message"); f["body"] != "before" {
			t.Fatalf("first message = %v, want before", f)
		}
	}

	proxyA.silence()
	const after = 20
	for i := range after {
		post(fmt.Sprintf("after-%d", i))
	}
	for _, w := range []*wsClient{ann, bob} {
		for i := range after {
			var f map[string]any
			wait.For(t, fmt.Sprintf("message after-%d", i), func() error {
				select {
				case f = <-w.frames:
					if f["type"] != "message" {
						return fmt.Errorf("a %v frame", f["type"]) // presence and the like
					}
					return nil
				case err := <-w.closed:
					t.Fatalf("a socket closed: %v", err)
				default:
				}
				return fmt.Errorf("no frame yet")
			})
			if f["type"] != "message" || f["body"] != fmt.Sprintf("after-%d", i) || num(t, f["id"]) != int64(i+2) {
				t.Fatalf("frame %d after the silence = %v, want message after-%d with id %d (none lost or repeated)", i, f, i, i+2)
			}
		}
	}
	reattaches := gwLogs.Events(map[string]any{"event": "chat_reattach"})
	if len(reattaches) < 1 {
		t.Errorf("gateway re-attached %d times, want at least 1", len(reattaches))
	} else if e := fmt.Sprint(reattaches[0]["err"]); !strings.Contains(e, "went silent") {
		// The bridge's heartbeat (ConnectRequest.ping), not keepalive, found the silence.
		t.Errorf("first re-attach because %q, want the heartbeat's silence", e)
	}
	for _, w := range []*wsClient{ann, bob} {
		select {
		case err := <-w.closed:
			t.Errorf("a socket closed: %v", err)
		case f := <-w.frames:
			if f["type"] == "message" {
				t.Errorf("extra message %v, want none (no duplicate)", f)
			}
		default:
		}
	}
}

// twoMembers serves chat on a gateway with backends chat (logging into the returned buffer)
// and opens ann's and bob's sockets in room, past their history.
func twoMembers(t *testing.T, chat, room string) (*servertest.LogBuffer, *wsClient, *wsClient) {
	t.Helper()
	logs := &servertest.LogBuffer{}
	g, err := New(context.Background(), Options{Backends: Backends{Chat: chat}, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	t.Cleanup(func() { gw.Close(); g.Close() })
	ann := dialChat(t, gw.URL, "room="+room+"&userId=ann")
	ann.nextOfType("history")
	bob := dialChat(t, gw.URL, "room="+room+"&userId=bob")
	bob.nextOfType("history")
	return logs, ann, bob
}

// TestPracticeRoomSurvivesAPausedReplica: the Room replica holding the room's stream is paused
// (SIGSTOP: its connections stay open, nothing answers, as docker pause does). The bridge's
// heartbeat notices without waiting for gRPC keepalive, the room's stream moves to the other
// replica and every socket's session re-attaches there: no socket closes, the Lobby's count
// never moves, and every sync the leader sends after the move reaches every viewer exactly
// once. When the paused replica resumes, its stale stream changes nothing: no socket closes, no
// count moves, no sync arrives twice.
func TestPracticeRoomSurvivesAPausedReplica(t *testing.T) {
	t.Parallel()
	const viewers = 3
	s := newRoomStack(t, 15*time.Second)
	paused := s.roomProcess(t)
	addrB := servertest.FreeAddr(t)
	s.roomBackend = s.roomAddr + "," + addrB
	s.startGateway(t) // only the first replica runs, so the room's stream is on it
	code, lead, vs := s.openRoom(t, viewers)
	s.startRoomAt(t, addrB)

	sampler := sampleLobby(t, s.gw, code, viewers, true)
	if err := paused.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = paused.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	pausedAt := time.Now()
	everyone := append([]*roomSocket{lead}, vs...)
	for _, sock := range everyone {
		sock.nextWithin("state", wait.Deadline) // its session re-attached on the other replica
	}
	t.Logf("every session re-attached %v after the pause", time.Since(pausedAt).Round(time.Millisecond))
	silent := 0
	for _, e := range s.logs.Events(map[string]any{"event": "room_reattach", "service": "gateway"}) {
		if strings.Contains(fmt.Sprint(e["err"]), "silent") {
			silent++
		}
	}
	if silent < 1 {
		t.Errorf("the gateway abandoned %d silent streams, want at least 1", silent)
	}

	const syncs = 5
	for i := range syncs {
		lead.send(fmt.Sprintf(`{"type": "sync", "playing": true, "positionMs": %d}`, 1000+i))
	}
	for n, v := range vs {
		for i := range syncs {
			if f := v.nextWithin("sync", wait.Deadline); f["positionMs"] != json.Number(fmt.Sprint(1000+i)) {
				t.Fatalf("viewer %d's sync %d after the move = %v, want positionMs %d (none lost or repeated)", n, i, f, 1000+i)
			}
		}
	}

	resume()
	// The resumed replica sees its stream cancelled: its late end must not close or uncount
	// the sessions that live on the other replica, nor send anything twice.
	lead.send(`{"type": "sync", "playing": true, "positionMs": 9999}`)
	for n, v := range vs {
		if f := v.nextWithin("sync", wait.Deadline); f["positionMs"] != json.Number("9999") {
			t.Fatalf("viewer %d's sync after the resume = %v, want positionMs 9999 (no repeat)", n, f)
		}
	}
	wait.For(t, "the Lobby still counts the viewers and the leader", lobbyViewers(t, s.gw, code, viewers, true))
	sampler.finish(t)
	assertOpen(t, everyone...)
}
