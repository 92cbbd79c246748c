package store

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redistest"
)

// TestWaitersPerLockAreBounded: with MaxWaitersPerLock 2, two callers queue for a held lock and a
// third is refused at once (acquired false, the holder named) instead of queueing.
func TestWaitersPerLockAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	log := slog.New(slog.DiscardHandler)
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: "locks", Shards: 4, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s := New(rdb, q, Options{Prefix: prefix, Logger: log, MaxWaitersPerLock: 2})
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
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := rdb.LLen(ctx, k.queue).Result(); n < 2; n, _ = rdb.LLen(ctx, k.queue).Result() {
		if time.Now().After(deadline) {
			t.Fatalf("waiters queued = %d, want 2 within 10s", n)
		}
		time.Sleep(10 * time.Millisecond) // polling the queue's length, bounded by the deadline
	}
	start := time.Now()
	d, err := s.Acquire(ctx, "printer", "dave", time.Minute, 30*time.Second)
	if err != nil || d.OK || d.Holder != "alice" {
		t.Fatalf("Acquire(dave) with a full queue = %+v, %v; want refused, holder alice", d, err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("Acquire(dave) with a full queue waited %v, want an answer at once", waited)
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
