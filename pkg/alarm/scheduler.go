package alarm

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/tracing"
)

// Run schedules the queue's alarms until ctx ends: one loop per shard sleeps until its earliest
// alarm is due (or a wake-up hint arrives), claims due alarms in batches, hands them to h and
// acknowledges or retries each one. Any number of processes may Run the same queue at once.
func (q *Queue) Run(ctx context.Context, h Handler) error {
	wakes := make([]chan struct{}, q.o.Shards)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	q.mu.Lock()
	q.wakes = wakes
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.wakes = nil
		q.mu.Unlock()
	}()

	// Subscribe before the first drain. A hint published after a shard's drain found nothing
	// but before the subscription was live would be lost, and the shard would sleep up to
	// MaxSleep past an alarm set just then.
	sub := q.subscribe(ctx)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { q.listenForHints(ctx, sub); return nil })
	for shard := range q.o.Shards {
		g.Go(func() error { q.runShard(ctx, shard, wakes[shard], h); return nil })
	}
	return g.Wait()
}

// subscribeWait bounds how long Run waits for Redis to confirm the hints subscription.
const subscribeWait = 5 * time.Second

// subscribe subscribes to the queue's wake-up hints and waits, up to subscribeWait, until Redis
// has confirmed it (Subscribe alone returns before). If Redis does not answer, the shards start
// anyway: the subscription is completed or retried as the hints are read, and until then the
// shards wake every MaxSleep.
func (q *Queue) subscribe(ctx context.Context) *redis.PubSub {
	sub := q.rdb.Subscribe(ctx, wakeChannel(q.o.Prefix, q.o.Namespace))
	if _, err := sub.ReceiveTimeout(ctx, subscribeWait); err != nil && ctx.Err() == nil {
		q.o.Logger.Warn("alarm wake-up hints not subscribed yet; shards poll until they are", "event", "alarm_subscribe_error", "ns", q.o.Namespace, "err", err)
	}
	return sub
}

// listenForHints relays other processes' wake-up hints to the local shard loops.
func (q *Queue) listenForHints(ctx context.Context, sub *redis.PubSub) {
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			if shard, err := strconv.Atoi(m.Payload); err == nil {
				q.wakeLocal(shard)
			}
		}
	}
}

func (q *Queue) runShard(ctx context.Context, shard int, wake <-chan struct{}, h Handler) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	for {
		next, err := q.drain(ctx, shard, h)
		sleep := q.jittered(q.o.MaxSleep)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			failures++
			q.o.Logger.Error("alarm scheduler failed", "event", "alarm_scheduler_error", "ns", q.o.Namespace, "shard", shard, "err", err)
			sleep = min(sleep, q.jittered(time.Duration(min(failures, 6))*100*time.Millisecond))
		default:
			failures = 0
			if !next.IsZero() {
				sleep = min(sleep, next.Sub(q.o.Now()))
			}
		}
		if sleep <= 0 {
			continue
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		}
	}
}

func (q *Queue) jittered(d time.Duration) time.Duration {
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// drain claims and handles batches until fewer than a full batch is due, and returns when the
// shard's earliest remaining alarm is due (zero when the shard is empty).
func (q *Queue) drain(ctx context.Context, shard int, h Handler) (time.Time, error) {
	var retryAt time.Time // the earliest retry scheduled by this drain
	for {
		batch, lease, next, err := q.claimDue(ctx, shard)
		if err != nil || len(batch) == 0 {
			return earliest(next, retryAt), err
		}
		r, err := q.handle(ctx, shard, batch, lease, h)
		retryAt = earliest(retryAt, r)
		// The head seen by the claim is stale now: the retries just scheduled may come first.
		next = earliest(next, retryAt)
		if err != nil || len(batch) < q.o.BatchSize {
			return next, err
		}
	}
}

// earliest is the earlier of two times, where zero means "none".
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// claimDue leases up to BatchSize due alarms of shard in one script.
func (q *Queue) claimDue(ctx context.Context, shard int) (batch []Firing, lease string, next time.Time, err error) {
	now := q.o.Now()
	lease = q.fractionalScore(now.Add(q.o.Lease))
	k := q.Keys(shard)
	res, err := q.claim.Run(ctx, q.rdb, []string{k.Alarms, k.Attempts, k.InFlight}, now.UnixMilli(), lease, q.o.BatchSize).Slice()
	if err != nil {
		return nil, "", time.Time{}, fmt.Errorf("claim shard %d: %w", shard, err)
	}
	if head, _ := res[0].(string); head != "" {
		if f, err := strconv.ParseFloat(head, 64); err == nil {
			next = time.UnixMilli(int64(math.Ceil(f)))
		}
	}
	for i := 1; i+2 < len(res); i += 3 {
		id, _ := res[i].(string)
		attempt, _ := res[i+1].(int64)
		dueStr, _ := res[i+2].(string)
		dueF, _ := strconv.ParseFloat(dueStr, 64)
		due := time.UnixMilli(int64(math.Floor(dueF)))
		batch = append(batch, Firing{ID: id, Shard: shard, Attempt: int(attempt), Due: due})
		q.metrics.lateness.Observe(now.Sub(due).Seconds())
		if attempt > 1 {
			q.metrics.refired.Inc()
		}
	}
	q.metrics.claimed.Add(float64(len(batch)))
	return batch, lease, next, nil
}

// settleTimeout bounds the acks and retries of a batch whose handler ran past the end of Run's
// context: work already done is still acknowledged while the process shuts down.
const settleTimeout = 5 * time.Second

// handle runs the handler on a claimed batch, then acknowledges the successes in one script
// and retries or dead-letters the failures. It returns when the earliest retry it scheduled
// is due (zero when none).
func (q *Queue) handle(ctx context.Context, shard int, batch []Firing, lease string, h Handler) (time.Time, error) {
	// With tracing on, a batch is one trace: the handler's calls and the ack are its children.
	ctx, span := tracing.Tracer().Start(ctx, "alarms "+q.o.Namespace, trace.WithAttributes(
		attribute.String("vigil.alarm.ns", q.o.Namespace), attribute.Int("vigil.alarm.shard", shard),
		attribute.Int("vigil.alarm.batch", len(batch))))
	defer span.End()
	errs := q.safeHandle(ctx, h, batch)
	stopping := ctx.Err() != nil
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	k := q.Keys(shard)
	ackArgs := make([]any, 0, len(batch)+1)
	ackArgs = append(ackArgs, lease)
	var failed []int
	for i, f := range batch {
		if i < len(errs) && errs[i] != nil {
			failed = append(failed, i)
			continue
		}
		ackArgs = append(ackArgs, f.ID)
	}
	if len(ackArgs) > 1 {
		if err := q.ack.Run(ctx, q.rdb, []string{k.Alarms, k.Attempts, k.InFlight}, ackArgs...).Err(); err != nil {
			// The lease will run out and the alarms fire again; handlers are idempotent.
			return time.Time{}, fmt.Errorf("ack shard %d: %w", shard, err)
		}
		q.metrics.acked.Add(float64(len(ackArgs) - 1))
	}
	if stopping {
		// A handler cut short by shutdown did not fail: its alarms stay leased and fire
		// again when the lease runs out, without spending a retry.
		return time.Time{}, nil
	}
	var retryAt time.Time
	for _, i := range failed {
		at, err := q.fail(ctx, k, batch[i], lease, errs[i])
		if err != nil {
			return retryAt, err
		}
		retryAt = earliest(retryAt, at)
	}
	return retryAt, nil
}

// safeHandle turns a handler panic into an error for every firing of the batch.
func (q *Queue) safeHandle(ctx context.Context, h Handler, batch []Firing) (errs []error) {
	defer func() {
		if r := recover(); r != nil {
			errs = make([]error, len(batch))
			for i := range errs {
				errs[i] = fmt.Errorf("alarm handler panicked: %v", r)
			}
		}
	}()
	return h.HandleAlarms(ctx, batch)
}

// DeadLetter is an alarm that failed every retry.
type DeadLetter struct {
	// ID is the object whose alarm died.
	ID string `json:"id"`
	// Shard is the object's shard.
	Shard int `json:"shard"`
	// Attempts made before it was dead-lettered.
	Attempts int `json:"attempts"`
	// Error is the last attempt's error.
	Error string `json:"error"`
	// At is when it was dead-lettered.
	At time.Time `json:"-"`
}

// fail retries a failed firing after its backoff, or dead-letters it after its last attempt.
// It returns when the retry is due (zero when there is none).
func (q *Queue) fail(ctx context.Context, k ShardKeys, f Firing, lease string, cause error) (time.Time, error) {
	now := q.o.Now()
	dead := f.Attempt > q.o.MaxRetries
	backoff := q.o.RetryBase << min(f.Attempt-1, 30)
	info := deadInfo(f.ID, f.Shard, f.Attempt, cause.Error())
	deadFlag := "0"
	if dead {
		deadFlag = "1"
	}
	retryAt := now.Add(backoff)
	res, err := q.retry.Run(ctx, q.rdb, []string{k.Alarms, k.Attempts, k.Dead, k.DeadInfo, k.InFlight},
		lease, f.ID, q.fractionalScore(retryAt), deadFlag, now.UnixMilli(), info).Int()
	if err != nil {
		return time.Time{}, fmt.Errorf("retry %q: %w", f.ID, err)
	}
	switch res {
	case 1:
		q.metrics.retried.Inc()
		q.o.Logger.Warn("alarm failed; will retry", "event", "alarm_retry", "ns", q.o.Namespace, "id", f.ID,
			"attempt", f.Attempt, "retryIn", backoff.String(), "err", cause)
		// The retry score is retryAt's ms plus a fraction: it is claimable from the next ms.
		return time.UnixMilli(retryAt.UnixMilli() + 1), nil
	case 2:
		q.metrics.dead.Inc()
		q.o.Logger.Error("alarm dead-lettered", "event", "alarm_dead", "ns", q.o.Namespace, "id", f.ID,
			"attempts", f.Attempt, "err", cause)
	}
	return time.Time{}, nil
}

// deadInfo is a dead letter's details as retry.lua stores them.
func deadInfo(id string, shard, attempts int, cause string) string {
	b, _ := json.Marshal(DeadLetter{ID: id, Shard: shard, Attempts: attempts, Error: cause})
	return string(b)
}

// Bury dead-letters object id's alarm now, recording attempts and cause as a last failed retry
// would, whether or not the object had an alarm. It is for tests and operators' drills that
// need a dead letter without waiting out the retries; it goes through the same script as a
// real dead letter, so what DeadLetters, ReplayDead and DiscardDead see is the same.
func (q *Queue) Bury(ctx context.Context, id string, attempts int, cause string) error {
	k := q.KeysOf(id)
	now := q.o.Now()
	lease := q.fractionalScore(now.Add(time.Hour)) // out of every claim's reach meanwhile
	score, _ := strconv.ParseFloat(lease, 64)
	// Leased as a claim would lease it, and counted in flight, which the dead-lettering ends.
	if _, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, k.Alarms, redis.Z{Score: score, Member: id})
		p.Incr(ctx, k.InFlight)
		return nil
	}); err != nil {
		return fmt.Errorf("bury %q: %w", id, err)
	}
	err := q.retry.Run(ctx, q.rdb, []string{k.Alarms, k.Attempts, k.Dead, k.DeadInfo, k.InFlight},
		lease, id, lease, "1", now.UnixMilli(), deadInfo(id, q.ShardOf(id), attempts, cause)).Err()
	if err != nil {
		return fmt.Errorf("bury %q: %w", id, err)
	}
	return nil
}

// DeadLetters lists the dead letters of every shard, oldest first within a shard.
func (q *Queue) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	var out []DeadLetter
	for shard := range q.o.Shards {
		k := q.Keys(shard)
		ids, err := q.rdb.ZRangeWithScores(ctx, k.Dead, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("list dead letters: %w", err)
		}
		if len(ids) == 0 {
			continue
		}
		members := make([]string, len(ids))
		for i, z := range ids {
			members[i], _ = z.Member.(string)
		}
		// One read for the shard's details, not one per dead letter.
		infos, err := q.rdb.HMGet(ctx, k.DeadInfo, members...).Result()
		if err != nil {
			return nil, fmt.Errorf("read dead letters: %w", err)
		}
		for i, z := range ids {
			d := DeadLetter{ID: members[i], Shard: shard, At: time.UnixMilli(int64(z.Score))}
			if raw, ok := infos[i].(string); ok {
				_ = json.Unmarshal([]byte(raw), &d)
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// ReplayDead moves object id's dead letter back into the queue, due now, with its attempt
// count reset. It reports false when id is not a dead letter.
func (q *Queue) ReplayDead(ctx context.Context, id string) (bool, error) {
	k := q.KeysOf(id)
	n, err := q.revive.Run(ctx, q.rdb, []string{k.Alarms, k.Attempts, k.Dead, k.DeadInfo}, id, q.o.Now().UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("replay dead letter %q: %w", id, err)
	}
	if n == 1 {
		q.Wake(ctx, q.ShardOf(id))
	}
	return n == 1, nil
}

// DiscardDead drops object id's dead letter. It reports false when id is not a dead letter.
func (q *Queue) DiscardDead(ctx context.Context, id string) (bool, error) {
	k := q.KeysOf(id)
	n, err := q.revive.Run(ctx, q.rdb, []string{k.Alarms, k.Attempts, k.Dead, k.DeadInfo}, id, "").Int()
	if err != nil {
		return false, fmt.Errorf("discard dead letter %q: %w", id, err)
	}
	return n == 1, nil
}

// Pending counts the alarms of each shard (due or not, leased included).
func (q *Queue) Pending(ctx context.Context) ([]int64, error) {
	out := make([]int64, q.o.Shards)
	for shard := range q.o.Shards {
		n, err := q.rdb.ZCard(ctx, q.Keys(shard).Alarms).Result()
		if err != nil {
			return nil, fmt.Errorf("count alarms: %w", err)
		}
		out[shard] = n
	}
	return out, nil
}

// Scripts are the queue's Lua scripts, for loading before a pipeline uses them.
func (q *Queue) Scripts() []*redisx.Script { return q.scripts }
