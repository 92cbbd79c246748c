package store

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
)

// A failover that loses the tail of the replication stream sets the lobby's version and change
// log back, and the log's last entry was written by another primary. The next change's version
// still exceeds every version handed out before (a reader holding one would take the lobby for
// unchanged when the counter reached it again), stays a JSON-safe integer, and a poll from a
// cursor of the lost tail reloads.
func TestVersionsNeverGoBackAfterALostTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	s, err := New(rdb, Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_800_000_000_000)
	if err := s.Create(ctx, domain.Room{Code: "abc234", Name: "Room", CreatedAt: now.UnixMilli(), Video: domain.Video{Title: "t", DurationMs: 1000}}, "hash"); err != nil {
		t.Fatal(err)
	}
	// What a replica promoted after the create holds.
	replica := map[string]string{}
	for _, key := range []string{s.k.version, s.k.changes} {
		if replica[key], err = rdb.Dump(ctx, key).Result(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 2; i++ {
		if err := s.Touch(ctx, "abc234", now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	_, lost, _, err := s.List(ctx, now.Add(-time.Hour))
	if err != nil || lost.Version != 3 {
		t.Fatalf("List cursor = %+v, %v; want version 3", lost, err)
	}
	for key, dump := range replica {
		if err := rdb.RestoreReplace(ctx, key, 0, dump).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The surviving log's last entry, as the old primary wrote it.
	if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.k.changes, Values: []any{"v", "1", "c", "abc234", "e", "the-old-primary"}}).Err(); err != nil {
		t.Fatal(err)
	}

	if err := s.Touch(ctx, "abc234", now.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	v, err := s.Version(ctx)
	if err != nil || v <= lost.Version || v >= 1<<53 {
		t.Fatalf("Version after the lost tail = %d, %v; want above %d and below 2^53", v, err, lost.Version)
	}
	if err := s.Touch(ctx, "abc234", now.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	if next, err := s.Version(ctx); err != nil || next != v+1 {
		t.Fatalf("Version after that = %d, %v; want %d", next, err, v+1)
	}
	if p, err := s.Poll(ctx, lost, now.Add(-time.Hour)); err != nil || p.Complete {
		t.Fatalf("Poll from a cursor of the lost tail = %+v, %v; want incomplete (reload)", p, err)
	}
}
