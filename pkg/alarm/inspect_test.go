package alarm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/vigil-dev/vigil/pkg/tracing"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestInspectFollowsAnAlarmToTheDeadLetters walks one alarm from overdue, to claimed, to a
// lease that ran out (a crashed scheduler), to a dead letter, and checks what each view shows.
func TestInspectFollowsAnAlarmToTheDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, _, clock := clockedQueue(t, Options{Shards: 2, Lease: 10 * time.Second, MaxRetries: 1})

	for id, due := range map[string]time.Time{"late": t0.Add(-5 * time.Second), "soon": t0.Add(time.Second), "later": t0.Add(time.Hour)} {
		if err := q.Set(ctx, id, due); err != nil {
			t.Fatalf("Set(%s): %v", id, err)
		}
	}
	now, shards, err := q.Inspect(ctx, 5)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if !now.Equal(t0) || len(shards) != 2 {
		t.Fatalf("Inspect = now %v, %d shards; want %v, 2", now, len(shards), t0)
	}
	var total, overdue int64
	var next []AlarmState
	for _, s := range shards {
		total += s.Pending
		overdue += s.Overdue
		next = append(next, s.Next...)
		if int64(len(s.Next)) != s.Pending {
			t.Fatalf("shard %d lists %d next alarms, want all %d", s.Shard, len(s.Next), s.Pending)
		}
	}
	if total != 3 || overdue != 1 || len(next) != 3 {
		t.Fatalf("Inspect totals = pending %d, overdue %d, listed %d; want 3, 1, 3", total, overdue, len(next))
	}

	a, ok, err := q.Alarm(ctx, "late")
	want := AlarmState{ID: "late", Shard: q.ShardOf("late"), Due: t0.Add(-5 * time.Second)}
	if err != nil || !ok || a != want {
		t.Fatalf("Alarm(late) = %+v, %v, %v; want %+v, true, nil", a, ok, err, want)
	}
	if _, ok, err := q.Alarm(ctx, "nobody"); ok || err != nil {
		t.Fatalf("Alarm(nobody) = ok %v, err %v; want false, nil", ok, err)
	}

	// A scheduler claims it: in flight until the lease ends, no longer overdue.
	shard := q.ShardOf("late")
	batch, lease, _, err := q.claimDue(ctx, shard)
	if err != nil || len(batch) != 1 || batch[0].ID != "late" {
		t.Fatalf("claimDue = %v, %v; want the late alarm", batch, err)
	}
	a, _, _ = q.Alarm(ctx, "late")
	if !a.InFlight || a.Attempts != 1 || !a.Due.After(t0.Add(10*time.Second)) || a.Due.After(t0.Add(10*time.Second+time.Millisecond)) {
		t.Fatalf("Alarm(late) after claim = %+v; want in flight, 1 attempt, due at the lease end t0+10s+1ms", a)
	}
	_, shards, _ = q.Inspect(ctx, 1)
	if s := shards[shard]; s.InFlight != 1 || s.Overdue != 0 {
		t.Fatalf("shard %d after claim = %+v; want 1 in flight, 0 overdue", shard, s)
	}

	// The scheduler died: once the lease ends, the alarm is overdue again and still in flight.
	clock.Set(t0.Add(11 * time.Second))
	_, shards, _ = q.Inspect(ctx, 1)
	if s := shards[shard]; s.InFlight != 1 || s.Overdue < 1 {
		t.Fatalf("shard %d after the lease ended = %+v; want 1 in flight and overdue", shard, s)
	}

	// The second attempt fails: past MaxRetries, so it is dead-lettered with its error.
	batch, lease, _, err = q.claimDue(ctx, shard)
	if err != nil || len(batch) == 0 {
		t.Fatalf("claimDue after the lease = %v, %v", batch, err)
	}
	if n := testutil.ToFloat64(q.metrics.refired); n != 1 {
		t.Fatalf("vigil_alarms_refired_total after the lease ran out = %v, want 1", n)
	}
	for _, f := range batch {
		if f.ID != "late" {
			continue
		}
		if _, err := q.fail(ctx, q.Keys(shard), f, lease, errors.New("payment service down")); err != nil {
			t.Fatalf("fail: %v", err)
		}
	}
	d, ok, err := q.DeadLetter(ctx, "late")
	wantDead := DeadLetter{ID: "late", Shard: shard, Attempts: 2, Error: "payment service down", At: t0.Add(11 * time.Second)}
	if err != nil || !ok || d != wantDead {
		t.Fatalf("DeadLetter(late) = %+v, %v, %v; want %+v", d, ok, err, wantDead)
	}
	if _, ok, _ := q.Alarm(ctx, "late"); ok {
		t.Fatalf("Alarm(late) after dead-lettering exists; want none")
	}
	_, shards, _ = q.Inspect(ctx, 0)
	if s := shards[shard]; s.Dead != 1 || s.InFlight != 0 || s.Next != nil {
		t.Fatalf("shard %d after dead-lettering = %+v; want 1 dead, 0 in flight, nothing listed", shard, s)
	}
	if _, ok, err := q.DeadLetter(ctx, "soon"); ok || err != nil {
		t.Fatalf("DeadLetter(soon) = ok %v, err %v; want false, nil", ok, err)
	}
}

// TestBatchIsOneSpan: with tracing on, each handled batch is a span the handler's context
// carries, so the handler's calls join its trace.
func TestBatchIsOneSpan(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	q, _ := testQueue(t, Options{Shards: 1})
	inSpan := make(chan bool, 1)
	run(t, q, HandlerFunc(func(ctx context.Context, f Firing) error {
		inSpan <- trace.SpanContextFromContext(ctx).IsValid()
		return nil
	}))
	if err := q.Set(context.Background(), "traced", time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-inSpan:
		if !ok {
			t.Fatal("the handler's context carries no span")
		}
	case <-time.After(wait.Deadline):
		t.Fatal("the alarm did not fire")
	}
	wait.Until(t, "the batch span to end", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "alarms "+q.Namespace() {
				return true
			}
		}
		return false
	})
}
