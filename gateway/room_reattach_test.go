package gateway

import (
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestPracticeRoomSurvivesGracefulRestart: the Room service drains and a new one starts on the
// same address; no socket closes and the Lobby's count never moves.
func TestPracticeRoomSurvivesGracefulRestart(t *testing.T) {
	t.Parallel()
	s := newRoomStack(t, 15*time.Second)
	room := s.startRoom(t)
	s.startGateway(t)
	roomReplaced(t, s, func() { room.Stop() }, func() { s.startRoom(t) })
}

// TestPracticeRoomLeaveIsNotAnError: viewers and a leader who leave normally (closing their
// sockets, or just dropping the connection) write no ERROR line, in the gateway or the
// services, and are uncounted.
func TestPracticeRoomLeaveIsNotAnError(t *testing.T) {
	t.Parallel()
	s := newRoomStack(t, 15*time.Second)
	s.startRoom(t)
	s.startGateway(t)
	code, token := s.createRoom(t)
	lead := mustDialRoom(t, s.gw, code, "role=leader&clientId=lead&token="+token)
	lead.next("state")
	a := mustDialRoom(t, s.gw, code, "role=viewer&clientId=a")
	b := mustDialRoom(t, s.gw, code, "role=viewer&clientId=b")
	a.next("state")
	b.next("state")
	wait.For(t, "two viewers counted", lobbyViewers(t, s.gw, code, 2, true))
	_ = a.c.Close(websocket.StatusNormalClosure, "bye")
	_ = b.c.CloseNow()
	_ = lead.c.Close(websocket.StatusGoingAway, "tab closed")
	wait.For(t, "everyone uncounted", lobbyViewers(t, s.gw, code, 0, false))
	wait.Until(t, "the gateway logged the leaves", func() bool {
		return len(s.logs.Events(map[string]any{"event": "ws_left"})) >= 3
	})
	s.assertNoErrors(t)
}
