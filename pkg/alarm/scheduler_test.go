package alarm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestConcurrentSchedulersHandleEveryAlarmOnceWithoutOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n, schedulers = 2000, 4
	opts := Options{Shards: 8, BatchSize: 16, Lease: 30 * time.Second, MaxSleep: time.Minute}
	q, rdb := testQueue(t, opts)

	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		calls    = map[string]int{}
		overlaps []string
		handled  atomic.Int64
	)
	h := HandlerFunc(func(ctx context.Context, f Firing) error {
		mu.Lock()
		inFlight[f.ID]++
		calls[f.ID]++
		if inFlight[f.ID] > 1 {
			overlaps = append(overlaps, f.ID)
		}
		mu.Unlock()
		// Give another scheduler every chance to grab the same alarm while this one holds it.
		for range rand.IntN(50) {
			runtime.Gosched()
		}
		mu.Lock()
		inFlight[f.ID]--
		mu.Unlock()
		handled.Add(1)
		return nil
	})
	for range schedulers {
		run(t, twin(t, q, rdb, opts), h)
	}

	// Half are already due, half fall due over the next 200 ms while the schedulers race.
	now := time.Now()
	for i := range n {
		due := now.Add(-time.Second)
		if i%2 == 1 {
			due = now.Add(time.Duration(rand.IntN(200)) * time.Millisecond)
		}
		if err := q.Set(ctx, "obj"+strconv.Itoa(i), due); err != nil {
			t.Fatalf("Set: %v", err)
		}
	}
	wait.Until(t, "every alarm to be handled and acknowledged", func() bool {
		return handled.Load() >= n && pending(t, q) == 0
	})

	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Fatalf("%d alarms were handled by two schedulers at once, e.g. %q", len(overlaps), overlaps[0])
	}
	for i := range n {
		if id := "obj" + strconv.Itoa(i); calls[id] != 1 {
			t.Errorf("%s handled %d times, want exactly once (no failures, lease never ran out)", id, calls[id])
		}
	}
}

func TestUnacknowledgedAlarmFiresAgainAfterLease(t *testing.T) {
	t.Parallel()
	const lease = 300 * time.Millisecond
	opts := Options{Shards: 2, Lease: lease, MaxSleep: time.Minute}

	t.Run("scheduler stopped mid-handler", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		q, rdb := testQueue(t, opts)
		started := newRecorder(func(ctx context.Context, f Firing) error {
			<-ctx.Done() // the process is going away while the effect runs
			return ctx.Err()
		})
		stop := run(t, q, started.handler())
		due := wholeMs(time.Now())
		if err := q.Set(ctx, "a", due); err != nil {
			t.Fatalf("Set: %v", err)
		}
		f1 := started.next(t)
		stop()
		if got, ok, _ := q.Get(ctx, "a"); !ok || got.Before(due.Add(lease)) {
			t.Fatalf("Get after the scheduler died = %v, %v; want leased until at least %v", got, ok, due.Add(lease))
		}

		rec := newRecorder(nil)
		run(t, twin(t, q, rdb, opts), rec.handler())
		f2 := rec.next(t)
		if f2.ID != "a" || !f2.IsRetry() || f2.RetryCount() != 1 {
			t.Fatalf("second firing = %+v, want a with IsRetry, RetryCount 1", f2)
		}
		if f2.At.Before(f1.Due.Add(lease)) {
			t.Fatalf("fired again at %v, before its lease ended at %v", f2.At, f1.Due.Add(lease))
		}
		wait.Until(t, "the retry to be acknowledged", func() bool { return pending(t, q) == 0 })
	})

	t.Run("handler blocks past its lease", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		// The second claim's lease must outlast the checks below even on a busy machine.
		opts := opts
		opts.Lease = time.Second
		q, rdb := testQueue(t, opts)
		release := [3]chan struct{}{nil, make(chan struct{}), make(chan struct{})}
		rec := newRecorder(func(ctx context.Context, f Firing) error {
			if f.Attempt < len(release) {
				<-release[f.Attempt]
			}
			return nil
		})
		run(t, q, rec.handler())
		run(t, twin(t, q, rdb, opts), rec.handler())
		// Cleanups run last-registered first: a failing check below still lets the blocked
		// handlers return before the schedulers are stopped.
		var released [3]sync.Once
		unblock := func(i int) { released[i].Do(func() { close(release[i]) }) }
		t.Cleanup(func() { unblock(1); unblock(2) })

		if err := q.Set(ctx, "a", time.Now()); err != nil {
			t.Fatalf("Set: %v", err)
		}
		f1 := rec.next(t)
		f2 := rec.next(t) // the other scheduler, once the lease ran out
		if f1.Attempt != 1 || f2.Attempt != 2 || !f2.IsRetry() || f2.RetryCount() != 1 {
			t.Fatalf("firings = %+v then %+v, want attempt 1 then a retry with RetryCount 1", f1, f2)
		}
		if f2.At.Before(f1.Due.Add(lease)) {
			t.Fatalf("re-claimed at %v, before the first lease ended at %v", f2.At, f1.Due.Add(lease))
		}

		// The first handler finishes late: its ack must leave the second claim's lease alone.
		unblock(1)
		wait.Until(t, "the late ack", func() bool { return acked(q) == 1 })
		if _, ok, _ := q.Get(ctx, "a"); !ok {
			t.Fatalf("a late ack removed an alarm another scheduler holds")
		}
		unblock(2)
		wait.Until(t, "the second ack", func() bool { return pending(t, q) == 0 })
		rec.none(t, "unexpected third firing")
	})
}

func TestWorkFinishedDuringShutdownIsAcknowledged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, _ := testQueue(t, Options{Shards: 1, Lease: time.Hour, MaxSleep: time.Minute})
	rec := newRecorder(func(ctx context.Context, f Firing) error {
		<-ctx.Done() // shutdown begins while the effect runs; the effect still completes
		return nil
	})
	stop := run(t, q, rec.handler())
	if err := q.Set(ctx, "a", time.Now()); err != nil {
		t.Fatalf("Set: %v", err)
	}
	rec.next(t)
	stop() // Run returns only after the batch is settled
	if due, ok, err := q.Get(ctx, "a"); ok || err != nil {
		t.Fatalf("Get after shutdown = %v, %v, %v; want no alarm: finished work must not fire again after the lease", due, ok, err)
	}
}

func TestAckKeepsAlarmReArmedDuringHandling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		result error
	}{
		{"handler succeeds", nil},
		{"handler fails", errors.New("downstream unavailable")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			q, rdb := testQueue(t, Options{Shards: 2, MaxSleep: time.Minute, RetryBase: time.Hour})
			var rearmAt time.Time // written by the first firing, read after the second
			rec := newRecorder(func(ctx context.Context, f Firing) error {
				if !rearmAt.IsZero() {
					return nil
				}
				// The object sets its next alarm while its current one is being handled.
				rearmAt = wholeMs(time.Now().Add(100 * time.Millisecond))
				if err := q.Set(ctx, f.ID, rearmAt); err != nil {
					return fmt.Errorf("re-arm: %w", err)
				}
				return tc.result
			})
			run(t, q, rec.handler())
			if err := q.Set(ctx, "a", time.Now()); err != nil {
				t.Fatalf("Set: %v", err)
			}
			f1 := rec.next(t)
			f2 := rec.next(t)
			if f1.Attempt != 1 {
				t.Fatalf("first firing = %+v, want attempt 1", f1)
			}
			if f2.Attempt != 1 || f2.IsRetry() || !f2.Due.Equal(rearmAt) || f2.At.Before(rearmAt) {
				t.Fatalf("firing after re-arm = %+v, want a fresh attempt 1 due %v", f2, rearmAt)
			}
			wait.Until(t, "the re-armed alarm's ack", func() bool { return pending(t, q) == 0 })
			if n := rdb.HLen(ctx, q.KeysOf("a").Attempts).Val(); n != 0 {
				t.Fatalf("attempt counts left: %d, want 0", n)
			}
		})
	}
}

func TestFailingAlarmRetriesWithBackoffThenDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const base = 4 * time.Millisecond
	// A long lease and sleep: retries must be woken by their backoff, not by either.
	opts := Options{Shards: 2, RetryBase: base, Lease: 10 * time.Second, MaxSleep: time.Minute}
	q, _ := testQueue(t, opts)
	var healthy atomic.Bool
	rec := newRecorder(func(ctx context.Context, f Firing) error {
		if healthy.Load() {
			return nil
		}
		return fmt.Errorf("attempt %d failed", f.Attempt)
	})
	run(t, q, rec.handler())

	for _, id := range []string{"replayed", "discarded"} {
		if err := q.Set(ctx, id, time.Now()); err != nil {
			t.Fatalf("Set: %v", err)
		}
		var prev fired
		for attempt := 1; attempt <= 7; attempt++ {
			f := rec.next(t)
			if f.ID != id || f.Attempt != attempt || f.RetryCount() != attempt-1 {
				t.Fatalf("firing = %+v, want %s attempt %d", f, id, attempt)
			}
			if attempt > 1 {
				backoff := base << (attempt - 2)
				if gap := f.At.Sub(prev.At); gap < backoff {
					t.Fatalf("attempt %d came %v after attempt %d, want at least the backoff %v", attempt, gap, attempt-1, backoff)
				} else {
					t.Logf("%s attempt %d: %v after the previous one (backoff %v)", id, attempt, gap, backoff)
				}
			}
			prev = f
		}
		wait.Until(t, id+" to be dead-lettered", func() bool {
			dead, err := q.DeadLetters(ctx)
			return err == nil && len(dead) == 1
		})
		dead, _ := q.DeadLetters(ctx)
		if d := dead[0]; d.ID != id || d.Attempts != 7 || d.Error != "attempt 7 failed" || d.Shard != q.ShardOf(id) {
			t.Fatalf("dead letter = %+v, want %s after 7 attempts with the last error", d, id)
		}
		if _, ok, _ := q.Get(ctx, id); ok {
			t.Fatalf("a dead letter still has an alarm")
		}

		if id == "discarded" {
			if ok, err := q.DiscardDead(ctx, id); !ok || err != nil {
				t.Fatalf("DiscardDead = %v, %v; want true, nil", ok, err)
			}
			break
		}
		healthy.Store(true)
		if ok, err := q.ReplayDead(ctx, id); !ok || err != nil {
			t.Fatalf("ReplayDead = %v, %v; want true, nil", ok, err)
		}
		if f := rec.next(t); f.ID != id || f.Attempt != 1 {
			t.Fatalf("replayed firing = %+v, want %s attempt 1", f, id)
		}
		wait.Until(t, "the replayed alarm's ack", func() bool { return pending(t, q) == 0 })
		healthy.Store(false)
	}
	if dead, err := q.DeadLetters(ctx); len(dead) != 0 || err != nil {
		t.Fatalf("DeadLetters after replay and discard = %v, %v; want none", dead, err)
	}
	if n := pending(t, q); n != 0 {
		t.Fatalf("alarms left after replay and discard: %d, want 0", n)
	}
}

// TestWakeUpHintsEndTheSchedulersSleep lets a scheduler go to sleep for an hour (its next alarm
// is an hour away on the injected clock, and MaxSleep is longer), then sets an alarm that is
// due now: it fires only if the wake-up hint, local or from another process, ends the sleep.
func TestWakeUpHintsEndTheSchedulersSleep(t *testing.T) {
	t.Parallel()
	sleepAnHour := func(t *testing.T) (*Queue, redis.UniversalClient, *recorder, Options) {
		t.Helper()
		clock := clocktest.New(t0)
		opts := Options{Shards: 1, MaxSleep: 2 * time.Hour, Now: clock.Now}
		q, rdb := testQueue(t, opts)
		ctx := context.Background()
		if err := q.Set(ctx, "later", t0.Add(time.Hour)); err != nil {
			t.Fatalf("Set: %v", err)
		}
		if err := q.Set(ctx, "first", t0); err != nil {
			t.Fatalf("Set: %v", err)
		}
		rec := newRecorder(nil)
		run(t, q, rec.handler())
		// Once "first" is handled and acknowledged, the loop's next sleep lasts until "later".
		if f := rec.next(t); f.ID != "first" {
			t.Fatalf("fired %s, want first", f.ID)
		}
		wait.Until(t, "first's ack", func() bool { return pending(t, q) == 1 })
		opts.Prefix, opts.Namespace = q.o.Prefix, q.o.Namespace
		return q, rdb, rec, opts
	}

	t.Run("same process", func(t *testing.T) {
		t.Parallel()
		q, _, rec, _ := sleepAnHour(t)
		if err := q.Set(context.Background(), "now", t0); err != nil {
			t.Fatalf("Set: %v", err)
		}
		if f := rec.next(t); f.ID != "now" {
			t.Fatalf("fired %s, want now", f.ID)
		}
	})

	t.Run("other process", func(t *testing.T) {
		t.Parallel()
		q, rdb, rec, opts := sleepAnHour(t)
		wait.Until(t, "the scheduler to subscribe to wake-up hints", func() bool { return subscribed(t, rdb, q) })
		other := twin(t, q, rdb, opts) // never runs: only its hint can wake q
		if err := other.Set(context.Background(), "now", t0); err != nil {
			t.Fatalf("Set: %v", err)
		}
		if f := rec.next(t); f.ID != "now" {
			t.Fatalf("fired %s, want now", f.ID)
		}
	})
}

func TestAlarmsNeverFireEarly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 300
	q, _ := testQueue(t, Options{Shards: 4, MaxSleep: time.Minute})
	rec := newRecorder(nil)
	run(t, q, rec.handler())

	want := map[string]time.Time{}
	start := time.Now()
	for i := range n {
		// Sub-millisecond due times too: they round up, never down.
		due := start.Add(time.Duration(rand.Int64N(int64(300 * time.Millisecond))))
		id := "obj" + strconv.Itoa(i)
		want[id] = due
		if err := q.Set(ctx, id, due); err != nil {
			t.Fatalf("Set: %v", err)
		}
	}
	var worst time.Duration
	for range n {
		f := rec.next(t)
		// Wall readings on both sides (Round(0) drops the monotonic one): the queue's clock is
		// the wall clock, which the machine's time service may slew against the monotonic
		// clock by hundreds of microseconds a second.
		due := want[f.ID].Round(0)
		f.At = f.At.Round(0)
		if f.At.Before(due) {
			t.Errorf("%s fired at %v, %v before its due time", f.ID, f.At, due.Sub(f.At))
		}
		if f.Due.Before(due) || f.Due.Sub(due) >= time.Millisecond {
			t.Errorf("%s Firing.Due = %v, want %v rounded up to the ms", f.ID, f.Due, due)
		}
		worst = max(worst, f.At.Sub(due))
	}
	t.Logf("worst lateness of %d alarms: %v", n, worst)
}

func TestHandlerPanicIsRetriedAndSchedulerSurvives(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, _ := testQueue(t, Options{Shards: 1, RetryBase: 5 * time.Millisecond, MaxSleep: time.Minute})
	rec := newRecorder(func(ctx context.Context, f Firing) error {
		if f.ID == "boom" && f.Attempt == 1 {
			panic("handler bug")
		}
		return nil
	})
	run(t, q, rec.handler())
	if err := q.Set(ctx, "boom", time.Now()); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if f := rec.next(t); f.ID != "boom" || f.Attempt != 1 {
		t.Fatalf("first firing = %+v, want boom attempt 1", f)
	}
	if f := rec.next(t); f.ID != "boom" || f.Attempt != 2 || !f.IsRetry() {
		t.Fatalf("after the panic = %+v, want boom retried as attempt 2", f)
	}
	if err := q.Set(ctx, "after", time.Now()); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if f := rec.next(t); f.ID != "after" || f.Attempt != 1 {
		t.Fatalf("next firing = %+v, want after attempt 1 (the scheduler survived)", f)
	}
	wait.Until(t, "both acks", func() bool { return pending(t, q) == 0 })
}
