package service_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func hello(code string, role roomv1.Role, clientID, token, session string) *roomv1.Hello {
	return &roomv1.Hello{Code: code, Role: role, ClientId: clientID, LeaderToken: token, SessionId: session}
}

func mustHello(t *testing.T, c roomv1.RoomServiceClient, h *roomv1.Hello) *member {
	t.Helper()
	m, err := tryHello(t, c, h)
	if err != nil {
		t.Fatalf("hello %v: %v", h, err)
	}
	return m
}

func markFrame(ref, pos int64, label string) *roomv1.JoinRequest {
	return &roomv1.JoinRequest{Ref: ref, Frame: &roomv1.JoinRequest_Mark{Mark: &roomv1.Mark{PositionMs: pos, Label: label}}}
}

// TestSessionsSurviveARestart: a replica's graceful stop ends its streams with UNAVAILABLE and
// leaves their sessions open; re-attached on a new replica under the same session ids they are
// not counted again, and the Lobby never hears anything but the same occupancy.
func TestSessionsSurviveARestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	r1 := e.startReplica()
	lh := hello(code, leader, "lead", token, "lead-session-1")
	vh := hello(code, viewer, "phone-1", "", "viewer-session-1")
	l := mustHello(t, r1.client, lh)
	v := mustHello(t, r1.client, vh)
	if l.state.GetResumed() || v.state.GetResumed() {
		t.Fatal("a first hello is reported as a re-attach")
	}
	wait.Until(t, "the lobby shows 1 viewer and the leader", viewers(e, code, 1, true))
	before := len(e.faults.sent(code))

	r1.stop()
	for _, m := range []*member{l, v} {
		if err := m.streamErr(); status.Code(err) != codes.Unavailable {
			t.Fatalf("stream of a stopped replica ended with %v, want UNAVAILABLE", err)
		}
	}
	r2 := e.startReplica()
	v2 := mustHello(t, r2.client, vh)
	l2 := mustHello(t, r2.client, lh)
	if !v2.state.GetResumed() || !l2.state.GetResumed() {
		t.Fatalf("re-attach resumed = %v (viewer), %v (leader); want true", v2.state.GetResumed(), l2.state.GetResumed())
	}
	if got := l2.state.GetViewers(); got != 1 || !l2.state.GetLeaderPresent() {
		t.Fatalf("state after re-attach = %d viewers, leader %v; want 1, true", got, l2.state.GetLeaderPresent())
	}
	if r := e.lobbyRoom(code); r.GetViewers() != 1 || !r.GetLeaderPresent() {
		t.Fatalf("lobby after re-attach = %d viewers, leader %v; want 1, true", r.GetViewers(), r.GetLeaderPresent())
	}
	for _, c := range e.faults.sent(code)[before:] {
		if !strings.HasPrefix(c, "snapshot") || !strings.HasSuffix(c, " 1 1") {
			t.Fatalf("the lobby was sent %q across the restart; want only snapshots of 1 viewer and the leader", c)
		}
	}

	// The re-attached leader drives the re-attached viewer.
	l2.send(syncFrame(true, 7_000))
	v2.await("sync after re-attach", func(f *roomv1.JoinResponse) bool { return f.GetSync().GetPositionMs() == 7_000 })
	// Leaving after the re-attach is counted.
	v2.leave()
	wait.Until(t, "the lobby shows the viewer left", viewers(e, code, 0, true))
}

// TestReattachOnAnotherReplica: a session re-attached on a second replica while its old stream
// is still open there is not closed when the old stream ends later, and the new replica keeps
// its lease renewed.
func TestReattachOnAnotherReplica(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{lease: 900 * time.Millisecond}) // several renewals within the test
	code, _ := e.createRoom()
	r1, r2 := e.startReplica(), e.startReplica()
	vh := hello(code, viewer, "tablet", "", "tablet-session")
	old := mustHello(t, r1.client, vh)
	wait.Until(t, "the lobby shows 1 viewer", viewers(e, code, 1, false))
	moved := mustHello(t, r2.client, vh)
	if !moved.state.GetResumed() || moved.state.GetViewers() != 1 {
		t.Fatalf("re-attach on a second replica: resumed %v, %d viewers; want true, 1", moved.state.GetResumed(), moved.state.GetViewers())
	}
	old.leave()
	if err := old.streamErr(); status.Code(err) != codes.Canceled {
		t.Fatalf("old stream ended with %v, want CANCELED", err)
	}
	wait.Until(t, "the old stream's handler finished", func() bool {
		return len(e.logs.Containing(`"grpc.method":"Join"`, `"grpc.code":"Canceled"`)) >= 1
	})
	// Several lease periods later the session still counts: the second replica renews it.
	snaps := e.faults.snapshots.Load()
	wait.Until(t, "three renewal rounds", func() bool { return e.faults.snapshots.Load() >= snaps+3 })
	other := join(t, e.room, code, viewer, "laptop", "")
	if got := other.state.GetViewers(); got != 2 {
		t.Fatalf("viewers after the old stream ended and three renewals = %d, want 2 (tablet and laptop)", got)
	}
	if r := e.lobbyRoom(code); r.GetViewers() < 1 {
		t.Fatalf("lobby viewers = %d; the re-attached session stopped counting", r.GetViewers())
	}
}

// TestLeaseEndsADetachedSession: a session left open by a stopping replica that nobody
// re-attaches (its gateway died too) ends when its lease runs out.
func TestLeaseEndsADetachedSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{lease: time.Second})
	code, _ := e.createRoom()
	r1 := e.startReplica()
	v := mustHello(t, r1.client, hello(code, viewer, "gone", "", "gone-session"))
	join(t, e.room, code, viewer, "stays", "")
	wait.Until(t, "the lobby shows 2 viewers", viewers(e, code, 2, false))
	r1.stop()
	if err := v.streamErr(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream of a stopped replica ended with %v, want UNAVAILABLE", err)
	}
	// The surviving replica's alarm sweeps the session at its lease end.
	wait.Until(t, "the lobby shows only the viewer on the surviving replica", viewers(e, code, 1, false))
}

func TestSessionIDOfAnotherClientIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	mustHello(t, e.room, hello(code, viewer, "first", "", "shared-id"))
	for _, h := range []*roomv1.Hello{
		hello(code, viewer, "second", "", "shared-id"),
		hello(code, leader, "first", token, "shared-id"),
		hello(code, viewer, "first", "", "bad id!"),
		hello(code, viewer, "first", "", strings.Repeat("x", 65)),
	} {
		if _, err := tryHello(t, e.room, h); status.Code(err) != codes.InvalidArgument {
			t.Errorf("hello %v = %v, want INVALID_ARGUMENT", h, err)
		}
	}
}

// TestControlRefs: a control with a ref is answered by an Ack (or an Error with the ref); re-sent
// after a re-attach it is acknowledged as a repeat and not applied twice.
func TestControlRefs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	r1 := e.startReplica()
	lh := hello(code, leader, "lead", token, "lead-s")
	l := mustHello(t, r1.client, lh)
	v := mustHello(t, r1.client, hello(code, viewer, "v", "", "viewer-s"))
	l.send(markFrame(1, 1000, "intro"))
	ack := l.await("ack 1", func(f *roomv1.JoinResponse) bool { return f.GetAck().GetRef() == 1 }).GetAck()
	if ack.GetRepeat() {
		t.Fatal("the first mark is acknowledged as a repeat")
	}
	l.send(markFrame(2, -5, "bad"))
	if msg := l.await("error 2", func(f *roomv1.JoinResponse) bool { return f.GetError().GetRef() == 2 }).GetError().GetMessage(); !strings.Contains(msg, "positionMs") {
		t.Fatalf("refusal of a bad mark = %q, want the positionMs sentence", msg)
	}
	v.send(markFrame(9, 1000, "viewer"))
	v.await("the viewer's refusal", func(f *roomv1.JoinResponse) bool { return f.GetError().GetRef() == 9 })
	for _, ref := range []int64{-1, 1 << 53} {
		l.send(&roomv1.JoinRequest{Ref: ref, Frame: &roomv1.JoinRequest_Mark{Mark: &roomv1.Mark{PositionMs: 1}}})
		l.await("a refused ref beyond the safe integers", func(f *roomv1.JoinResponse) bool {
			return f.GetError().GetRef() == ref && f.GetError().GetMessage() == "ref must be an integer from 0 through 9007199254740991."
		})
	}
	l.send(&roomv1.JoinRequest{Ref: 4, Frame: &roomv1.JoinRequest_Sync{Sync: &roomv1.Sync{PositionMs: 1 << 53}}})
	l.await("a refused position beyond the safe integers", func(f *roomv1.JoinResponse) bool {
		return f.GetError().GetRef() == 4 && f.GetError().GetMessage() == "positionMs must be an integer from 0 through 86400000."
	})

	r1.stop()
	l.streamErr()
	r2 := e.startReplica()
	l2 := mustHello(t, r2.client, lh)
	l2.send(markFrame(1, 1000, "intro")) // its answer was "lost": the gateway re-sends it
	if !l2.await("ack of the repeat", func(f *roomv1.JoinResponse) bool { return f.GetAck().GetRef() == 1 }).GetAck().GetRepeat() {
		t.Fatal("a re-sent control is not acknowledged as a repeat")
	}
	l2.send(markFrame(3, 2000, "chorus"))
	l2.await("ack 3", func(f *roomv1.JoinResponse) bool { return f.GetAck().GetRef() == 3 })
	late := join(t, r2.client, code, viewer, "late", "")
	if marks := late.state.GetMarks(); len(marks) != 2 || marks[0].GetLabel() != "intro" || marks[1].GetLabel() != "chorus" {
		t.Fatalf("marks = %v, want intro once, then chorus", marks)
	}
}

// TestNormalLeaveIsNotAnError: streams a client ends (cancelled, or closed from its side) end
// as CANCELED or OK, and nothing is logged at ERROR.
func TestNormalLeaveIsNotAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, l, v1, v2 := e.leaderAndTwoViewers()
	l.send(syncFrame(true, 1000))
	v1.await("sync", func(f *roomv1.JoinResponse) bool { return f.GetSync() != nil })
	v1.leave()
	if err := v2.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := v2.streamErr(); err.Error() != "EOF" {
		t.Fatalf("a stream closed from the client's side ended with %v, want a clean end", err)
	}
	l.leave()
	wait.Until(t, "three Join calls finished", func() bool { return len(e.logs.Containing(`"grpc.method":"Join"`)) >= 3 })
	wait.Until(t, "the lobby shows nobody", viewers(e, code, 0, false))
	if errs := logged(e.logs, "ERROR"); len(errs) > 0 {
		t.Fatalf("normal leaves logged %d ERROR lines, want none; first: %s", len(errs), errs[0])
	}
}

// TestControlsAcrossARestartApplyOnce: a leader streams marks while its replica stops; every
// mark the old stream answered is applied, and re-sending every unanswered one after the
// re-attach applies each mark exactly once, in order: none is lost, none is doubled.
func TestControlsAcrossARestartApplyOnce(t *testing.T) {
	t.Parallel()
	const n = 150
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	r1 := e.startReplica()
	lh := hello(code, leader, "lead", token, "lead-stream")
	l := mustHello(t, r1.client, lh)
	sent := make(chan int64, n)
	go func() {
		defer close(sent)
		for ref := int64(1); ref <= n; ref++ {
			if l.stream.Send(markFrame(ref, ref, fmt.Sprintf("m%d", ref))) != nil {
				return
			}
			sent <- ref
		}
	}()
	l.await("an early ack", func(f *roomv1.JoinResponse) bool { return f.GetAck().GetRef() >= 20 })
	r1.stop()
	l.streamErr()
	for range sent { // the sender has stopped
	}
	answered := map[int64]bool{}
	l.mu.Lock()
	for _, f := range l.frames {
		if a := f.GetAck(); a != nil {
			answered[a.GetRef()] = true
		}
		if e := f.GetError(); e != nil && e.GetRef() != 0 {
			t.Errorf("mark %d refused: %s", e.GetRef(), e.GetMessage())
		}
	}
	l.mu.Unlock()

	r2 := e.startReplica()
	l2 := mustHello(t, r2.client, lh)
	resent := 0
	for ref := int64(1); ref <= n; ref++ {
		if !answered[ref] {
			l2.send(markFrame(ref, ref, fmt.Sprintf("m%d", ref)))
			resent++
		}
	}
	l2.await("the last answer", func(f *roomv1.JoinResponse) bool { return f.GetAck().GetRef() == n })
	t.Logf("%d marks answered before the stop, %d re-sent after the re-attach", len(answered), resent)
	marks := join(t, r2.client, code, viewer, "late", "").state.GetMarks()
	if len(marks) != n {
		t.Fatalf("%d marks stored, want %d (each once)", len(marks), n)
	}
	for i, m := range marks {
		if want := fmt.Sprintf("m%d", i+1); m.GetLabel() != want {
			t.Fatalf("mark %d is %q, want %q: a mark was lost, doubled or reordered", i, m.GetLabel(), want)
		}
	}
}
