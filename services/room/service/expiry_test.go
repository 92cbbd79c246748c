package service_test

import (
	"testing"
	"time"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// The expiry tests run on the env's fake clock: a room's deadline is read from its alarm and
// the clock is moved past it, so nothing depends on how fast the machine is.

const hour = time.Hour

// ended reports whether the member's stream has ended (without waiting).
func (m *member) hasEnded() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err != nil
}

func TestIdleRoomExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{idleTTL: hour, grace: 5 * time.Minute, lease: 2 * hour, fakeClock: true})
	created := e.clk.Now()
	code, token := e.createRoom()
	join(t, e.room, code, leader, "lead", token)
	v := join(t, e.room, code, viewer, "v", "")
	if !e.listed(code) {
		t.Fatal("a fresh room is not listed")
	}
	if due, want := e.alarmDue(code), created.Add(hour).UnixMilli(); due != want {
		t.Fatalf("alarm due at %d, want its creation plus the TTL, %d", due, want)
	}
	e.clk.Add(hour - time.Millisecond)
	if !e.listed(code) || v.hasEnded() {
		t.Fatal("the room is gone before its TTL")
	}
	e.clk.Add(time.Millisecond)
	if reason := v.ended(); reason != "expired" {
		t.Fatalf("viewer's stream ended with reason %q, want expired", reason)
	}
	wait.Until(t, "the room is gone from the list", func() bool { return !e.listed(code) })
}

func TestLeaderActionPostponesExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{idleTTL: hour, grace: 5 * time.Minute, lease: 2 * hour, fakeClock: true})
	created := e.clk.Now()
	code, token := e.createRoom()
	l := join(t, e.room, code, leader, "lead", token)
	v := join(t, e.room, code, viewer, "v", "")
	// A leader action at half the TTL moves the deadline to one TTL after it.
	e.clk.Add(hour / 2)
	acted := e.clk.Now()
	l.send(syncFrame(true, 1000))
	if at := v.await("sync", func(f *roomv1.JoinResponse) bool { return f.GetSync() != nil }).GetSync().GetAt(); at != acted.UnixMilli() {
		t.Fatalf("sync stamped %d, want the clock's %d", at, acted.UnixMilli())
	}
	if due, want := e.alarmDue(code), acted.Add(hour).UnixMilli(); due != want {
		t.Fatalf("alarm due at %d after the action, want %d (one TTL after it; the first deadline was %d)", due, want, created.Add(hour).UnixMilli())
	}
	wait.Until(t, "the lobby hears of the activity", func() bool { return e.lobbyRoom(code).GetLastActivity() == acted.UnixMilli() })
	// Past the first deadline, the room is still listed and open.
	e.clk.Add(hour/2 + time.Minute)
	if !e.listed(code) || v.hasEnded() {
		t.Fatal("the room is gone at its first deadline although its leader acted at half the TTL")
	}
	e.clk.Add(hour/2 - time.Minute)
	if reason := v.ended(); reason != "expired" {
		t.Fatalf("viewer's stream ended with reason %q, want expired", reason)
	}
	wait.Until(t, "the room is gone from the list", func() bool { return !e.listed(code) })
}

func TestFailedLobbyRemovalIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{idleTTL: hour, grace: 24 * hour, lease: 2 * hour, retryBase: time.Second, fakeClock: true})
	e.faults.failRemovals.Store(3)
	code, _ := e.createRoom()
	v := join(t, e.room, code, viewer, "v", "")
	e.clk.Add(hour)
	if reason := v.ended(); reason != "expired" {
		t.Fatalf("viewer's stream ended with reason %q, want expired", reason)
	}
	// The grace is a day, so only the retried alarm can take the room off the list; each poll
	// moves the clock a second, so the retries (1 s, 2 s, 4 s later) come due.
	wait.Until(t, "the retried alarm removes the room", func() bool {
		e.clk.Add(time.Second)
		return !e.listed(code)
	})
	if n := e.faults.removeCalls.Load(); n < 4 {
		t.Fatalf("RemoveRoom calls = %d, want at least 4 (3 failures, then success)", n)
	}
}

func TestListingPrunesWhenRemovalIsBlocked(t *testing.T) {
	t.Parallel()
	const grace = 5 * time.Minute
	e := newEnv(t, settings{idleTTL: hour, grace: grace, lease: 2 * hour, fakeClock: true})
	e.faults.failRemovals.Store(-1) // every removal fails: the Lobby never hears of the expiry
	code, _ := e.createRoom()
	v := join(t, e.room, code, viewer, "v", "")
	e.clk.Add(hour)
	if reason := v.ended(); reason != "expired" {
		t.Fatalf("viewer's stream ended with reason %q, want expired", reason)
	}
	// Listing hides a room idle for longer than TTL plus grace.
	e.clk.Add(grace)
	if !e.listed(code) {
		t.Fatal("listing pruned a room idle for exactly TTL plus grace")
	}
	e.clk.Add(time.Millisecond)
	if e.listed(code) {
		t.Fatal("listing still shows a room idle for longer than TTL plus grace")
	}
	if e.lobbyRoom(code) != nil {
		t.Fatal("GetRoom still finds the pruned room")
	}
}
