package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

// errUnknown stands for a durability wait that timed out after the script ran (pkg/redisx's
// hook fails the call the same way): the write is in Redis, the call failed.
var errUnknown = errors.New("outcome unknown: no replica acknowledged the write")

// heardFirst publishes a marker on channel and returns the first payload sub hears: anything
// published on channel before the marker comes first.
func heardFirst(t *testing.T, ctx context.Context, rdb redis.Cmdable, sub *redis.PubSub, channel string) string {
	t.Helper()
	if err := rdb.Publish(ctx, channel, "marker").Err(); err != nil {
		t.Fatal(err)
	}
	m, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m.Payload
}

// A post or a presence change whose call fails after its script ran (the durability wait
// timed out) is not published: a subscriber never sees what a failover may then lose. The post
// sent again with its postId is stored once, answered with the first id, and published then.
func TestNothingPublishedForAFailedWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	s := New(rdb, Options{Prefix: prefix, Keep: 100})
	opt, _ := redis.ParseURL(redistest.URL(t))
	failing := redis.NewClient(opt)
	defer failing.Close()
	failing.AddHook(redistest.FailScriptsAfterRun{Err: errUnknown})
	f := New(failing, Options{Prefix: prefix, Keep: 100})

	channel := s.keys("lobby").channel
	sub := rdb.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	p := post("lobby", 1)
	p.PostID = "post-1"
	if _, _, err := f.Append(ctx, p, time.UnixMilli(1)); !errors.Is(err, errUnknown) {
		t.Fatalf("Append through a failing call = %v, want the call's error", err)
	}
	if got := heardFirst(t, ctx, rdb, sub, channel); got != "marker" {
		t.Fatalf("room channel heard %q before the marker; want nothing from a failed append", got)
	}
	now := time.UnixMilli(1_764_000_000_000)
	sess := domain.Session{ID: "g1:1", UserID: "u1", Username: "Ann"}
	if _, err := f.Enter(ctx, "lobby", sess, "h1", now, now.Add(time.Minute)); !errors.Is(err, errUnknown) {
		t.Fatalf("Enter through a failing call = %v, want the call's error", err)
	}
	if got := heardFirst(t, ctx, rdb, sub, channel); got != "marker" {
		t.Fatalf("room channel heard %q before the marker; want nothing from a failed enter", got)
	}

	// The caller repeats after the unknown outcome: the first write stands, and is published.
	m, dup, err := s.Append(ctx, p, time.UnixMilli(2))
	if err != nil || !dup || m.ID != 1 {
		t.Fatalf("repeated Append(post-1) = id %d, dup %v, %v; want id 1, dup", m.ID, dup, err)
	}
	got, err := sub.ReceiveMessage(ctx)
	if err != nil || !strings.HasPrefix(got.Payload, "1:") {
		t.Fatalf("after the repeat the channel heard %v, %v; want message 1", got, err)
	}
	if e, err := decodePublished(got.Payload); err != nil || e.Body != p.Body {
		t.Errorf("published %+v, %v; want the first post's body %q", e, err, p.Body)
	}
}

// A failover that loses the tail of the replication stream sets a room's counter and log back,
// and the new primary has another replication id. The next post's id exceeds every id handed
// out before, stays a JSON-safe integer, and the ids after it follow one another again.
func TestIDsNeverRepeatAfterTheCounterGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb := newStore(t, 100)
	k := s.keys("hall")
	appendN := func(from, to int) {
		for i := from; i <= to; i++ {
			if m, _, err := s.Append(ctx, post("hall", i), time.UnixMilli(1)); err != nil || m.ID != int64(i) {
				t.Fatalf("Append %d = id %d, %v; want %d", i, m.ID, err, i)
			}
		}
	}
	appendN(1, 2)
	// What a replica promoted after message 2 holds: the room as it was then.
	replica := map[string]string{}
	for _, key := range []string{k.log, k.seq} {
		dump, err := rdb.Dump(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		replica[key] = dump
	}
	appendN(3, 5)
	// The failover: messages 3 to 5 and their counter are gone, and the room's last id was
	// given by another primary.
	for key, dump := range replica {
		if err := rdb.RestoreReplace(ctx, key, 0, dump).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Set(ctx, k.epoch, "the-old-primary", 0)

	m, _, err := s.Append(ctx, post("hall", 6), time.UnixMilli(1))
	if err != nil || m.ID <= 5 || m.ID >= 1<<53 {
		t.Fatalf("Append after the lost tail = id %d, %v; want above 5 and below 2^53", m.ID, err)
	}
	next, _, err := s.Append(ctx, post("hall", 7), time.UnixMilli(1))
	if err != nil || next.ID != m.ID+1 {
		t.Fatalf("Append after that = id %d, %v; want %d", next.ID, err, m.ID+1)
	}
	if got, last, err := s.After(ctx, "hall", 2, 50); err != nil || last != next.ID || !equalIDs(got, m.ID, next.ID) {
		t.Errorf("After(2) = %v, last %d, %v; want [%d %d], last %d", ids(got), last, err, m.ID, next.ID, next.ID)
	}
}

// The same for the room's presence version: after a lost tail the next change's version
// exceeds every version handed out before (a stream skips changes at or below its version).
func TestPresenceVersionsNeverGoBackAfterALostTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb := newStore(t, 100)
	k := s.keys("foyer")
	now := time.UnixMilli(1_764_000_000_000)
	enter := func(user string) int64 {
		t.Helper()
		sess := domain.Session{ID: "g1:" + user, UserID: user, Username: "N" + user}
		if _, err := s.Enter(ctx, "foyer", sess, "h1", now, now.Add(time.Minute)); err != nil {
			t.Fatalf("Enter(%s) = %v", user, err)
		}
		p, err := s.Presence(ctx, "foyer", now)
		if err != nil {
			t.Fatal(err)
		}
		return p.Version
	}
	enter("u1")
	version := k.presence[4]
	dump, err := rdb.Dump(ctx, version).Result()
	if err != nil {
		t.Fatal(err)
	}
	enter("u2")
	highest := enter("u3")
	// The failover: the last two versions are gone, given by another primary.
	if err := rdb.RestoreReplace(ctx, version, 0, dump).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.Set(ctx, k.presence[5], "the-old-primary", 0)

	after := enter("u4")
	if after <= highest || after >= 1<<53 {
		t.Fatalf("presence version after the lost tail = %d, want above %d and below 2^53", after, highest)
	}
	if next := enter("u5"); next != after+1 {
		t.Fatalf("presence version after that = %d, want %d", next, after+1)
	}
}

// The same with the real durability wait: under replica durability on a primary whose replica
// is paused, a post fails as outcome unknown and nothing reaches the room's channel; once the
// replica answers, the post sent again with its postId is stored once and published.
func TestNothingPublishedWhenNoReplicaConfirms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 1, Sentinels: -1})
	primary, replica := rs.Nodes()[0], rs.Nodes()[1]
	durable, err := redisx.Open(ctx, redisx.Config{URL: "redis://" + primary, Durability: redisx.Replica, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer durable.Close()
	s := New(durable, Options{Prefix: "t", Keep: 100})
	plain := rs.NodeClient(t, primary)
	channel := s.keys("deck").channel
	sub := plain.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	if m, _, err := s.Append(ctx, post("deck", 1), time.UnixMilli(1)); err != nil || m.ID != 1 {
		t.Fatalf("Append(1) with the replica up = id %d, %v; want 1", m.ID, err)
	}
	if got, err := sub.ReceiveMessage(ctx); err != nil || !strings.HasPrefix(got.Payload, "1:") {
		t.Fatalf("channel heard %v, %v; want message 1", got, err)
	}

	rs.Pause(t, replica)
	paused := true
	defer func() {
		if paused {
			rs.Unpause(t, replica)
		}
	}()
	p := post("deck", 2)
	p.PostID = "post-2"
	if _, _, err := s.Append(ctx, p, time.UnixMilli(2)); !errors.Is(err, redisx.ErrOutcomeUnknown) {
		t.Fatalf("Append(2) with the replica paused = %v, want ErrOutcomeUnknown", err)
	}
	if got := heardFirst(t, ctx, plain, sub, channel); got != "marker" {
		t.Fatalf("channel heard %q before the marker; want nothing from an unconfirmed post", got)
	}

	rs.Unpause(t, replica)
	paused = false
	m, dup, err := s.Append(ctx, p, time.UnixMilli(3))
	if err != nil || !dup || m.ID != 2 {
		t.Fatalf("Append(2) sent again = id %d, dup %v, %v; want id 2, dup", m.ID, dup, err)
	}
	if got, err := sub.ReceiveMessage(ctx); err != nil || !strings.HasPrefix(got.Payload, "2:") {
		t.Fatalf("after the repeat the channel heard %v, %v; want message 2", got, err)
	}
}
