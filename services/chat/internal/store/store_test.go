package store

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func newStore(t *testing.T, keep int) (*Store, redis.UniversalClient) {
	t.Helper()
	rdb, prefix := redistest.Universal(t) // a Redis Cluster when VIGIL_TEST_REDIS_CLUSTER is set
	return New(rdb, Options{Prefix: prefix, Keep: keep}), rdb
}

// runFeed runs a feed of a new store (newStore, keeping keep messages a room) with buffer
// messages a subscriber until the test ends; ctx ends then too.
func runFeed(t *testing.T, keep, buffer int) (context.Context, *Store, *Feed) {
	t.Helper()
	s, _ := newStore(t, keep)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := NewFeed(s, buffer, slog.New(slog.DiscardHandler))
	go func() { _ = f.Run(ctx) }()
	return ctx, s, f
}

func post(room string, i int) domain.Post {
	return domain.Post{Room: room, UserID: "u1", User: "Ann", Body: fmt.Sprintf("m%d", i)}
}

func ids(msgs []domain.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func equalIDs(got []domain.Message, want ...int64) bool {
	g := ids(got)
	if len(g) != len(want) {
		return false
	}
	for i := range g {
		if g[i] != want[i] {
			return false
		}
	}
	return true
}

func TestAppendAndRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, 5)
	for i := 1; i <= 8; i++ {
		m, dup, err := s.Append(ctx, post("room-a", i), time.UnixMilli(int64(1000+i)))
		if err != nil || dup || m.ID != int64(i) {
			t.Fatalf("Append(%d) = %+v, dup %v, %v; want id %d", i, m, dup, err, i)
		}
	}
	last, seq, err := s.Last(ctx, "room-a", 3)
	if err != nil || seq != 8 || !equalIDs(last, 6, 7, 8) {
		t.Fatalf("Last(3) = %v, %d, %v; want [6 7 8], 8", ids(last), seq, err)
	}
	if last[2].Body != "m8" || last[2].User != "Ann" || last[2].UserID != "u1" || last[2].TS != 1008 {
		t.Errorf("Last(3)[2] = %+v, want m8 by Ann/u1 at 1008", last[2])
	}
	// Only 5 are kept: 4..8.
	all, _, err := s.After(ctx, "room-a", 0, 100)
	if err != nil || !equalIDs(all, 4, 5, 6, 7, 8) {
		t.Errorf("After(0) = %v, %v; want [4 5 6 7 8]", ids(all), err)
	}
	after, _, err := s.After(ctx, "room-a", 5, 2)
	if err != nil || !equalIDs(after, 6, 7) {
		t.Errorf("After(5, 2) = %v, %v; want [6 7]", ids(after), err)
	}
	before, _, err := s.Before(ctx, "room-a", 7, 2)
	if err != nil || !equalIDs(before, 5, 6) {
		t.Errorf("Before(7, 2) = %v, %v; want [5 6]", ids(before), err)
	}
	empty, seq, err := s.Last(ctx, "room-b", 50)
	if err != nil || seq != 0 || len(empty) != 0 {
		t.Errorf("Last(empty room) = %v, %d, %v; want nothing, 0", ids(empty), seq, err)
	}
}

func TestAppendIsIdempotentByPostID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, 100)
	p := post("room-a", 1)
	p.PostID = "p-1"
	m1, dup1, err := s.Append(ctx, p, time.UnixMilli(1))
	if err != nil || dup1 {
		t.Fatalf("first Append = %v, dup %v", err, dup1)
	}
	m2, dup2, err := s.Append(ctx, p, time.UnixMilli(2))
	if err != nil || !dup2 || m2.ID != m1.ID {
		t.Fatalf("repeated Append = id %d, dup %v, %v; want id %d, dup", m2.ID, dup2, err, m1.ID)
	}
	all, seq, _ := s.After(ctx, "room-a", 0, 10)
	if seq != 1 || len(all) != 1 {
		t.Errorf("after a repeated post: %d messages, last id %d; want 1, 1", len(all), seq)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	m := domain.Message{ID: 42, UserID: "ü-1", User: "Zoë", Body: "héllo\nworld:1", TS: 1764400000123}
	got, err := decodePublished("42:" + encode(m))
	if err != nil || got != m {
		t.Errorf("decodePublished(encode(%+v)) = %+v, %v", m, got, err)
	}
	if _, err := decode(1, "\x05ab"); err == nil {
		t.Errorf("decode(truncated) = nil error, want errCorrupt")
	}
}

func TestFeedDeliversInOrder(t *testing.T) {
	t.Parallel()
	ctx, s, f := runFeed(t, 100, 16)
	sub, err := f.Subscribe(ctx, "room-a")
	if err != nil {
		t.Fatalf("Subscribe = %v", err)
	}
	other, err := f.Subscribe(ctx, "room-b")
	if err != nil {
		t.Fatalf("Subscribe = %v", err)
	}
	defer other.Close()
	for i := 1; i <= 10; i++ {
		if _, _, err := s.Append(ctx, post("room-a", i), time.UnixMilli(1)); err != nil {
			t.Fatal(err)
		}
	}
	for want := int64(1); want <= 10; want++ {
		select {
		case e := <-sub.C:
			m := e.Message
			if m.ID != want || m.Body != fmt.Sprintf("m%d", want) {
				t.Fatalf("feed gave %+v, want id %d", m, want)
			}
		case <-time.After(wait.Deadline):
			t.Fatalf("no message %d within %v", want, wait.Deadline)
		}
	}
	select {
	case m := <-other.C:
		t.Errorf("room-b got %+v from room-a", m)
	default:
	}
	// A subscriber that does not read is dropped when its buffer (16) is full.
	for i := 11; i <= 40; i++ {
		if _, _, err := s.Append(ctx, post("room-a", i), time.UnixMilli(1)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-sub.Dropped:
	case <-time.After(wait.Deadline):
		t.Fatalf("a subscriber 30 messages behind a buffer of 16 was not dropped")
	}
	sub.Close()
}

func TestHistorySurvivesRedisRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	open := func() *redis.Client {
		opt, err := redis.ParseURL(srv.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		return redis.NewClient(opt)
	}
	rdb := open()
	s := New(rdb, Options{Prefix: "t", Keep: 10})
	for i := 1; i <= 3; i++ {
		if _, _, err := s.Append(ctx, post("room-a", i), time.UnixMilli(1)); err != nil {
			t.Fatal(err)
		}
	}
	_ = rdb.Close()
	srv.Restart(t)
	rdb = open()
	defer rdb.Close()
	s = New(rdb, Options{Prefix: "t", Keep: 10})
	got, seq, err := s.Last(ctx, "room-a", 50)
	if err != nil || seq != 3 || !equalIDs(got, 1, 2, 3) {
		t.Fatalf("after restart Last = %v, %d, %v; want [1 2 3], 3", ids(got), seq, err)
	}
	// A restarted Redis may have lost the last writes of its history, so the next id may jump
	// above every id handed out before (append.lua); it never repeats one.
	m, _, err := s.Append(ctx, post("room-a", 4), time.UnixMilli(1))
	if err != nil || m.ID <= 3 || m.ID >= 1<<53 {
		t.Errorf("Append after restart = id %d, %v; want above 3 and below 2^53", m.ID, err)
	}
	if got, _, err := s.After(ctx, "room-a", 3, 50); err != nil || !equalIDs(got, m.ID) {
		t.Errorf("After(3) = %v, %v; want [%d]", ids(got), err, m.ID)
	}
}
