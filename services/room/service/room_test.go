package service_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
)

const (
	leader = roomv1.Role_ROLE_LEADER
	viewer = roomv1.Role_ROLE_VIEWER
)

func TestLeaderTokenIsChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	_, other := e.createRoom()
	for _, tok := range []string{"", "not-the-token", other} {
		if _, err := tryJoin(t, e.room, code, leader, "lead", tok); status.Code(err) != codes.Unauthenticated {
			t.Errorf("join as leader with token %q = %v, want Unauthenticated", tok, err)
		}
	}
	if _, err := tryJoin(t, e.room, "nosuch", viewer, "v", ""); status.Code(err) != codes.NotFound {
		t.Errorf("join a missing room = %v, want NotFound", err)
	}
	if _, err := tryJoin(t, e.room, code, viewer, "", ""); status.Code(err) != codes.InvalidArgument {
		t.Errorf("join without a client id = %v, want InvalidArgument", err)
	}
	join(t, e.room, code, leader, "lead", token)
}

func TestSyncReachesEveryViewerAndLateJoinerGetsState(t *testing.T) {
	t.Parallel()
	// The service stamps a sync with its own clock. That clock is set to Redis's TIME and agrees
	// with this process's only within its error, so the test drives it instead.
	e := newEnv(t, settings{fakeClock: true})
	code, token := e.createRoom()
	l := join(t, e.room, code, leader, "lead", token)
	if st := l.state; st.GetVideo().GetTitle() != "Routine" || st.GetPlayback().GetPlaying() {
		t.Fatalf("leader's state = %v, want the video and a paused player", st)
	}
	v1 := join(t, e.room, code, viewer, "v1", "")
	v2 := join(t, e.room, code, viewer, "v2", "")
	e.clk.Add(1500 * time.Millisecond)
	now := e.clk.Now().UnixMilli()
	l.send(syncFrame(true, 42_000))
	for _, v := range []*member{v1, v2} {
		f := v.await("sync", func(f *roomv1.JoinResponse) bool { return f.GetSync() != nil })
		if s := f.GetSync(); !s.GetPlaying() || s.GetPositionMs() != 42_000 || s.GetAt() != now {
			t.Fatalf("viewer got sync %v, want playing at 42000 stamped %d (the service's clock when it was sent)", s, now)
		}
	}
	// A viewer's control frame is refused with an error frame; the stream stays open.
	v1.send(syncFrame(false, 0))
	v1.await("error frame", func(f *roomv1.JoinResponse) bool { return f.GetError() != nil })
	late := join(t, e.room, code, viewer, "late", "")
	if p := late.state.GetPlayback(); !p.GetPlaying() || p.GetPositionMs() != 42_000 {
		t.Fatalf("late joiner's playback = %v, want playing at 42000", p)
	}
	if late.state.GetViewers() != 3 || !late.state.GetLeaderPresent() {
		t.Fatalf("late joiner's occupancy = %d viewers, leader %v; want 3, true", late.state.GetViewers(), late.state.GetLeaderPresent())
	}
	// The viewer's refused sync changed nothing.
	l.send(&roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Mark{Mark: &roomv1.Mark{PositionMs: 1000, Label: "chorus"}}})
	late.await("mark", func(f *roomv1.JoinResponse) bool { return f.GetMark().GetLabel() == "chorus" })
	again := join(t, e.room, code, viewer, "again", "")
	if m := again.state.GetMarks(); len(m) != 1 || m[0].GetLabel() != "chorus" {
		t.Fatalf("state marks = %v, want the chorus mark", m)
	}
}

func TestOccupancyReachesLobbyAndRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, l, v1, v2 := e.leaderAndTwoViewers()
	wait.Until(t, "lobby shows 2 viewers and the leader", viewers(e, code, 2, true))
	l.await("occupancy 2", func(f *roomv1.JoinResponse) bool { return f.GetOccupancy().GetViewers() == 2 })

	v2.leave()
	wait.Until(t, "lobby shows 1 viewer after one left", viewers(e, code, 1, true))
	v1.await("occupancy 1", func(f *roomv1.JoinResponse) bool {
		o := f.GetOccupancy()
		return o != nil && o.GetViewers() == 1
	})

	// The same client id on a second socket is the same viewer; so is its first leaving.
	v1b := join(t, e.room, code, viewer, "v1", "")
	if v1b.state.GetViewers() != 1 {
		t.Fatalf("state after a second socket of v1 = %d viewers, want 1", v1b.state.GetViewers())
	}
	v1.leave()
	wait.Until(t, "v1's second socket still counts", func() bool {
		r := e.lobbyRoom(code)
		return r.GetViewers() == 1
	})

	// The leader leaving changes presence, not the viewers.
	l.leave()
	wait.Until(t, "lobby shows no leader and still 1 viewer", viewers(e, code, 1, false))
	v1b.await("occupancy without leader", func(f *roomv1.JoinResponse) bool {
		o := f.GetOccupancy()
		return o != nil && !o.GetLeaderPresent() && o.GetViewers() == 1
	})
}

func TestDroppedDeltaIsHealedByResync(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{lease: time.Minute}) // no renewal snapshot during the test
	code, _ := e.createRoom()
	v1 := join(t, e.room, code, viewer, "v1", "")
	wait.Until(t, "lobby shows 1 viewer", viewers(e, code, 1, false))
	e.faults.dropDeltas.Store(1)
	join(t, e.room, code, viewer, "v2", "")
	wait.Until(t, "the delta was dropped", func() bool { return e.faults.dropped.Load() == 1 })
	if r := e.lobbyRoom(code); r.GetViewers() != 1 {
		t.Fatalf("lobby viewers after a dropped delta = %d, want the stale 1", r.GetViewers())
	}
	// The next delta has a gap: the Lobby asks for a resync and the room's snapshot is right
	// (applying the delta alone would show 2).
	join(t, e.room, code, viewer, "v3", "")
	wait.Until(t, "lobby heals to 3 viewers", viewers(e, code, 3, false))
	if n := e.faults.snapshots.Load(); n < 1 {
		t.Fatalf("snapshots sent = %d, want at least 1", n)
	}
	v1.leave()
	wait.Until(t, "lobby follows with 2 viewers", viewers(e, code, 2, false))
}

func TestEndRoomClosesEveryoneAndRemovesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	join(t, e.room, code, leader, "lead", token)
	v := join(t, e.room, code, viewer, "v", "")
	if _, err := e.room.EndRoom(context.Background(), &roomv1.EndRoomRequest{Code: code, LeaderToken: "wrong"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("EndRoom(wrong token) = %v, want Unauthenticated", err)
	}
	if _, err := e.room.EndRoom(context.Background(), &roomv1.EndRoomRequest{Code: code, LeaderToken: token}); err != nil {
		t.Fatalf("EndRoom = %v", err)
	}
	if reason := v.ended(); reason != "ended" {
		t.Fatalf("viewer's stream ended with reason %q, want ended", reason)
	}
	if e.listed(code) {
		t.Fatal("an ended room is still listed")
	}
	if _, err := tryJoin(t, e.room, code, viewer, "v", ""); status.Code(err) != codes.NotFound {
		t.Fatalf("join an ended room = %v, want NotFound", err)
	}
}

func TestEndRoomNeverJoined(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	if _, err := e.room.EndRoom(context.Background(), &roomv1.EndRoomRequest{Code: code, LeaderToken: token}); err != nil {
		t.Fatalf("EndRoom(never joined) = %v", err)
	}
	if e.listed(code) {
		t.Fatal("an ended room is still listed")
	}
	if _, err := tryJoin(t, e.room, code, viewer, "v", ""); status.Code(err) != codes.NotFound {
		t.Fatalf("join an ended room = %v, want NotFound", err)
	}
	if _, err := e.room.EndRoom(context.Background(), &roomv1.EndRoomRequest{Code: code, LeaderToken: token}); status.Code(err) != codes.NotFound {
		t.Fatalf("EndRoom twice = %v, want NotFound (the room is gone)", err)
	}
}
