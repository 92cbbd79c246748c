package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
)

// TestPollReadsTheChangesAfterACursor polls an unchanged lobby (the version, no codes), then
// one after a touch and an occupancy change (each code once, the cursor moved to the last
// change), and one from a cursor the log cannot continue (incomplete: reload everything).
func TestPollReadsTheChangesAfterACursor(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	s, err := New(rdb, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.UnixMilli(1_800_000_000_000)
	var codes []string
	for _, c := range []string{"abc234", "bcd345", "cde456"} {
		if err := s.Create(ctx, domain.Room{Code: c, Name: "Room " + c, CreatedAt: now.UnixMilli(), Video: domain.Video{Title: "t", DurationMs: 1000}}, "hash"); err != nil {
			t.Fatal(err)
		}
		codes = append(codes, c)
	}
	_, cur, _, err := s.List(ctx, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if cur.Version != 3 {
		t.Fatalf("List cursor = %+v, want version 3", cur)
	}
	p, err := s.Poll(ctx, cur, now.Add(-time.Hour))
	if err != nil || p.Version != 3 || len(p.Codes) != 0 || !p.Complete || p.Next != cur || p.From != cur {
		t.Fatalf("Poll(unchanged) = %+v, %v; want version 3, no codes, complete, the same cursor", p, err)
	}
	if err := s.Touch(ctx, codes[1], now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyDelta(ctx, codes[1], 1, 2, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyDelta(ctx, codes[2], 1, 1, 0); err != nil {
		t.Fatal(err)
	}
	p, err = s.Poll(ctx, cur, now.Add(-time.Hour))
	if err != nil || p.Version != 6 || !slices.Equal(p.Codes, []string{codes[1], codes[2]}) || !p.Complete || p.Next.Version != 6 {
		t.Fatalf("Poll(after 3 changes) = %+v, %v; want version 6, codes %v once each, complete, next at version 6", p, err, codes[1:])
	}
	if len(p.Rooms) != 2 || p.Rooms[0].Code != codes[1] || p.Rooms[0].Viewers != 2 || !p.Rooms[0].LeaderPresent ||
		p.Rooms[0].LastActivity != now.Add(time.Second).UnixMilli() || p.Rooms[0].Name != "Room "+codes[1] || p.Rooms[1].Viewers != 1 {
		t.Fatalf("Poll(after 3 changes).Rooms = %+v; want %s (2 viewers, a leader, touched) and %s (1 viewer) as they are now", p.Rooms, codes[1], codes[2])
	}
	// A room removed and one idle past the cutoff are named as changed but not read.
	if _, err := s.Remove(ctx, codes[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Touch(ctx, codes[0], now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Poll(ctx, cur, now.Add(2*time.Second)); err != nil || !slices.Equal(p.Codes, []string{codes[1], codes[2], codes[0]}) || len(p.Rooms) != 0 {
		t.Fatalf("Poll(a removed room, the rest idle past the cutoff) = %+v, %v; want codes %v and no rooms", p, err, []string{codes[1], codes[2], codes[0]})
	}
	if again, err := s.Poll(ctx, p.Next, now.Add(-time.Hour)); err != nil || len(again.Codes) != 2 || again.Next.Version != 8 {
		t.Fatalf("Poll(from the end of the first three) = %+v, %v; want the removal and the touch after it", again, err)
	}
	// A cursor whose next change is not in the log (a gap): the log cannot say what changed.
	gap := Cursor{ID: cur.ID, Version: cur.Version - 1}
	if p, err := s.Poll(ctx, gap, now.Add(-time.Hour)); err != nil || p.Complete {
		t.Fatalf("Poll(a cursor before a gap) = %+v, %v; want incomplete", p, err)
	}
}
