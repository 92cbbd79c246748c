package hub

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

// memFeed is a Feed in memory: it records subscriptions; the test delivers events itself.
type memFeed struct {
	mu   sync.Mutex
	subs map[string]bool
}

func (f *memFeed) Subscribe(_ context.Context, code string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[code] = true
	return nil
}

func (f *memFeed) Unsubscribe(_ context.Context, code string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, code)
	return nil
}

func (f *memFeed) Run(ctx context.Context, _ func(string, Event)) error { <-ctx.Done(); return nil }

func (f *memFeed) subscribed(code string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subs[code]
}

func newHub(t *testing.T) (*Hub, *memFeed) {
	t.Helper()
	f := &memFeed{subs: map[string]bool{}}
	return New(f, 2, func(b []byte) (any, error) { return b, nil }, slog.New(slog.NewTextHandler(io.Discard, nil))), f
}

// TestReattachOnTheSameReplica: two streams of one session are held apart by their attachment;
// Supersede ends the older, removing it leaves the newer, and renewal lists the id once.
func TestReattachOnTheSameReplica(t *testing.T) {
	h, feed := newHub(t)
	ctx := context.Background()
	old, err := h.Add(ctx, "s1", "a1", "room-1", domain.Viewer, "phone")
	if err != nil {
		t.Fatal(err)
	}
	old.SetCounted(true)
	cur, err := h.Add(ctx, "s1", "a2", "room-1", domain.Viewer, "phone")
	if err != nil {
		t.Fatal(err)
	}
	cur.SetCounted(true)
	h.Supersede(cur)
	select {
	case <-old.Done():
		if old.Reason() != Replaced {
			t.Fatalf("old stream ended with %q, want Replaced", old.Reason())
		}
	default:
		t.Fatal("the older stream of a re-attached session is still open")
	}
	if got := h.Sessions()["room-1"]; !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("sessions to renew = %v, want [s1] once", got)
	}
	h.Remove(old)
	if !feed.subscribed("room-1") {
		t.Fatal("removing the replaced stream unsubscribed the room its new stream is in")
	}
	h.Deliver("room-1", Event{Version: 1, Kind: Occupancy, Viewers: 1})
	if ev := <-cur.Events; ev.Viewers != 1 {
		t.Fatalf("new stream got %+v, want the occupancy event", ev)
	}
	h.KillSessions("room-1", []string{"s1"}, "lapsed")
	<-cur.Done()
	h.Remove(cur)
	if feed.subscribed("room-1") {
		t.Fatal("the room is still subscribed after its last session left")
	}
}

// TestSlowSessionIsCut: a session whose buffer is full is ended, not waited for.
func TestSlowSessionIsCut(t *testing.T) {
	h, _ := newHub(t)
	s, err := h.Add(context.Background(), "s1", "a1", "room-2", domain.Viewer, "v")
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 3; v++ {
		h.Deliver("room-2", Event{Version: v, Kind: Occupancy})
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("a session two events behind its buffer of 2 is still open")
	}
}
