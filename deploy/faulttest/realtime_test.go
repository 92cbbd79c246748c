//go:build faulttest

package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	lobby "github.com/vigil-dev/vigil/services/lobby/service"
)

// The realtime edge under a service's restart or SIGKILL (issue 13): a practice room with a
// leader and 50 viewers while the Room service restarts (SIGTERM: its graceful drain) or is
// SIGKILLed and started again, and a chat room of 50 members while the chat service is
// SIGKILLed and started again. The services run as child processes, as in the compose
// deployment, so a SIGKILL runs no clean-up of any kind; Redis is a real container.

// socket is a WebSocket whose frames a goroutine reads into frames; closed gets the error
// that ended it.
type socket struct {
	c      *websocket.Conn
	frames chan map[string]any
	closed chan error
}

func dialSocket(t *testing.T, url string) *socket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait.Deadline)
	defer cancel()
	c, res, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		code := 0
		if res != nil {
			code = res.StatusCode
		}
		t.Fatalf("dial %s: HTTP %d %v", url, code, err)
	}
	c.SetReadLimit(4 << 20)
	s := &socket{c: c, frames: make(chan map[string]any, 4096), closed: make(chan error, 1)}
	go func() {
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				s.closed <- err
				return
			}
			dec := json.NewDecoder(strings.NewReader(string(data)))
			for dec.More() {
				var f map[string]any
				if dec.Decode(&f) != nil {
					break
				}
				s.frames <- f
			}
		}
	}()
	t.Cleanup(func() { _ = c.CloseNow() })
	return s
}

// next returns the next frame of type typ, skipping others; it fails if the socket closes.
func (s *socket) next(t *testing.T, typ string) map[string]any {
	t.Helper()
	deadline := time.After(wait.Deadline)
	for {
		select {
		case f := <-s.frames:
			if f["type"] == typ {
				return f
			}
		case err := <-s.closed:
			t.Fatalf("socket closed (%v) while waiting for a %q frame", err, typ)
		case <-deadline:
			t.Fatalf("no %q frame within %v", typ, wait.Deadline)
		}
	}
}

func (s *socket) isClosed() bool {
	select {
	case err := <-s.closed:
		s.closed <- err
		return true
	default:
		return false
	}
}

// lobbyCount reads a room's viewers and leader presence from the Lobby through the gateway.
func lobbyCount(gw, code string) (viewers int64, leader bool, err error) {
	res, err := http.Get("http://" + gw + "/lobby/rooms/" + code)
	if err != nil {
		return 0, false, err
	}
	defer res.Body.Close()
	var body struct {
		Viewers       int64 `json:"viewers"`
		LeaderPresent bool  `json:"leaderPresent"`
	}
	if res.StatusCode != http.StatusOK {
		return 0, false, fmt.Errorf("GET room: HTTP %d", res.StatusCode)
	}
	err = json.NewDecoder(res.Body).Decode(&body)
	return body.Viewers, body.LeaderPresent, err
}

func wantLobby(gw, code string, viewers int64) func() error {
	return func() error {
		v, l, err := lobbyCount(gw, code)
		if err != nil {
			return err
		}
		if v != viewers || !l {
			return fmt.Errorf("the Lobby shows %d viewers, leader %v; want %d and the leader", v, l, viewers)
		}
		return nil
	}
}

// roomServiceReplaced runs a leader and 50 viewers through the Room service being ended by sig
// and started again on the same address.
func roomServiceReplaced(t *testing.T, sig syscall.Signal) {
	const viewers = 50
	url, prefix := redistest.URL(t), redistest.Prefix(t)
	lobbyConn := start(t, servertest.Serve(lobby.New, lobby.Options{Core: servertest.Core(t, prefix+"-lobby", newEvents().Logger())}))
	lobbyAddr := lobbyConn.Target()
	roomAddr := servertest.FreeAddr(t)
	roomArgs := []string{"-redis-url", url, "-prefix", prefix + "-room", "-shards", "4", "-lobby-addr", lobbyAddr}
	room := servertest.StartProcess(t, "room", roomAddr, roomArgs...)
	gw := startGateway(t, gateway.Backends{Lobby: lobbyAddr, Room: roomAddr})

	res, err := http.Post("http://"+gw+"/lobby/rooms", "application/json", strings.NewReader(`{"name": "Fault", "video": {"title": "Routine", "durationMs": 180000}}`))
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ Code, LeaderToken string }
	_ = json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	base := "ws://" + gw + "/rooms/" + created.Code + "/websocket?"
	lead := dialSocket(t, base+"role=leader&clientId=lead&token="+created.LeaderToken)
	lead.next(t, "state")
	var vs []*socket
	for i := range viewers {
		v := dialSocket(t, fmt.Sprintf("%srole=viewer&clientId=v%02d", base, i))
		v.next(t, "state")
		vs = append(vs, v)
	}
	wait.For(t, "the Lobby shows 50 viewers", wantLobby(gw, created.Code, viewers))

	// The Lobby is read throughout: its count may never move.
	stop := make(chan struct{})
	var moved []string
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if v, l, err := lobbyCount(gw, created.Code); err == nil && (v != viewers || !l) {
				moved = append(moved, fmt.Sprintf("%d viewers, leader %v", v, l))
			}
			time.Sleep(20 * time.Millisecond) // a sampling pace, not a wait
		}
	}()

	room.End(sig)
	servertest.StartProcess(t, "room", roomAddr, roomArgs...)
	for _, s := range append([]*socket{lead}, vs...) {
		s.next(t, "state") // re-attached: the socket gets the room's state again
	}
	lead.c.Write(context.Background(), websocket.MessageText, []byte(`{"type": "sync", "playing": true, "positionMs": 31337}`))
	for i, v := range vs {
		if f := v.next(t, "sync"); f["positionMs"] != float64(31337) {
			t.Fatalf("viewer %d's sync = %v, want positionMs 31337", i, f)
		}
	}
	close(stop)
	sampling.Wait()
	if len(moved) > 0 {
		t.Errorf("the Lobby's count moved %d times while the room service was replaced: %v", len(moved), moved)
	}
	closed := 0
	for _, s := range append([]*socket{lead}, vs...) {
		if s.isClosed() {
			closed++
		}
	}
	if closed > 0 {
		t.Fatalf("%d sockets closed, want 0", closed)
	}
	if err := wantLobby(gw, created.Code, viewers)(); err != nil {
		t.Fatal(err)
	}
	_ = vs[0].c.Close(websocket.StatusNormalClosure, "bye")
	wait.For(t, "the Lobby counts the viewer who left", wantLobby(gw, created.Code, viewers-1))
}

// TestFaultRoomServiceRestartedUnderViewers: the Room service restarted (SIGTERM, its drain,
// then started again) with a leader and 50 viewers: 0 sockets closed, the Lobby shows exactly
// 50 viewers throughout, the leader's next sync reaches all 50, a viewer who leaves is counted.
func TestFaultRoomServiceRestartedUnderViewers(t *testing.T) {
	roomServiceReplaced(t, syscall.SIGTERM)
}

// TestFaultRoomServiceKilledUnderViewers: the same with a SIGKILL: the sessions stay leased in
// Redis and the gateway re-attaches them to the new process.
func TestFaultRoomServiceKilledUnderViewers(t *testing.T) {
	roomServiceReplaced(t, syscall.SIGKILL)
}

// TestFaultChatServiceKilledUnderMembers: the chat service SIGKILLed and started again with 50
// members in a room: 0 sockets closed, and messages posted after it reach every member exactly
// once, in order.
func TestFaultChatServiceKilledUnderMembers(t *testing.T) {
	const members = 50
	url, prefix := redistest.URL(t), redistest.Prefix(t)
	chatAddr := servertest.FreeAddr(t)
	chatArgs := []string{"-redis-url", url, "-prefix", prefix}
	chat := servertest.StartProcess(t, "chat", chatAddr, chatArgs...)
	gw := startGateway(t, gateway.Backends{Chat: chatAddr})
	var ms []*socket
	for i := range members {
		m := dialSocket(t, fmt.Sprintf("ws://%s/websocket?room=fault-talk&userId=m%02d&username=M%02d", gw, i, i))
		m.next(t, "history")
		ms = append(ms, m)
	}
	post := func(body string) {
		t.Helper()
		wait.For(t, "a post is stored", func() error {
			res, err := http.Post("http://"+gw+"/chat/rooms/fault-talk/messages", "application/json",
				strings.NewReader(fmt.Sprintf(`{"userId": "poster", "username": "Poster", "body": %q}`, body)))
			if err != nil {
				return err
			}
			res.Body.Close()
			if res.StatusCode != http.StatusCreated {
				return fmt.Errorf("POST message: HTTP %d", res.StatusCode)
			}
			return nil
		})
	}
	post("before")
	for _, m := range ms {
		m.next(t, "message")
	}

	chat.End(syscall.SIGKILL)
	servertest.StartProcess(t, "chat", chatAddr, chatArgs...)
	const after = 5
	for i := range after {
		post(fmt.Sprintf("after %d", i))
	}
	for i, m := range ms {
		for want := int64(2); want <= 1+after; want++ {
			f := m.next(t, "message")
			if id := int64(f["id"].(float64)); id != want {
				t.Fatalf("member %d got message %d, want %d (each message exactly once, in order)", i, id, want)
			}
		}
	}
	// Nothing more: no message came twice.
	post("last")
	for i, m := range ms {
		if id := int64(m.next(t, "message")["id"].(float64)); id != 2+after {
			t.Fatalf("member %d's next message is %d, want %d", i, id, 2+after)
		}
		if m.isClosed() {
			t.Fatalf("member %d's socket closed", i)
		}
	}
}
