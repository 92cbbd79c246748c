package store

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestWaitersPerLockAreBounded: with MaxWaitersPerLock 2, two callers queue for a held lock and a
// third is refused at once (acquired false, the holder named) instead of queueing.
func TestWaitersPerLockAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	log := slog.New(slog.DiscardHandler)
	q := testQueue(t, rdb, prefix, nil)
	s := mustNew(t, rdb, Options{Alarms: q, Prefix: prefix, Logger: log, MaxWaitersPerLock: 2})
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
