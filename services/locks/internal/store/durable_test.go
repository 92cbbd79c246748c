package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/locks/internal/domain"
)

// errUnknown stands for a durability wait that timed out after the script ran (pkg/redisx's
// hook fails the call the same way): the write is in Redis, the call failed.
var errUnknown = errors.New("outcome unknown: no replica acknowledged the write")

// A release whose call fails after its script ran (the durability wait timed out) publishes
// no grant: the waiter's replica hears nothing until the write is known to have succeeded. The
// waiter still gets the lock, by looking for it (pollEvery), with the token Redis holds.
func TestNoGrantNoticeForAFailedWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	s := testStore(t, rdb, prefix, Options{})
	listen(t, s)
	// The releasing replica's calls all fail after running.
	opt, _ := redis.ParseURL(redistest.URL(t))
	failing := redis.NewClient(opt)
	defer failing.Close()
	failing.AddHook(redistest.FailScriptsAfterRun{Err: errUnknown})
	other := testStore(t, failing, prefix, Options{Alarms: s.q})

	// A second subscriber on the waiter's grant channel sees what the waiter's replica would.
	heard := rdb.Subscribe(ctx, s.channel)
	defer heard.Close()
	if _, err := heard.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	if a, err := s.Acquire(ctx, "ledger", "holder", time.Minute, 0); err != nil || !a.OK {
		t.Fatalf("Acquire(ledger, holder) = %+v, %v", a, err)
	}
	const ttl = 2 * time.Second // the waiter looks for itself every second
	got := make(chan domain.Acquired, 1)
	go func() {
		a, err := s.Acquire(ctx, "ledger", "waiter", ttl, time.Minute)
		if err != nil {
			t.Errorf("waiting Acquire(ledger, waiter) = %v", err)
		}
		got <- a
	}()
	k := keysOf(s.q, "ledger")
	wait.Until(t, "waiter queued", func() bool { n, _ := rdb.LLen(ctx, k.queue).Result(); return n == 1 })

	if ok, err := other.Release(ctx, "ledger", "holder", 0); !errors.Is(err, errUnknown) {
		t.Fatalf("Release(ledger, holder) through a failing call = %v, %v; want the call's error", ok, err)
	}
	l, err := s.Get(ctx, "ledger")
	if err != nil || l.Owner != "waiter" {
		t.Fatalf("Get(ledger) = %+v, %v; want granted to the waiter by the release that ran", l, err)
	}
	// Anything the release published went out before this marker: the marker must come first.
	if err := rdb.Publish(ctx, s.channel, "marker").Err(); err != nil {
		t.Fatal(err)
	}
	first, err := heard.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Payload != "marker" {
		t.Fatalf("grant channel heard %q before the marker; want nothing from a failed release", first.Payload)
	}

	select {
	case a := <-got:
		if !a.OK || a.Token != l.Token {
			t.Errorf("waiting Acquire = %+v; want acquired with the granted token %d", a, l.Token)
		}
	case <-time.After(wait.Deadline):
		t.Fatalf("waiter did not find its grant within %v (its notice was never published)", wait.Deadline)
	}
}

// A failover that loses the tail of the replication stream sets the shard's fencing counter
// back. The next token still exceeds every token handed out before, and stays a JSON-safe
// integer.
func TestTokensIncreaseAfterTheCounterGoesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, rdb, _ := newStore(t)
	k := keysOf(s.q, "boiler")
	var highest int64
	take := func(owner string) int64 {
		t.Helper()
		a, err := s.Acquire(ctx, "boiler", owner, time.Minute, 0)
		if err != nil || !a.OK {
			t.Fatalf("Acquire(boiler, %s) = %+v, %v", owner, a, err)
		}
		if a.Token <= highest {
			t.Fatalf("Acquire(boiler, %s) token %d, want above every earlier token (%d)", owner, a.Token, highest)
		}
		if a.Token >= 1<<53 {
			t.Fatalf("token %d is not a JSON-safe integer (>= 2^53)", a.Token)
		}
		if ok, err := s.Release(ctx, "boiler", owner, a.Token); err != nil || !ok {
			t.Fatalf("Release(boiler, %s, %d) = %v, %v", owner, a.Token, ok, err)
		}
		highest = a.Token
		return a.Token
	}
	for _, setBack := range []string{"", "0", "1", "", "5"} {
		if setBack != "" {
			// What a replica promoted without the last increments would hold.
			if err := rdb.Set(ctx, k.fence, setBack, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		take("owner-" + setBack)
	}
	// Tokens handed out in one clock tick still increase one by one.
	for range 50 {
		take("fast")
	}
}

// An acquire, renew or release whose outcome is unknown (the call failed after the script
// ran) is sent again by the same owner: the acquire answers the hold the first one made, with
// its token, the renew renews it, and the release answers false once the first freed it.
func TestRepeatsAfterAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	clk := time.UnixMilli(1_800_000_000_000)
	s := testStore(t, rdb, prefix, Options{Now: func() time.Time { return clk }})
	opt, _ := redis.ParseURL(redistest.URL(t))
	failing := redis.NewClient(opt)
	defer failing.Close()
	failing.AddHook(redistest.FailScriptsAfterRun{Err: errUnknown})
	f := testStore(t, failing, prefix, Options{Alarms: s.q, Now: func() time.Time { return clk }})

	if _, err := f.Acquire(ctx, "press", "alice", time.Minute, 0); !errors.Is(err, errUnknown) {
		t.Fatalf("Acquire(press, alice) through a failing call = %v, want the call's error", err)
	}
	first, _ := s.Get(ctx, "press")
	a, err := s.Acquire(ctx, "press", "alice", time.Minute, 0)
	if err != nil || !a.OK || a.Token != first.Token || !first.Held {
		t.Fatalf("repeated Acquire(press, alice) = %+v, %v; want acquired with the first call's token %d (%+v)", a, err, first.Token, first)
	}
	if _, err := f.Renew(ctx, "press", "alice", 2*time.Minute, a.Token); !errors.Is(err, errUnknown) {
		t.Fatalf("Renew through a failing call = %v, want the call's error", err)
	}
	if r, err := s.Renew(ctx, "press", "alice", 2*time.Minute, a.Token); err != nil || !r.OK || !r.ExpiresAt.Equal(clk.Add(2*time.Minute)) {
		t.Fatalf("repeated Renew(press, alice, %d) = %+v, %v; want renewed to %v", a.Token, r, err, clk.Add(2*time.Minute))
	}
	if _, err := f.Release(ctx, "press", "alice", a.Token); !errors.Is(err, errUnknown) {
		t.Fatalf("Release through a failing call = %v, want the call's error", err)
	}
	if ok, err := s.Release(ctx, "press", "alice", a.Token); err != nil || ok {
		t.Fatalf("repeated Release(press, alice, %d) = %v, %v; want false (the first one freed it)", a.Token, ok, err)
	}
	if l, _ := s.Get(ctx, "press"); l.Held {
		t.Errorf("Get(press) after the release = %+v, want free", l)
	}
}

// The same with the real durability wait: under replica durability on a primary whose replica
// is paused, a release that hands the lock to a waiter on another replica fails as outcome
// unknown and publishes no grant; once the replica answers, the waiter finds its grant itself.
func TestNoGrantNoticeWhenNoReplicaConfirms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 1, Sentinels: -1})
	primary, replica := rs.Nodes()[0], rs.Nodes()[1]
	durable, err := redisx.Open(ctx, redisx.Config{URL: "redis://" + primary, Durability: redisx.Replica, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer durable.Close()
	const prefix = "t"
	s := testStore(t, durable, prefix, Options{})
	listen(t, s)
	other := testStore(t, durable, prefix, Options{Alarms: s.q})
	plain := rs.NodeClient(t, primary)
	heard := plain.Subscribe(ctx, s.channel)
	defer heard.Close()
	if _, err := heard.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	held, err := s.Acquire(ctx, "kiln", "holder", time.Minute, 0)
	if err != nil || !held.OK {
		t.Fatalf("Acquire(kiln, holder) = %+v, %v", held, err)
	}
	got := make(chan domain.Acquired, 1)
	go func() {
		a, _ := s.Acquire(ctx, "kiln", "waiter", 6*time.Second, time.Minute) // looks every 3 s
		got <- a
	}()
	k := keysOf(s.q, "kiln")
	wait.Until(t, "waiter queued", func() bool { n, _ := plain.LLen(ctx, k.queue).Result(); return n == 1 })

	rs.Pause(t, replica)
	paused := true
	defer func() {
		if paused {
			rs.Unpause(t, replica)
		}
	}()
	if _, err := other.Release(ctx, "kiln", "holder", 0); !errors.Is(err, redisx.ErrOutcomeUnknown) {
		t.Fatalf("Release(kiln, holder) with the replica paused = %v, want ErrOutcomeUnknown", err)
	}
	if err := plain.Publish(ctx, s.channel, "marker").Err(); err != nil {
		t.Fatal(err)
	}
	if first, err := heard.ReceiveMessage(ctx); err != nil || first.Payload != "marker" {
		t.Fatalf("grant channel heard %v, %v before the marker; want nothing from an unconfirmed release", first, err)
	}
	rs.Unpause(t, replica)
	paused = false

	select {
	case a := <-got:
		if !a.OK || a.Token <= held.Token {
			t.Errorf("waiting Acquire = %+v; want the waiter's grant, a token above %d", a, held.Token)
		}
	case <-time.After(wait.Deadline):
		t.Fatalf("waiter did not find its grant within %v", wait.Deadline)
	}
}
