package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

// TestPracticeState: a sync's rate and count-in, the loop and the marks' formations are stored
// with the room and read by every joiner; what the room's state refuses (a loop past the
// video's end, a mark formation without a mark, a mark past the limit) changes nothing, not even
// the session's last ref; a switch to another video drops the loop, the marks and their
// formations.
func TestPracticeState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const code = "practice-room"
	now := time.UnixMilli(1_800_000_000_000)
	s := openRoom(t, code, time.Hour, now, 60_000)
	lease := now.Add(time.Minute)
	join := func() State {
		t.Helper()
		j, err := s.Join(ctx, code, Session{ID: "v1", Role: domain.Viewer, ClientID: "phone", Attachment: "a1", Name: "Phone"}, now, lease)
		if err != nil {
			t.Fatal(err)
		}
		return j.State
	}
	if st := join(); st.RateCenti != 100 || st.Loop.Set() || st.CountIn != (domain.CountIn{}) || len(st.MarkFormations) != 0 {
		t.Fatalf("fresh room = %+v, want rate 100, no loop, no count-in, no mark formations", st)
	}
	if _, err := s.Join(ctx, code, Session{ID: "l1", Role: domain.Leader, ClientID: "lead", Attachment: "b1", Name: "Lead"}, now, lease); err != nil {
		t.Fatal(err)
	}
	ref := int64(0)
	act := func(kind string, args ...any) (bool, error) {
		ref++
		return s.Act(ctx, code, Action{Kind: kind, Frame: []byte(kind), Session: "l1", Ref: ref, Args: args}, now)
	}
	mustAct := func(kind string, args ...any) {
		t.Helper()
		if applied, err := act(kind, args...); err != nil || !applied {
			t.Fatalf("Act(%s %v) = %v, %v; want applied", kind, args, applied, err)
		}
	}
	refused := func(kind, want string, args ...any) {
		t.Helper()
		before := join().Version
		_, err := act(kind, args...)
		var r *domain.ActRefusal
		if !errors.As(err, &r) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Act(%s %v) = %v, want a refusal saying %q", kind, args, err, want)
		}
		// Nothing applied: no version, and the same ref is still free to apply.
		if after := join().Version; after != before {
			t.Fatalf("refused %s moved the version %d -> %d", kind, before, after)
		}
		ref--
	}

	mustAct("sync", 1, 12_000, 75, 4, 120)
	mustAct("loop", int64(10_000), int64(20_000))
	mustAct("mark", []byte("m1"), int64(10_000), int64(domain.MaxMarks))
	mustAct("markFormation", int64(10_000), `{"dancers":[]}`)
	refused("loop", "ends at 1:01.0 but the video is 1:00.0 long", int64(0), int64(61_000))
	refused("markFormation", "no mark at 0:11.0", int64(11_000), `{"dancers":[]}`)
	st := join()
	if st.RateCenti != 75 || st.CountIn != (domain.CountIn{Beats: 4, BPM: 120}) || st.Loop != (domain.Loop{StartMs: 10_000, EndMs: 20_000}) ||
		st.MarkFormations[10_000] != `{"dancers":[]}` || len(st.Marks) != 1 {
		t.Fatalf("state = %+v, want rate 75, count-in 4 at 120, loop 10-20 s, the mark's formation", st)
	}

	// A plain sync ends the count-in and keeps its own rate; a cleared mark formation is gone.
	mustAct("sync", 0, 15_000, 150, 0, 0)
	mustAct("markFormation", int64(10_000), "")
	mustAct("loop", int64(0), int64(0))
	if st := join(); st.RateCenti != 150 || st.CountIn != (domain.CountIn{}) || st.Loop.Set() || len(st.MarkFormations) != 0 {
		t.Fatalf("state = %+v, want rate 150, no count-in, no loop, no mark formations", st)
	}

	// The marks limit: the last one past it is refused with the count.
	for i := 1; i < domain.MaxMarks; i++ {
		mustAct("mark", []byte(fmt.Sprintf("m%d", i)), int64(i), int64(domain.MaxMarks))
	}
	refused("mark", "at most 200 marks", []byte("one more"), int64(50_000), int64(domain.MaxMarks))
	if st := join(); len(st.Marks) != domain.MaxMarks {
		t.Fatalf("marks = %d, want %d", len(st.Marks), domain.MaxMarks)
	}

	mustAct("loop", int64(1_000), int64(2_000))
	mustAct("markFormation", int64(1), `{"dancers":[]}`)
	mustAct("reload", 1, "other", int64(30_000))
	if st := join(); st.Loop.Set() || len(st.Marks) != 0 || len(st.MarkFormations) != 0 || st.DurationMs != 30_000 || st.RateCenti != 150 {
		t.Fatalf("after a switch = %+v, want no loop, no marks, no formations, the new length, the rate kept", st)
	}
	refused("markFormation", "no mark at 0:00.0", int64(1), `{"dancers":[]}`)
}
