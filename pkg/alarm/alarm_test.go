package alarm

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// t0 is a whole-millisecond instant far from the real clock, so only the fake clock decides.
var t0 = time.UnixMilli(1_900_000_000_000)

func TestSetReplacesGetAndDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, rdb := testQueue(t, Options{Shards: 4})

	if _, ok, err := q.Get(ctx, "nobody"); err != nil || ok {
		t.Fatalf("Get(nobody) = ok %v, err %v; want no alarm", ok, err)
	}
	if err := q.Set(ctx, "a", t0.Add(time.Hour)); err != nil {
		t.Fatalf("Set(a, +1h): %v", err)
	}
	if err := q.Set(ctx, "a", t0.Add(time.Minute)); err != nil {
		t.Fatalf("Set(a, +1m): %v", err)
	}
	due, ok, err := q.Get(ctx, "a")
	if err != nil || !ok || !due.Equal(t0.Add(time.Minute)) {
		t.Fatalf("Get(a) = %v, %v, %v; want %v, true, nil", due, ok, err, t0.Add(time.Minute))
	}
	if n := rdb.ZCard(ctx, q.KeysOf("a").Alarms).Val(); n != 1 {
		t.Fatalf("alarms in a's shard = %d, want 1 (Set replaces)", n)
	}

	// Due times are whole ms, rounded up: an alarm never fires before the instant it was set for.
	if err := q.Set(ctx, "b", t0.Add(1500*time.Microsecond)); err != nil {
		t.Fatalf("Set(b): %v", err)
	}
	if due, _, _ := q.Get(ctx, "b"); !due.Equal(t0.Add(2 * time.Millisecond)) {
		t.Fatalf("Get(b) after Set(t0+1.5ms) = %v, want t0+2ms = %v", due, t0.Add(2*time.Millisecond))
	}

	if err := q.Delete(ctx, "a"); err != nil {
		t.Fatalf("Delete(a): %v", err)
	}
	if _, ok, err := q.Get(ctx, "a"); err != nil || ok {
		t.Fatalf("Get(a) after Delete = ok %v, err %v; want no alarm", ok, err)
	}
	if err := q.Delete(ctx, "a"); err != nil {
		t.Fatalf("Delete(a) twice: %v, want nil", err)
	}
	if _, ok, _ := q.Get(ctx, "b"); !ok {
		t.Fatalf("Delete(a) removed b's alarm too")
	}
}

// TestReplacedAlarmFiresOnceAtItsNewTime replaces an alarm before it is due: it fires once, at
// the new time only. The injected clock decides what is due, so a slow machine changes nothing.
func TestReplacedAlarmFiresOnceAtItsNewTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, _, clock := clockedQueue(t, Options{Shards: 2, MaxSleep: 10 * time.Millisecond})
	rec := newRecorder(nil)
	run(t, q, rec.handler())

	first := t0.Add(30 * time.Millisecond)
	second := first.Add(50 * time.Millisecond)
	if err := q.Set(ctx, "x", first); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if err := q.Set(ctx, "x", second); err != nil {
		t.Fatalf("Set again: %v", err)
	}
	clock.Set(first) // the old due time passes: nothing is due
	clock.Set(second.Add(-time.Millisecond))
	if due, ok, err := q.Get(ctx, "x"); err != nil || !ok || !due.Equal(second) {
		t.Fatalf("Get(x) = %v, %v, %v; want the replaced alarm at %v", due, ok, err, second)
	}
	clock.Set(second)
	f := rec.next(t)
	if f.ID != "x" || !f.Due.Equal(second) || f.Attempt != 1 {
		t.Fatalf("first firing = %+v, want x, attempt 1, due %v", f, second)
	}
	wait.Until(t, "the alarm to be acknowledged", func() bool { return pending(t, q) == 0 })
	rec.none(t, "replaced alarm fired a second time")
}

// TestClaimLeasesOnlyDueAlarms drives one shard's claim and ack by hand with an injected clock.
func TestClaimLeasesOnlyDueAlarms(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = 5 * time.Second
	q, rdb, clock := clockedQueue(t, Options{Shards: 1, Lease: lease})
	due := t0.Add(10 * time.Millisecond)
	if err := q.Set(ctx, "a", due); err != nil {
		t.Fatalf("Set: %v", err)
	}

	clock.Set(due.Add(-time.Millisecond))
	batch, _, next, err := q.claimDue(ctx, 0)
	if err != nil || len(batch) != 0 || !next.Equal(due) {
		t.Fatalf("claimDue 1ms before due = %v, next %v, err %v; want nothing, next %v", batch, next, err, due)
	}

	clock.Set(due)
	batch, lease1, next, err := q.claimDue(ctx, 0)
	if err != nil || len(batch) != 1 {
		t.Fatalf("claimDue at due = %v, %v; want one firing", batch, err)
	}
	if f := batch[0]; f.ID != "a" || f.Attempt != 1 || f.IsRetry() || f.RetryCount() != 0 || !f.Due.Equal(due) {
		t.Fatalf("first firing = %+v, want a, attempt 1, due %v", f, due)
	}
	if want := due.Add(lease + time.Millisecond); !next.Equal(want) {
		t.Fatalf("next after claim = %v, want the lease's end rounded up %v", next, want)
	}
	if got, _, _ := q.Get(ctx, "a"); !got.Equal(due.Add(lease)) {
		t.Fatalf("Get while leased = %v, want %v", got, due.Add(lease))
	}

	// The lease score is now+lease plus a fraction, so the alarm stays hidden through the
	// lease's last whole millisecond.
	clock.Set(due.Add(lease))
	if batch, _, _, err := q.claimDue(ctx, 0); err != nil || len(batch) != 0 {
		t.Fatalf("claimDue at the lease's end = %v, %v; want nothing", batch, err)
	}
	clock.Set(due.Add(lease + time.Millisecond))
	batch, lease2, _, err := q.claimDue(ctx, 0)
	if err != nil || len(batch) != 1 {
		t.Fatalf("claimDue after the lease = %v, %v; want the alarm again", batch, err)
	}
	if f := batch[0]; f.Attempt != 2 || !f.IsRetry() || f.RetryCount() != 1 {
		t.Fatalf("re-claimed firing = %+v, want attempt 2, IsRetry, RetryCount 1", f)
	}

	ok := HandlerFunc(func(context.Context, Firing) error { return nil })
	// The first claim's ack comes too late: the alarm belongs to the second claim now.
	if _, err := q.handle(ctx, 0, batch, lease1, ok); err != nil {
		t.Fatalf("handle with the stale lease: %v", err)
	}
	if _, present, _ := q.Get(ctx, "a"); !present {
		t.Fatalf("an ack with a stale lease removed the re-claimed alarm")
	}
	if _, err := q.handle(ctx, 0, batch, lease2, ok); err != nil {
		t.Fatalf("handle: %v", err)
	}
	if _, present, _ := q.Get(ctx, "a"); present {
		t.Fatalf("alarm still present after its ack")
	}
	if n := rdb.HLen(ctx, q.Keys(0).Attempts).Val(); n != 0 {
		t.Fatalf("attempt counts left after ack: %d, want 0", n)
	}
}

// split parts batch into the firings of object id and the rest.
func split(batch []Firing, id string) (of, rest []Firing) {
	for _, f := range batch {
		if f.ID == id {
			of = append(of, f)
		} else {
			rest = append(rest, f)
		}
	}
	return of, rest
}

// TestClaimBatchLargerThanLuaUnpackLimit claims more members than Lua's unpack can take at once.
func TestClaimBatchLargerThanLuaUnpackLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 5000
	q, rdb, _ := clockedQueue(t, Options{Shards: 1, BatchSize: n})
	members := make([]redis.Z, n)
	for i := range members {
		members[i] = redis.Z{Score: float64(t0.UnixMilli()), Member: "id" + strconv.Itoa(i)}
	}
	if err := rdb.ZAdd(ctx, q.Keys(0).Alarms, members...).Err(); err != nil {
		t.Fatalf("ZADD: %v", err)
	}
	batch, _, _, err := q.claimDue(ctx, 0)
	if err != nil || len(batch) != n {
		t.Fatalf("claimDue = %d firings, %v; want %d", len(batch), err, n)
	}
}

func TestNewRequiresNamespace(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, Options{}); err == nil {
		t.Fatalf("New without Namespace = nil error, want one")
	}
}

func TestReplayAndDiscardOfUnknownDeadLetter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, _ := testQueue(t, Options{})
	if ok, err := q.ReplayDead(ctx, "ghost"); ok || err != nil {
		t.Fatalf("ReplayDead(ghost) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := q.DiscardDead(ctx, "ghost"); ok || err != nil {
		t.Fatalf("DiscardDead(ghost) = %v, %v; want false, nil", ok, err)
	}
	if dead, err := q.DeadLetters(ctx); len(dead) != 0 || err != nil {
		t.Fatalf("DeadLetters = %v, %v; want none", dead, err)
	}
	if _, _, err := q.Get(ctx, "ghost"); errors.Is(err, redis.Nil) {
		t.Fatalf("Get leaks redis.Nil")
	}
}

// TestAckTouchesOnlyItsOwnBatch runs ack.lua directly on the cases a batch can be in when it is
// acknowledged, including another claim that happened to draw the same lease score.
func TestAckTouchesOnlyItsOwnBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, rdb := testQueue(t, Options{Shards: 1})
	k := q.Keys(0)
	const lease = "1900000015000.5"
	rdb.ZAdd(ctx, k.Alarms,
		redis.Z{Score: 1900000015000.5, Member: "mine"},        // still leased by this batch: removed
		redis.Z{Score: 1900000015000.5, Member: "same-score"},  // another claim's, same score: kept
		redis.Z{Score: 1900000020000, Member: "re-armed"},      // re-armed while handled: kept
		redis.Z{Score: 1900000030000.25, Member: "re-claimed"}, // claimed again after the lease: kept
	)
	rdb.HSet(ctx, k.Attempts, "same-score", 1, "re-claimed", 2)
	rdb.Set(ctx, k.InFlight, 5, 0) // the four of this batch and same-score

	n, err := q.ack.Run(ctx, rdb, []string{k.Alarms, k.Attempts, k.InFlight}, lease, "mine", "re-armed", "re-claimed", "deleted").Int()
	if err != nil || n != 1 {
		t.Fatalf("ack = %d, %v; want 1 removed", n, err)
	}
	left := rdb.ZRange(ctx, k.Alarms, 0, -1).Val()
	if want := []string{"same-score", "re-armed", "re-claimed"}; !slices.Equal(left, want) {
		t.Fatalf("alarms after ack = %v, want %v", left, want)
	}
	// Attempts restart for alarms that are gone or fresh again; a re-claimed one keeps counting.
	attempts := rdb.HGetAll(ctx, k.Attempts).Val()
	if len(attempts) != 2 || attempts["same-score"] != "1" || attempts["re-claimed"] != "2" {
		t.Fatalf("attempts after ack = %v, want same-score:1 re-claimed:2", attempts)
	}
	// mine, re-armed and deleted landed; re-claimed (counted, so re-claimed after its lease)
	// and same-score are still in flight.
	if n := rdb.Get(ctx, k.InFlight).Val(); n != "2" {
		t.Fatalf("in-flight count after ack = %q, want 2", n)
	}
}

// TestAttemptCountsStartAtTheSecondClaim: a first claim writes no count (so draining fresh
// alarms costs the attempts hash nothing), later claims count 2, 3, ..., and a count left by an
// earlier round does not survive the alarm being set afresh.
func TestAttemptCountsStartAtTheSecondClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = 5 * time.Second
	q, rdb, clock := clockedQueue(t, Options{Shards: 1, Lease: lease})
	attempts := q.Keys(0).Attempts
	rdb.HSet(ctx, attempts, "b", 5) // left behind by an earlier round of b's alarm
	for _, id := range []string{"a", "b"} {
		if err := q.Set(ctx, id, t0); err != nil {
			t.Fatalf("Set %s: %v", id, err)
		}
	}
	for want := 1; want <= 3; want++ {
		clock.Set(t0.Add(time.Duration(want-1) * (lease + time.Millisecond)))
		batch, _, _, err := q.claimDue(ctx, 0)
		if err != nil || len(batch) != 2 {
			t.Fatalf("claim %d = %v, %v; want a and b", want, batch, err)
		}
		for _, f := range batch {
			if f.Attempt != want || f.RetryCount() != want-1 {
				t.Fatalf("claim %d: firing %+v, want attempt %d", want, f, want)
			}
			a, ok, err := q.Alarm(ctx, f.ID)
			if err != nil || !ok || !a.InFlight || a.Attempts != want {
				t.Fatalf("claim %d: Alarm(%s) = %+v, %v, %v; want in flight, attempt %d", want, f.ID, a, ok, err, want)
			}
		}
		counts := rdb.HGetAll(ctx, attempts).Val()
		if want == 1 && len(counts) != 0 {
			t.Fatalf("counts after a first claim = %v, want none", counts)
		}
		if want > 1 && (len(counts) != 2 || counts["a"] != strconv.Itoa(want) || counts["b"] != strconv.Itoa(want)) {
			t.Fatalf("counts after claim %d = %v, want a and b at %d", want, counts, want)
		}
	}
}

// TestInFlightCountFollowsEveryFlight drives alarms through each way a flight ends (ack,
// retry then ack, dead letter, cleared or re-armed while handled, re-claimed after a lease ran
// out, claimed afresh before a late ack) and checks Inspect's in-flight count at every step.
func TestInFlightCountFollowsEveryFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const lease = 5 * time.Second
	q, rdb, clock := clockedQueue(t, Options{Shards: 1, Lease: lease, MaxRetries: 1, RetryBase: time.Second})
	k := q.Keys(0)
	inFlight := func(step string, want int64) {
		t.Helper()
		_, shards, err := q.Inspect(ctx, 0)
		if err != nil || shards[0].InFlight != want {
			t.Fatalf("%s: in flight %+v, %v; want %d", step, shards, err, want)
		}
	}
	ok := HandlerFunc(func(context.Context, Firing) error { return nil })
	failing := HandlerFunc(func(context.Context, Firing) error { return errors.New("down") })
	claim := func(step string, n int) ([]Firing, string) {
		t.Helper()
		batch, lease, _, err := q.claimDue(ctx, 0)
		if err != nil || len(batch) != n {
			t.Fatalf("%s: claimed %v, %v; want %d", step, batch, err, n)
		}
		return batch, lease
	}
	set := func(id string, at time.Time) {
		t.Helper()
		if err := q.Set(ctx, id, at); err != nil {
			t.Fatalf("Set %s: %v", id, err)
		}
	}
	// settle runs h on batch and acknowledges or retries as a scheduler does, then checks the
	// count.
	settle := func(step string, batch []Firing, lease string, h Handler, want int64) {
		t.Helper()
		if _, err := q.handle(ctx, 0, batch, lease, h); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		inFlight(step, want)
	}

	inFlight("nothing claimed", 0)
	for _, id := range []string{"acked", "retried", "cleared", "re-armed"} {
		set(id, t0)
	}
	batch, l1 := claim("first claim", 4)
	inFlight("four claimed", 4)
	if err := q.Delete(ctx, "cleared"); err != nil { // its object went while it was handled
		t.Fatalf("Delete: %v", err)
	}
	set("re-armed", t0.Add(time.Minute))
	bad, good := split(batch, "retried")
	settle("acked, cleared and re-armed landed", good, l1, ok, 1)
	settle("retried waits for its retry, still in flight", bad, l1, failing, 1)

	clock.Set(t0.Add(time.Second + time.Millisecond))
	batch, l2 := claim("the retry", 1)
	if batch[0].Attempt != 2 {
		t.Fatalf("retry firing = %+v, want attempt 2", batch[0])
	}
	inFlight("retry claimed: the same flight", 1)
	settle("past MaxRetries: dead-lettered", batch, l2, failing, 0)
	if d, ok, _ := q.DeadLetter(ctx, "retried"); !ok || d.Attempts != 2 {
		t.Fatalf("DeadLetter(retried) = %+v, %v; want 2 attempts", d, ok)
	}

	// A handler outlives its lease: another scheduler re-claims "slow" and "other" and acks
	// "slow" first; then the first handler's ack of "slow" comes. That flight is taken off
	// twice (documented on ShardKeys.InFlight): one low while "other" flies, right once idle.
	set("slow", clock.Now())
	set("other", clock.Now())
	batch, stale := claim("slow and other", 2)
	clock.Set(clock.Now().Add(lease + time.Millisecond))
	again, l3 := claim("both after their lease", 2)
	inFlight("re-claimed: the same flights", 2)
	slow, other := split(again, "slow")
	settle("the re-claimer acked slow", slow, l3, ok, 1)
	lateSlow, _ := split(batch, "slow")
	settle("the late ack of slow: one low", lateSlow, stale, ok, 0)
	settle("idle again", other, l3, ok, 0)
	set("other", clock.Now())
	batch, l6 := claim("other afresh", 1)
	inFlight("counting from zero again", 1)
	settle("other acked", batch, l6, ok, 0)

	// "twice" is re-armed while handled and claimed afresh before the first claim's ack.
	set("twice", clock.Now())
	first, l4 := claim("twice", 1)
	set("twice", clock.Now())
	second, l5 := claim("twice afresh", 1)
	inFlight("two flights of one object", 2)
	settle("the first flight's late ack", first, l4, ok, 1)
	settle("both acked", second, l5, ok, 0)
	if n := rdb.Exists(ctx, k.InFlight, k.Attempts).Val(); n != 0 {
		t.Fatalf("%d of the in-flight count and attempts keys left with nothing in flight, want none", n)
	}

	// Bury, the operators' drill, leaves the count as it was.
	if err := q.Bury(ctx, "drill", 3, "drill"); err != nil {
		t.Fatalf("Bury: %v", err)
	}
	inFlight("after Bury", 0)
}

// TestDomainScriptsUseTheContract runs a domain-style script built with NewScript: the alarm it
// sets through alarm_set is the queue's alarm (Get sees it, it fires), the head flag is right,
// and alarm_clear removes it.
func TestDomainScriptsUseTheContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, rdb, _ := clockedQueue(t, Options{Shards: 1})
	arm := NewScript("arm.lua", `
if not alarm_int(ARGV[2]) then return redis.error_reply('ERR arm.lua: want an integer due time') end
redis.call('SET', KEYS[1], 'armed')
return alarm_set(KEYS[2], ARGV[1], ARGV[2])`)
	disarm := NewScript("disarm.lua", `redis.call('SET', KEYS[1], 'disarmed') alarm_clear(KEYS[2], ARGV[1]) return alarm_due(KEYS[2], ARGV[1])`)
	k := q.KeysOf("obj")
	keys := []string{k.Tag + ":obj", k.Alarms}
	due := t0.Add(time.Minute)
	if head, err := arm.Run(ctx, rdb, keys, "obj", due.UnixMilli()).Int(); err != nil || head != 1 {
		t.Fatalf("arm = %d, %v; want 1 (the only alarm is the head)", head, err)
	}
	if got, ok, err := q.Get(ctx, "obj"); err != nil || !ok || !got.Equal(due) {
		t.Fatalf("Get(obj) = %v, %v, %v; want %v", got, ok, err, due)
	}
	if err := q.Set(ctx, "sooner", t0); err != nil {
		t.Fatal(err)
	}
	if head, err := arm.Run(ctx, rdb, keys, "obj", due.UnixMilli()).Int(); err != nil || head != 0 {
		t.Fatalf("arm behind an earlier alarm = %d, %v; want 0", head, err)
	}
	if err := arm.Run(ctx, rdb, keys, "obj", "1.5").Err(); !redisx.Refused(err) {
		t.Fatalf("arm with a fractional due time = %v, want a refusal", err)
	}
	if err := disarm.Run(ctx, rdb, keys, "obj").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("disarm = %v, want no alarm left (nil)", err)
	}
	if _, ok, _ := q.Get(ctx, "obj"); ok {
		t.Fatal("Get(obj) after alarm_clear found an alarm")
	}
}

// TestBuryMakesADeadLetter checks the test and drill helper: the dead letter it makes is listed
// with its attempts and error, and replays like one left by a failed retry.
func TestBuryMakesADeadLetter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, _ := testQueue(t, Options{Shards: 2})
	if err := q.Set(ctx, "stuck", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := q.Bury(ctx, "stuck", 7, "payment service down"); err != nil {
		t.Fatalf("Bury: %v", err)
	}
	dead, err := q.DeadLetters(ctx)
	if err != nil || len(dead) != 1 || dead[0].ID != "stuck" || dead[0].Attempts != 7 || dead[0].Error != "payment service down" || dead[0].Shard != q.ShardOf("stuck") {
		t.Fatalf("DeadLetters = %+v, %v; want stuck after 7 attempts with its error", dead, err)
	}
	if _, ok, _ := q.Get(ctx, "stuck"); ok {
		t.Fatal("a buried alarm is still in the queue")
	}
	if ok, err := q.ReplayDead(ctx, "stuck"); err != nil || !ok {
		t.Fatalf("ReplayDead = %v, %v; want true", ok, err)
	}
	if _, ok, _ := q.Get(ctx, "stuck"); !ok {
		t.Fatal("a replayed dead letter has no alarm")
	}
}

// TestMetricsGoOnTheRegistererGiven registers two queues on one fresh registry: both share the
// series (by namespace) and nothing needs the default registry.
func TestMetricsGoOnTheRegistererGiven(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	a, rdb := testQueue(t, Options{Metrics: reg})
	b := twin(t, a, rdb, Options{Metrics: reg})
	a.metrics.acked.Inc()
	b.metrics.acked.Inc()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var acked float64
	for _, mf := range mfs {
		if mf.GetName() == "vigil_alarms_acked_total" {
			for _, m := range mf.GetMetric() {
				acked += m.GetCounter().GetValue()
			}
		}
	}
	if acked != 2 {
		t.Fatalf("vigil_alarms_acked_total on the given registry = %v, want 2", acked)
	}
}
