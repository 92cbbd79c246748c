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
		j := joinViewer(t, s, code, i, now)
		if j.State.Version <= 0 {
			t.Fatalf("Join(s%d) = %+v, want a version", i, j)
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

// The same lost tail sets the room's occupancy seq back (the Lobby applied seq 3, the new
// primary's seq is 1). The next change's seq still exceeds every one handed out before, so the
// Lobby sees a gap rather than a change it already applied, and the room's snapshot (read by
// Occupancy) carries a seq above every earlier one, which the Lobby takes. The seqs after it
// follow one another again.
func TestOccupancySeqNeverGoesBackAfterALostTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const code = "failover-seq-room"
	now := time.UnixMilli(1_800_000_000_000)
	s := openRoom(t, code, time.Hour, now, 1000)
	state := s.keys(code)[0]
	join := func(i int) int64 {
		t.Helper()
		j := joinViewer(t, s, code, i, now)
		if j.Change.Seq <= 0 {
			t.Fatalf("Join(s%d) = %+v, want a seq", i, j)
		}
		return j.Change.Seq
	}
	join(1)
	dump, err := s.rdb.Dump(ctx, state).Result()
	if err != nil {
		t.Fatal(err)
	}
	join(2)
	highest := join(3)
	if err := s.rdb.RestoreReplace(ctx, state, 0, dump).Err(); err != nil {
		t.Fatal(err)
	}
	// Both counters' epochs name the old primary, as on a promoted replica.
	s.rdb.HSet(ctx, state, "versionEpoch", "the-old-primary", "seqEpoch", "the-old-primary")

	after := join(4)
	if after <= highest+1 || after >= 1<<53 {
		t.Fatalf("seq after the lost tail = %d, want above %d (a gap at the Lobby) and below 2^53", after, highest+1)
	}
	seq, _, _, err := s.Occupancy(ctx, code)
	if err != nil || seq != after {
		t.Fatalf("Occupancy seq = %d, %v; want %d (the snapshot's seq)", seq, err, after)
	}
	if next := join(5); next != after+1 {
		t.Fatalf("seq after that = %d, want %d", next, after+1)
	}
}

// joinViewer joins viewer session s<i> to the room code, failing the test on an error.
func joinViewer(t *testing.T, s *Store, code string, i int, now time.Time) Joined {
	t.Helper()
	id := fmt.Sprintf("s%d", i)
	j, err := s.Join(context.Background(), code, Session{ID: id, Role: domain.Viewer, ClientID: "c" + id, Attachment: "a" + id, Name: "N" + id}, now, now.Add(time.Minute))
	if err != nil {
		t.Fatalf("Join(%s) = %+v, %v", id, j, err)
	}
	return j
}
