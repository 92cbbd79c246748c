package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// A failover of the room's store that loses the tail of its replication stream sets the room
// back: the Lobby applied the last two joins (seq 3, 3 viewers) but the promoted replica holds
// the room as it was before them (seq 1, 1 viewer) under another replication id. The changes
// after it still reach the Lobby, whose counts are then exact: the room's next seq jumps, the
// Lobby sees a gap and takes the room's snapshot. Without the jump the next changes would reuse
// seqs 2 and 3, which the Lobby drops as applied, and so would it the room's snapshots until
// its seq passed 3.
func TestOccupancyIsExactAfterALostTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// No renewal snapshot during the test (the renewal runs every third of a lease).
	e := newEnv(t, settings{lease: 10 * time.Minute})
	rdb := e.redis()
	code, _ := e.createRoom()
	v1 := join(t, e.room, code, viewer, "v1", "")
	wait.Until(t, "lobby shows 1 viewer", viewers(e, code, 1, false))

	// What a replica promoted now holds: every key of the room (its shard's alarms aside).
	roomKeys := func() []string { return e.roomKeys(rdb, code) }
	dumps := map[string]string{}
	for _, k := range roomKeys() {
		d, err := rdb.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		dumps[k] = d
	}
	join(t, e.room, code, viewer, "v2", "")
	join(t, e.room, code, viewer, "v3", "")
	wait.Until(t, "lobby shows 3 viewers", viewers(e, code, 3, false))

	// The failover: the joins of v2 and v3 are lost, and the room's counters' epochs name the old
	// primary, as on a replica promoted under another replication id.
	for _, k := range roomKeys() {
		if _, kept := dumps[k]; !kept {
			rdb.Del(ctx, k)
		}
	}
	state := ""
	for k, d := range dumps {
		if err := rdb.RestoreReplace(ctx, k, 0, d).Err(); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(k, ":state") {
			state = k
		}
	}
	if err := rdb.HSet(ctx, state, "versionEpoch", "the-old-primary", "seqEpoch", "the-old-primary").Err(); err != nil {
		t.Fatal(err)
	}
	snapshots := e.faults.snapshots.Load()

	v1.leave()
	wait.Until(t, "lobby shows no viewer", viewers(e, code, 0, false))
	if n := e.faults.snapshots.Load(); n <= snapshots {
		t.Fatalf("snapshots sent after the failover = %d, want at least 1", n-snapshots)
	}
	v4 := join(t, e.room, code, viewer, "v4", "")
	join(t, e.room, code, viewer, "v5", "")
	wait.Until(t, "lobby shows v4 and v5", viewers(e, code, 2, false))
	v4.leave()
	wait.Until(t, "lobby shows v5 alone", viewers(e, code, 1, false))
}

// A failover can lose a room's whole state: the room was first joined just before it. The
// next join creates the state again from the Lobby entry, and its occupancy reaches the Lobby
// exactly: the new state's seqs start above the lost ones (Redis TIME in µs), where starting at
// 0 again would hand out seqs the Lobby applied and drops (it would show 2 viewers for good).
func TestOccupancyIsExactAfterALostState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, settings{lease: 10 * time.Minute}) // no renewal snapshot during the test
	rdb := e.redis()
	code, _ := e.createRoom()
	join(t, e.room, code, viewer, "v1", "")
	join(t, e.room, code, viewer, "v2", "")
	wait.Until(t, "lobby shows 2 viewers", viewers(e, code, 2, false))

	for _, k := range e.roomKeys(rdb, code) {
		if err := rdb.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	v3 := join(t, e.room, code, viewer, "v3", "")
	if v3.state.GetViewers() != 1 {
		t.Fatalf("state after the lost state = %d viewers, want 1 (v3)", v3.state.GetViewers())
	}
	wait.Until(t, "lobby shows v3 alone", viewers(e, code, 1, false))
	join(t, e.room, code, viewer, "v4", "")
	wait.Until(t, "lobby shows v3 and v4", viewers(e, code, 2, false))
	v3.leave()
	wait.Until(t, "lobby shows v4 alone", viewers(e, code, 1, false))
}

// redis is a client of the env's Redis, for a test that plays a failover on the room's keys.
func (e *env) redis() *redis.Client {
	e.t.Helper()
	opt, err := redis.ParseURL(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	e.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// roomKeys lists the keys of the room code in the Room store (its shard's alarms aside).
func (e *env) roomKeys(rdb *redis.Client, code string) []string {
	e.t.Helper()
	keys, err := rdb.Keys(context.Background(), e.prefix+"-room:*:"+code+":*").Result()
	if err != nil {
		e.t.Fatal(err)
	}
	return keys
}
