package service_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// attachStream is a test's RoomService.Attach stream; a goroutine reads its responses.
type attachStream struct {
	s         roomv1.RoomService_AttachClient
	cancel    context.CancelFunc
	streamEnd // mu also guards got
	got       []*roomv1.AttachResponse
}

func openAttach(t *testing.T, c roomv1.RoomServiceClient) *attachStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.Attach(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := &attachStream{streamEnd: streamEnd{t: t}, s: s, cancel: cancel}
	go func() {
		for {
			resp, err := s.Recv()
			a.mu.Lock()
			if err != nil {
				a.err = err
				a.mu.Unlock()
				return
			}
			a.got = append(a.got, resp)
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *attachStream) send(req *roomv1.AttachRequest) {
	a.t.Helper()
	if err := a.s.Send(req); err != nil {
		a.t.Fatalf("send %v: %v", req, err)
	}
}

func (a *attachStream) hello(h *roomv1.Hello) {
	a.send(&roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Hello{Hello: h}})
}

// await waits for a response that matches and returns it.
func (a *attachStream) await(what string, match func(*roomv1.AttachResponse) bool) *roomv1.AttachResponse {
	a.t.Helper()
	var found *roomv1.AttachResponse
	wait.Until(a.t, what, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, r := range a.got {
			if match(r) {
				found = r
				return true
			}
		}
		if a.err != nil {
			a.t.Fatalf("stream ended (%v) while waiting for %s", a.err, what)
		}
		return false
	})
	return found
}

// count is how many responses so far match.
func (a *attachStream) count(match func(*roomv1.AttachResponse) bool) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.got {
		if match(r) {
			n++
		}
	}
	return n
}

func (a *attachStream) state(session string) *roomv1.AttachResponse {
	a.t.Helper()
	return a.await("the State of "+session, func(r *roomv1.AttachResponse) bool {
		return r.GetSessionId() == session && r.GetFrame().GetState() != nil
	})
}

// TestAttachCarriesManySessions: one Attach stream carries a leader and three viewers of one
// room; each State, Ack and refusal carries its session id; the leader's relayed frame arrives
// ONCE on the stream (not once per viewer) with a version above the States'; a detach is a
// counted leave; a refused hello leaves the stream and its other sessions alone.
func TestAttachCarriesManySessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	r := e.startReplica()
	a := openAttach(t, r.client)
	a.hello(hello(code, leader, "lead", token, "s-lead"))
	a.hello(hello(code, viewer, "v1", "", "s-v1"))
	a.hello(hello(code, viewer, "v2", "", "s-v2"))
	a.hello(hello(code, viewer, "v3", "", "s-v3"))
	var top int64
	for _, id := range []string{"s-lead", "s-v1", "s-v2", "s-v3"} {
		top = max(top, a.state(id).GetVersion())
	}
	wait.Until(t, "the lobby shows 3 viewers and the leader", viewers(e, code, 3, true))

	a.send(&roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Control{Control: &roomv1.SessionControl{
		SessionId: "s-lead", Request: markFrame(1, 1234, "once"),
	}}})
	a.await("the leader's Ack", func(r *roomv1.AttachResponse) bool {
		return r.GetSessionId() == "s-lead" && r.GetFrame().GetAck().GetRef() == 1
	})
	isMark := func(r *roomv1.AttachResponse) bool { return r.GetFrame().GetMark().GetLabel() == "once" }
	m := a.await("the relayed mark", isMark)
	if m.GetSessionId() != "" || m.GetVersion() <= top {
		t.Fatalf("relayed mark = session %q version %d; want no session and a version above %d", m.GetSessionId(), m.GetVersion(), top)
	}

	// A viewer's control is refused with its session id; a wrong token refuses only that hello.
	a.send(&roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Control{Control: &roomv1.SessionControl{
		SessionId: "s-v1", Request: markFrame(1, 1, "no"),
	}}})
	a.await("the viewer's control refused", func(r *roomv1.AttachResponse) bool {
		return r.GetSessionId() == "s-v1" && r.GetFrame().GetError().GetRef() == 1
	})
	a.hello(hello(code, leader, "lead2", "wrong-token", "s-bad"))
	end := a.await("the bad hello's end", func(r *roomv1.AttachResponse) bool { return r.GetSessionId() == "s-bad" && r.GetEnd() != nil })
	if codes.Code(end.GetEnd().GetCode()) != codes.Unauthenticated {
		t.Fatalf("a wrong token's end = %v, want UNAUTHENTICATED", end.GetEnd())
	}

	// A detach is a leave, counted.
	a.send(&roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Detach{Detach: "s-v3"}})
	done := a.await("the detach's answer", func(r *roomv1.AttachResponse) bool { return r.GetSessionId() == "s-v3" && r.GetEnd() != nil })
	if c := codes.Code(done.GetEnd().GetCode()); c != codes.OK {
		t.Fatalf("a detach was answered with %v, want OK", c)
	}
	// The answer comes once the leave is stored; its delta reaches the Lobby after (the outbox
	// is asynchronous), so the Lobby is waited for, not read at once.
	wait.Until(t, "the lobby shows the detached viewer gone", viewers(e, code, 2, true))
	leaveOccupancy := func(r *roomv1.AttachResponse) bool {
		return r.GetFrame().GetOccupancy().GetViewers() == 2 && r.GetVersion() > m.GetVersion()
	}
	a.await("the leave's occupancy", leaveOccupancy)
	if n := a.count(isMark); n != 1 {
		t.Fatalf("the relayed mark arrived %d times on the stream, want once", n)
	}
	if n := a.count(leaveOccupancy); n != 1 {
		t.Fatalf("the occupancy change arrived %d times on the stream, want once", n)
	}

	// The client ending the stream closes every session on it.
	if err := a.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, "the lobby shows the room empty", viewers(e, code, 0, false))
}

// TestAttachSurvivesARestart: a stopping replica ends an Attach stream with UNAVAILABLE and
// keeps its sessions; a new stream on another replica re-attaches them all under the same ids
// (resumed, not counted again: the Lobby hears only snapshots of the same count), and a leader
// control re-sent with a ref already applied is a repeat.
func TestAttachSurvivesARestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	r1 := e.startReplica()
	hellos := []*roomv1.Hello{
		hello(code, leader, "lead", token, "s-lead"),
		hello(code, viewer, "v1", "", "s-v1"),
		hello(code, viewer, "v2", "", "s-v2"),
	}
	a := openAttach(t, r1.client)
	for _, h := range hellos {
		a.hello(h)
	}
	for _, h := range hellos {
		a.state(h.GetSessionId())
	}
	ctl := &roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Control{Control: &roomv1.SessionControl{
		SessionId: "s-lead", Request: markFrame(1, 500, "before"),
	}}}
	a.send(ctl)
	a.await("the mark's Ack", func(r *roomv1.AttachResponse) bool { return r.GetFrame().GetAck().GetRef() == 1 })
	wait.Until(t, "the lobby shows 2 viewers and the leader", viewers(e, code, 2, true))

	// The mark is taken once the stopped replica's outbox has drained: joins finishing together
	// can queue their deltas out of order, and the Lobby's list then shows the count through
	// the snapshot that heals the gap while the older delta is still on its way.
	r1.stop()
	before := len(e.faults.sent(code))
	if err := a.streamErr(); !strings.Contains(err.Error(), "Unavailable") {
		t.Fatalf("stream of a stopped replica ended with %v, want UNAVAILABLE", err)
	}
	r2 := e.startReplica()
	b := openAttach(t, r2.client)
	for _, h := range hellos {
		b.hello(h)
	}
	for _, h := range hellos {
		if st := b.state(h.GetSessionId()).GetFrame().GetState(); !st.GetResumed() || st.GetViewers() != 2 {
			t.Fatalf("re-attached state of %s = resumed %v, %d viewers; want resumed, 2", h.GetSessionId(), st.GetResumed(), st.GetViewers())
		}
	}
	b.send(ctl)
	ack := b.await("the re-sent mark's Ack", func(r *roomv1.AttachResponse) bool { return r.GetFrame().GetAck().GetRef() == 1 })
	if !ack.GetFrame().GetAck().GetRepeat() {
		t.Fatal("a control re-sent after the re-attach was applied again")
	}
	for _, c := range e.faults.sent(code)[before:] {
		if !strings.HasPrefix(c, "snapshot") || !strings.HasSuffix(c, " 2 1") {
			t.Fatalf("the lobby was sent %q across the restart; want only snapshots of 2 viewers and the leader", c)
		}
	}
	b.send(&roomv1.AttachRequest{Frame: &roomv1.AttachRequest_Detach{Detach: "s-v2"}})
	wait.Until(t, "the lobby counts the viewer who left", viewers(e, code, 1, true))
	b.cancel()
	wait.Until(t, "the lobby shows the room empty", viewers(e, code, 0, false))
}
