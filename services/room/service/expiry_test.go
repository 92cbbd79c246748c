package service_test

import (
	"testing"
	"time"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestIdleRoomExpires(t *testing.T) {
	t.Parallel()
	const ttl, grace = 1500 * time.Millisecond, time.Second
	e := newEnv(t, settings{idleTTL: ttl, grace: grace})
	created := time.Now()
	code, token := e.createRoom()
	join(t, e.room, code, leader, "lead", token)
	v := join(t, e.room, code, viewer, "v", "")
	if !e.listed(code) {
		t.Fatal("a fresh room is not listed")
	}
	if reason := v.ended(); reason != "expired" {
		t.Fatalf("viewer's stream ended with reason %q, want expired", reason)
	}
	if at := time.Since(created); at < ttl-100*time.Millisecond {
		t.Fatalf("room expired %v after it was created, before its TTL of %v", at, ttl)
	}
	wait.Until(t, "the room is gone from the list", func() bool { return !e.listed(code) })
}

func TestLeaderActionPostponesExpiry(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	e := newEnv(t, settings{idleTTL: ttl, grace: time.Second})
	created := time.Now()
	code, token := e.createRoom()
	l := join(t, e.room, code, leader, "lead", token)
	v := join(t, e.room, code, viewer, "v", "")
	// A leader action at half the TTL.
	wait.Until(t, "half the TTL passes", func() bool { return time.Since(created) >= ttl/2 })
	acted := time.Now()
	l.send(syncFrame(true, 1000))
	v.await("sync", func(f *roomv1.JoinResponse) bool { return f.GetSync() != nil })
	// Past the first deadline, the room is still there.
	wait.Until(t, "the first deadline passes", func() bool { return time.Since(created) >= ttl+300*time.Millisecond })
	if !e.listed(code) {
		t.Fatal("the room is gone at its first deadline although its leader acted at half the TTL")
	}
	if reason := v.ended(); reason != "expired" {
		t.Fatalf("viewer's stream ended with reason %q, want expired", reason)
	}
	if at := time.Since(acted); at < ttl-100*time.Millisecond || at > ttl+time.Second {
		t.Fatalf("room expired %v after the leader's action, want about one TTL (%v)", at, ttl)
	}
	wait.Until(t, "the room is gone from the list", func() bool { return !e.listed(code) })
}

func TestFailedLobbyRemovalIsRetried(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	e := newEnv(t, settings{idleTTL: ttl, grace: time.Minute, retryBase: 100 * time.Millisecond})
	e.faults.failRemovals.Store(3)
	code, _ := e.createRoom()
	v := join(t, e.room, code, viewer, "v", "")
	if reason := v.ended(); reason != "expired" {
		t.Fatalf("viewer's stream ended with reason %q, want expired", reason)
	}
	// The grace is a minute, so only the retried alarm can take the room off the list.
	wait.Until(t, "the retried alarm removes the room", func() bool { return !e.listed(code) })
	if n := e.faults.removeCalls.Load(); n < 4 {
		t.Fatalf("RemoveRoom calls = %d, want at least 4 (3 failures, then success)", n)
	}
}

func TestListingPrunesWhenRemovalIsBlocked(t *testing.T) {
	t.Parallel()
	const ttl, grace = time.Second, time.Second
	e := newEnv(t, settings{idleTTL: ttl, grace: grace})
	e.faults.failRemovals.Store(-1) // every removal fails: the Lobby never hears of the expiry
	created := time.Now()
	code, _ := e.createRoom()
	v := join(t, e.room, code, viewer, "v", "")
	if reason := v.ended(); reason != "expired" {
		t.Fatalf("viewer's stream ended with reason %q, want expired", reason)
	}
	wait.Until(t, "listing prunes the room", func() bool { return !e.listed(code) })
	if at := time.Since(created); at < ttl+grace-50*time.Millisecond {
		t.Fatalf("room pruned %v after its last activity, before TTL+grace (%v)", at, ttl+grace)
	}
	if e.lobbyRoom(code) != nil {
		t.Fatal("GetRoom still finds the pruned room")
	}
}
