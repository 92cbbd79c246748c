package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// closeCode waits for a socket's read to end and returns its close code (-1: no close frame).
func closeCode(t *testing.T, closed <-chan error) websocket.StatusCode {
	t.Helper()
	var err error
	wait.Until(t, "the socket closed", func() bool {
		select {
		case err = <-closed:
			return true
		default:
			return false
		}
	})
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		return -1
	}
	return ce.Code
}

// TestGatewayShutdownClosesSocketsWithGoingAway: a gateway stopped with chat and practice-room
// sockets open closes every one with 1001 before Run returns; chat clients that reconnect
// (to another gateway) with since lose nothing that was posted meanwhile.
func TestGatewayShutdownClosesSocketsWithGoingAway(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t)
	chat := env.startChat(t, "", nil)
	s := newRoomStack(t, 15*time.Second)
	s.startRoom(t)
	backends := Backends{Chat: chat.Addr, Lobby: s.lobbyAddr, Room: s.roomAddr}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	addrc := make(chan string, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- Run(ctx, Options{Addr: "127.0.0.1:0", Backends: backends, Logger: s.log.With("service", "gateway")},
			func(a net.Addr) { addrc <- a.String() })
	}()
	gwA := "http://" + <-addrc
	s.gw = gwA

	const members = 4
	var chats []*wsClient
	for i := range members {
		c := dialChat(t, gwA, fmt.Sprintf("room=shutdown-talk&userId=u%d&username=M%d", i, i))
		c.nextOfType("history")
		chats = append(chats, c)
	}
	for i := 1; i <= 3; i++ {
		postChat(t, gwA, "shutdown-talk", fmt.Sprintf("before %d", i))
	}
	for _, c := range chats {
		for want := int64(1); want <= 3; want++ {
			if id := num(t, c.nextOfType("message")["id"]); id != want {
				t.Fatalf("message id %d, want %d", id, want)
			}
		}
	}
	code, token := s.createRoom(t)
	lead := mustDialRoom(t, gwA, code, "role=leader&clientId=lead&token="+token)
	lead.next("state")
	var rooms []*roomSocket
	for i := range 3 {
		v := mustDialRoom(t, gwA, code, fmt.Sprintf("role=viewer&clientId=v%d", i))
		v.next("state")
		rooms = append(rooms, v)
	}
	rooms = append(rooms, lead)

	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run after its context ended = %v, want nil", err)
	}
	// Run returned: every socket heard 1001 (the registry waits for each close handshake).
	if ev := s.logs.Events(map[string]any{"event": "sockets_closed"}); len(ev) != 1 || ev[0]["err"] != nil || ev[0]["sockets"] != float64(members+4) {
		t.Fatalf("gateway's sockets_closed events = %v, want one, %d sockets, no error", ev, members+4)
	}
	for i, c := range chats {
		if code := closeCode(t, c.closed); code != websocket.StatusGoingAway {
			t.Fatalf("chat socket %d closed with %d, want 1001", i, code)
		}
	}
	for i, r := range rooms {
		if code := closeCode(t, r.closed); code != websocket.StatusGoingAway {
			t.Fatalf("room socket %d closed with %d, want 1001", i, code)
		}
	}

	// Meanwhile the room goes on, through another gateway; the members come back there with
	// since = the last id they saw, and get exactly what they missed.
	gwB := startGateway(t, backends).URL
	for i := 4; i <= 6; i++ {
		postChat(t, gwB, "shutdown-talk", fmt.Sprintf("while away %d", i))
	}
	for i := range members {
		c := dialChat(t, gwB, fmt.Sprintf("room=shutdown-talk&userId=u%d&username=M%d&since=3", i, i))
		if ids := historyIDs(t, c.nextOfType("history")); !sameIDs(ids, seqIDs(4, 6)) {
			t.Fatalf("member %d resumed with %v, want [4 5 6]", i, ids)
		}
	}
	s.gw = gwB
	wait.For(t, "the practice room's sessions of the stopped gateway uncounted", lobbyViewers(t, gwB, code, 0, false))
}
