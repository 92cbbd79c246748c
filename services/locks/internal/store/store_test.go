package store

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func newStore(t *testing.T) (*Store, *alarm.Queue, redis.UniversalClient, *clocktest.Manual) {
	t.Helper()
	rdb, prefix := redistest.Universal(t) // a Redis Cluster when VIGIL_TEST_REDIS_CLUSTER is set
	clk := clocktest.New(time.UnixMilli(1_800_000_000_000))
	s := testStore(t, rdb, prefix, Options{Now: clk.Now})
	return s, s.q, rdb, clk
}

// listen subscribes s to its grant notices and runs its Listen until the test ends.
func listen(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Subscribe(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _ = s.Listen(ctx) }()
}

// testStore is a store on rdb under prefix with o's settings, silent unless o names a logger.
// Unless o names a queue, its alarms go to a new one: the locks' queue under prefix, 4 shards,
// silent, reading o.Now (nil: the local clock).
func testStore(t testing.TB, rdb redis.UniversalClient, prefix string, o Options) *Store {
	t.Helper()
	o.Prefix = prefix
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Alarms == nil {
		q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: "locks", Shards: 4, Now: o.Now, Logger: o.Logger})
		if err != nil {
			t.Fatal(err)
		}
		o.Alarms = q
	}
	s, err := New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExpiredLockIsFreeBeforeItsAlarmFires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, q, rdb, clk := newStore(t)

	a, err := s.Acquire(ctx, "printer", "alice", time.Second, 0)
	if err != nil || !a.OK {
		t.Fatalf("Acquire(printer, alice) = %+v, %v; want acquired", a, err)
	}
	if want := clk.Now().Add(time.Second); !a.ExpiresAt.Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", a.ExpiresAt, want)
	}
	if due, ok, _ := q.Get(ctx, "printer"); !ok || !due.Equal(a.ExpiresAt) {
		t.Errorf("alarm = %v, %v; want due at the lease end %v", due, ok, a.ExpiresAt)
	}

	clk.Add(999 * time.Millisecond)
	if b, _ := s.Acquire(ctx, "printer", "bob", time.Second, 0); b.OK || b.Holder != "alice" {
		t.Fatalf("Acquire(printer, bob) 1 ms before expiry = %+v; want refused, holder alice", b)
	}
	clk.Add(time.Millisecond)
	// The alarm has not fired (no scheduler runs), yet the lease is over.
	b, err := s.Acquire(ctx, "printer", "bob", time.Second, 0)
	if err != nil || !b.OK || b.Token <= a.Token {
		t.Fatalf("Acquire(printer, bob) at expiry = %+v, %v; want acquired with token > %d", b, err, a.Token)
	}
	if ok, _ := s.Release(ctx, "printer", "alice", 0); ok {
		t.Errorf("Release(printer, alice) after her lease ended = true, want false")
	}
	l, _ := s.Get(ctx, "printer")
	if !l.Held || l.Owner != "bob" || l.Token != b.Token {
		t.Errorf("Get(printer) = %+v, want held by bob with token %d", l, b.Token)
	}

	// The stale alarm of alice's lease, replayed, changes nothing: bob's lease is not over.
	if _, errs := s.Expire(ctx, []string{"printer"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if l2, _ := s.Get(ctx, "printer"); l2 != l {
		t.Errorf("Get after a stale alarm = %+v, want unchanged %+v", l2, l)
	}
	// At bob's lease end the alarm transition frees the lock and removes the key.
	clk.Add(time.Second)
	if _, errs := s.Expire(ctx, []string{"printer"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if n, _ := rdb.Exists(ctx, keysOf(q, "printer").lock).Result(); n != 0 {
		t.Errorf("lock key exists after expiry alarm, want deleted")
	}
	if _, ok, _ := q.Get(ctx, "printer"); ok {
		t.Errorf("alarm still set after expiry, want removed")
	}
}

func TestRenewMovesLeaseAndAlarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, q, _, clk := newStore(t)
	a, _ := s.Acquire(ctx, "door", "alice", 300*time.Millisecond, 0)
	clk.Add(200 * time.Millisecond)
	r, err := s.Renew(ctx, "door", "alice", 300*time.Millisecond, 0)
	if err != nil || !r.OK || !r.ExpiresAt.Equal(clk.Now().Add(300*time.Millisecond)) {
		t.Fatalf("Renew(door, alice) = %+v, %v; want renewed to now+300ms", r, err)
	}
	if due, _, _ := q.Get(ctx, "door"); !due.Equal(r.ExpiresAt) {
		t.Errorf("alarm due %v, want moved to %v", due, r.ExpiresAt)
	}
	clk.Add(200 * time.Millisecond) // past the first lease end, before the renewed one
	if _, errs := s.Expire(ctx, []string{"door"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if l, _ := s.Get(ctx, "door"); !l.Held || l.Token != a.Token {
		t.Errorf("Get(door) after the old alarm = %+v, want still held with token %d", l, a.Token)
	}
	if r, _ := s.Renew(ctx, "door", "bob", time.Second, 0); r.OK {
		t.Errorf("Renew(door, bob) = %+v, want refused", r)
	}
	clk.Add(100 * time.Millisecond)
	if r, _ := s.Renew(ctx, "door", "alice", time.Second, 0); r.OK {
		t.Errorf("Renew(door, alice) at her lease end = %+v, want refused", r)
	}
}

// A release or renewal naming an earlier hold's fencing token (delayed, or retried after the
// owner took the lock again) leaves the owner's later hold alone; one naming the hold's own
// token, or none, acts on it.
func TestFencedReleaseAndRenewActOnlyOnTheirHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, _, _ := newStore(t)
	first, _ := s.Acquire(ctx, "vault", "alice", time.Second, 0)
	if ok, err := s.Release(ctx, "vault", "alice", first.Token); err != nil || !ok {
		t.Fatalf("Release(vault, alice, %d) = %v, %v; want released", first.Token, ok, err)
	}
	later, _ := s.Acquire(ctx, "vault", "alice", time.Second, 0)
	if !later.OK || later.Token <= first.Token {
		t.Fatalf("Acquire(vault, alice) again = %+v, want a new hold with a token above %d", later, first.Token)
	}
	if ok, err := s.Release(ctx, "vault", "alice", first.Token); err != nil || ok {
		t.Errorf("delayed Release(vault, alice, %d) = %v, %v; want false (the hold is %d)", first.Token, ok, err, later.Token)
	}
	if r, err := s.Renew(ctx, "vault", "alice", time.Minute, first.Token); err != nil || r.OK {
		t.Errorf("delayed Renew(vault, alice, %d) = %+v, %v; want refused", first.Token, r, err)
	}
	if l, _ := s.Get(ctx, "vault"); !l.Held || l.Token != later.Token || !l.ExpiresAt.Equal(later.ExpiresAt) {
		t.Errorf("Get(vault) = %+v; want alice's later hold %d, its lease unchanged", l, later.Token)
	}
	if r, err := s.Renew(ctx, "vault", "alice", time.Minute, later.Token); err != nil || !r.OK {
		t.Errorf("Renew(vault, alice, %d) = %+v, %v; want renewed", later.Token, r, err)
	}
	if ok, err := s.Release(ctx, "vault", "alice", later.Token); err != nil || !ok {
		t.Errorf("Release(vault, alice, %d) = %v, %v; want released", later.Token, ok, err)
	}
	// Without a token a release frees whatever hold the owner has, as before tokens were sent.
	third, _ := s.Acquire(ctx, "vault", "alice", time.Second, 0)
	if ok, err := s.Release(ctx, "vault", "alice", 0); err != nil || !ok || !third.OK {
		t.Errorf("Release(vault, alice) without a token = %v, %v; want released", ok, err)
	}
}

func TestWaiterGrantedByExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, q, _, clk := newStore(t)
	listen(t, s)

	a, _ := s.Acquire(ctx, "gate", "alice", time.Second, 0)
	got := make(chan struct {
		a   any
		err error
	}, 1)
	go func() {
		b, err := s.Acquire(ctx, "gate", "bob", time.Second, 30*time.Second)
		got <- struct {
			a   any
			err error
		}{b, err}
	}()
	wait.Until(t, "bob queued", func() bool { n, _ := s.rdb.LLen(ctx, keysOf(q, "gate").queue).Result(); return n == 1 })
	clk.Add(time.Second)
	if _, errs := s.Expire(ctx, []string{"gate"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	l, _ := s.Get(ctx, "gate")
	if l.Owner != "bob" || l.Token <= a.Token {
		t.Errorf("after alice's lease ran out, Get(gate) = %+v; want bob with token > %d (acquire said %+v)", l, a.Token, r.a)
	}
}

// TestWaitersPerLockAreBounded: with MaxWaitersPerLock 2, two callers queue for a held lock and a
// third is refused at once (acquired false, the holder named) instead of queueing.
func TestWaitersPerLockAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	s := testStore(t, rdb, prefix, Options{MaxWaitersPerLock: 2})
	if a, err := s.Acquire(ctx, "printer", "alice", time.Minute, 0); err != nil || !a.OK {
		t.Fatalf("Acquire(alice) = %+v, %v; want acquired", a, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 2)
	for _, who := range []string{"bob", "carol"} {
		go func() {
			_, err := s.Acquire(wctx, "printer", who, time.Minute, 30*time.Second)
			done <- err
		}()
	}
	k := keysOf(s.q, "printer")
	wait.Until(t, "two waiters queued", func() bool { n, _ := rdb.LLen(ctx, k.queue).Result(); return n == 2 })
	// dave asks to wait longer than the test's deadline: only a refusal without queueing can
	// answer him in time.
	d, err := s.Acquire(ctx, "printer", "dave", time.Minute, time.Minute)
	if err != nil || d.OK || d.Holder != "alice" {
		t.Fatalf("Acquire(dave) with a full queue = %+v, %v; want refused, holder alice", d, err)
	}
	if n, _ := rdb.LLen(ctx, k.queue).Result(); n != 2 {
		t.Fatalf("queue length after the refusal = %d, want 2", n)
	}
	cancel()
	for range 2 {
		if err := <-done; err == nil {
			t.Error("a cancelled waiter returned no error")
		}
	}
}
