package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

// A failover that loses the tail of the replication stream sets the room's version back, and
// the new primary has another replication id. The next event's version still exceeds every
// version handed out before (the gateway skips versions it has seen), stays a JSON-safe
// integer, and the versions after it follow one another again.
func TestVersionsNeverGoBackAfterALostTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const code = "failover-room"
	now := time.UnixMilli(1_800_000_000_000)
	s := openRoom(t, code, time.Hour, now, 1000)
	state := s.keys(code)[0]
	join := func(i int) int64 {
		t.Helper()
		id := fmt.Sprintf("s%d", i)
		j, err := s.Join(ctx, code, Session{ID: id, Role: domain.Viewer, ClientID: "c" + id, Attachment: "a" + id, Name: "N" + id}, now, now.Add(time.Minute))
		if err != nil || j.State.Version <= 0 {
			t.Fatalf("Join(%s) = %+v, %v", id, j, err)
		}
		return j.State.Version
	}
	first := join(1)
	// What a replica promoted after the first join holds.
	dump, err := s.rdb.Dump(ctx, state).Result()
	if err != nil {
		t.Fatal(err)
	}
	join(2)
	highest := join(3)
	if highest <= first {
		t.Fatalf("versions %d then %d, want growing", first, highest)
	}
	if err := s.rdb.RestoreReplace(ctx, state, 0, dump).Err(); err != nil {
		t.Fatal(err)
	}
	s.rdb.HSet(ctx, state, "versionEpoch", "the-old-primary")

	after := join(4)
	if after <= highest || after >= 1<<53 {
		t.Fatalf("version after the lost tail = %d, want above %d and below 2^53", after, highest)
	}
	if next := join(5); next <= after || next > after+2 {
		t.Fatalf("version after that = %d, want %d or %d (a join's two events)", next, after+1, after+2)
	}
}
