package service_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
)

// TestPracticeToolsAreRoomState: the leader's rate, count-in, loop and a mark's formation reach
// the viewers, are acked once per ref (a re-sent ref is a repeat, not applied again), and are
// stored with the room: a viewer joining on a new replica after the first stopped gets them
// all. What the room refuses is answered with an Error carrying its ref and a sentence, and
// changes nothing.
func TestPracticeToolsAreRoomState(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom() // a 200 s video
	first := e.startReplica()
	l := join(t, first.client, code, leader, "lead", token)
	v := join(t, first.client, code, viewer, "v1", "")
	if p := v.state.GetPlayback(); p.GetRate() != 1 || p.GetCountIn() != nil || v.state.GetLoop() != nil {
		t.Fatalf("fresh room's playback = %v, loop %v; want rate 1, no count-in, no loop", p, v.state.GetLoop())
	}

	ann, err := structpb.NewValue(map[string]any{"grid": map[string]any{"cols": 8.0, "rows": 6.0}, "dancers": []any{map[string]any{"name": "Ann", "x": 1.0, "y": 1.0}}})
	if err != nil {
		t.Fatal(err)
	}
	frames := []*roomv1.JoinRequest{
		{Ref: 1, Frame: &roomv1.JoinRequest_Sync{Sync: &roomv1.Sync{Playing: true, PositionMs: 4000, Rate: 0.75, CountIn: &roomv1.CountIn{Beats: 4, Bpm: 120}}}},
		{Ref: 2, Frame: &roomv1.JoinRequest_Loop{Loop: &roomv1.Loop{StartMs: 4000, EndMs: 12000}}},
		{Ref: 3, Frame: &roomv1.JoinRequest_Mark{Mark: &roomv1.Mark{PositionMs: 4000, Label: "A"}}},
		{Ref: 4, Frame: &roomv1.JoinRequest_MarkFormation{MarkFormation: &roomv1.MarkFormation{PositionMs: 4000, Formation: ann}}},
	}
	var acks []*roomv1.Ack
	for _, f := range frames {
		l.send(f)
		acks = append(acks, l.await("ack", func(r *roomv1.JoinResponse) bool { return r.GetAck().GetRef() == f.GetRef() && !r.GetAck().GetRepeat() }).GetAck())
	}
	sync := v.await("sync", func(r *roomv1.JoinResponse) bool { return r.GetSync() != nil }).GetSync()
	if sync.GetRate() != 0.75 || sync.GetCountIn().GetBeats() != 4 || sync.GetCountIn().GetBpm() != 120 || sync.GetAt() == 0 {
		t.Errorf("relayed sync = %v, want rate 0.75, a 4-beat count-in at 120 BPM, stamped", sync)
	}
	// The leader is not sent its own sync: its ack carries the same stamp, so the leader's
	// page counts the count-in from the instant every viewer counts from.
	if acks[0].GetAt() != sync.GetAt() {
		t.Errorf("the sync's Ack at = %d, want the relayed sync's at %d", acks[0].GetAt(), sync.GetAt())
	}
	v.await("loop", func(r *roomv1.JoinResponse) bool { return r.GetLoop().GetEndMs() == 12000 })
	v.await("mark formation", func(r *roomv1.JoinResponse) bool {
		return r.GetMarkFormation().GetPositionMs() == 4000 && len(r.GetMarkFormation().GetFormation().GetStructValue().GetFields()["dancers"].GetListValue().GetValues()) == 1
	})

	// Refused: answered with the ref and a sentence; nothing applied.
	for _, tt := range []struct {
		req  *roomv1.JoinRequest
		want string
	}{
		{&roomv1.JoinRequest{Ref: 5, Frame: &roomv1.JoinRequest_Loop{Loop: &roomv1.Loop{StartMs: 0, EndMs: 201_000}}}, "A loop must lie within the video: it ends at 3:21.0 but the video is 3:20.0 long."},
		{&roomv1.JoinRequest{Ref: 5, Frame: &roomv1.JoinRequest_Loop{Loop: &roomv1.Loop{StartMs: 9000, EndMs: 9000}}}, "A loop must end after it starts"},
		{&roomv1.JoinRequest{Ref: 5, Frame: &roomv1.JoinRequest_MarkFormation{MarkFormation: &roomv1.MarkFormation{PositionMs: 5000, Formation: ann}}}, "There is no mark at 0:05.0"},
		{&roomv1.JoinRequest{Ref: 5, Frame: &roomv1.JoinRequest_Sync{Sync: &roomv1.Sync{Rate: 2.5}}}, "rate must be from 0.25 to 2"},
	} {
		l.send(tt.req)
		l.await("error "+tt.want, func(r *roomv1.JoinResponse) bool {
			return r.GetError().GetRef() == 5 && strings.Contains(r.GetError().GetMessage(), tt.want)
		})
		l.mu.Lock()
		l.frames = nil // the next refusal answers the same ref
		l.mu.Unlock()
	}
	// A re-sent ref is a repeat: acked, not applied again (the mark is not added twice).
	l.send(frames[2])
	repeat := l.await("repeat ack", func(r *roomv1.JoinResponse) bool { return r.GetAck().GetRef() == 3 && r.GetAck().GetRepeat() }).GetAck()
	if repeat.GetAt() != 0 {
		t.Errorf("a repeat's Ack at = %d, want 0 (nothing was applied)", repeat.GetAt())
	}

	// The replica stops; a viewer on another replica gets everything with the state.
	l.leave()
	v.leave()
	first.stop()
	second := e.startReplica()
	late := join(t, second.client, code, viewer, "late", "")
	p := late.state.GetPlayback()
	if !p.GetPlaying() || p.GetPositionMs() != 4000 || p.GetRate() != 0.75 || p.GetCountIn().GetBeats() != 4 || p.GetCountIn().GetBpm() != 120 {
		t.Errorf("late joiner's playback = %v, want playing from 4 s at 0.75x after a 4-beat count-in", p)
	}
	if lp := late.state.GetLoop(); lp.GetStartMs() != 4000 || lp.GetEndMs() != 12000 {
		t.Errorf("late joiner's loop = %v, want 4-12 s", lp)
	}
	marks := late.state.GetMarks()
	if len(marks) != 1 || marks[0].GetFormation().GetStructValue().GetFields()["dancers"].GetListValue().GetValues()[0].GetStructValue().GetFields()["name"].GetStringValue() != "Ann" {
		t.Errorf("late joiner's marks = %v, want one mark with Ann's formation", marks)
	}
}
