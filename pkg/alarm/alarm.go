// Package alarm is Vigil's alarm queue: one alarm slot per named object, stored in Redis sorted
// sets spread over hash-tagged shards, fired at least once by schedulers that claim due alarms
// with a lease and acknowledge them with a compare-and-set.
//
// Alarms set by domains are due times in whole milliseconds. A claim re-scores the alarms it
// takes to its lease score, which always has a fractional part unique to that claim; an ack
// removes an alarm only while it still has that score. So an alarm re-armed by its object while
// it was being handled survives the ack, and a crashed scheduler's alarms fire again when their
// lease runs out.
package alarm

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redisx"
)

var (
	//go:embed claim.lua
	claimLua string
	//go:embed ack.lua
	ackLua string
	//go:embed retry.lua
	retryLua string
	//go:embed revive.lua
	reviveLua string
	//go:embed set.lua
	setLua string
	//go:embed lib.lua
	libLua string
)

// Lua is the alarm contract for domain scripts (lib.lua): alarm_set, alarm_clear,
// alarm_clear_all, alarm_due and alarm_int, Lua functions that set and clear an object's alarm
// by the queue's score rules. Domain scripts use it through NewScript instead of writing ZADD
// and ZREM on the alarm set themselves; a domain with a prelude of its own passes
// NewScript(name, prelude+src).
func Lua() string { return libLua }

// NewScript is redisx.NewScript(name, src) with the alarm contract (Lua) in front of src, so
// src may call alarm_set, alarm_clear, alarm_clear_all, alarm_due and alarm_int.
func NewScript(name, src string) *redisx.Script { return redisx.NewScript(name, libLua+src) }

// Options configure a Queue. Every zero value has the default given in its comment.
type Options struct {
	// Prefix starts every key; tests give each test its own. Default "vigil".
	Prefix string
	// Namespace names the domain, e.g. "reservations". Required.
	Namespace string
	// Shards is the number of shards; fixed per deployment. Default 16.
	Shards int
	// Lease is how long a claimed alarm stays invisible before it fires again. Default 15s.
	Lease time.Duration
	// BatchSize is the most alarms one claim takes. Default 256.
	BatchSize int
	// RetryBase is the first retry's backoff; each later retry doubles it. Default 2s.
	RetryBase time.Duration
	// MaxRetries after the first attempt before an alarm is dead-lettered. Default 6.
	MaxRetries int
	// MaxSleep caps how long a scheduler sleeps when no alarm is due sooner; it is jittered
	// by up to 20%. It bounds lateness only if a wake-up hint is lost. Default 2s.
	MaxSleep time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives scheduler errors. Default slog.Default().
	Logger *slog.Logger
	// Metrics is where the queue's counters and lateness histogram are registered (queues on
	// one Registerer share them, labelled by namespace). Default prometheus.DefaultRegisterer.
	Metrics prometheus.Registerer
}

func (o *Options) setDefaults() error {
	if o.Namespace == "" {
		return errors.New("alarm: Namespace is required")
	}
	if o.Prefix == "" {
		o.Prefix = "vigil"
	}
	if o.Shards <= 0 {
		o.Shards = 16
	}
	if o.Lease <= 0 {
		o.Lease = 15 * time.Second
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 256
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 2 * time.Second
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 6
	}
	if o.MaxSleep <= 0 {
		o.MaxSleep = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = prometheus.DefaultRegisterer
	}
	return nil
}

// Firing is one alarm handed to a Handler.
type Firing struct {
	// ID is the object whose alarm fired.
	ID string
	// Shard is the object's shard.
	Shard int
	// Attempt is 1 on the first firing of this alarm, 2 on the first retry, and so on.
	Attempt int
	// Due is when the alarm was due (for a retry: when the retry was due).
	Due time.Time
}

// IsRetry reports whether an earlier attempt of this alarm was claimed and not acknowledged.
func (f Firing) IsRetry() bool { return f.Attempt > 1 }

// RetryCount is the number of earlier attempts.
func (f Firing) RetryCount() int { return f.Attempt - 1 }

// Handler runs the effect of due alarms. It gets a batch from one shard and returns one error
// per firing, in order (a nil slice means all succeeded). A firing with a nil error is
// acknowledged; one with an error is retried with backoff. Handlers must be idempotent: an
// alarm fires at least once.
type Handler interface {
	HandleAlarms(ctx context.Context, batch []Firing) []error
}

// HandlerFunc adapts a function that handles one firing at a time.
type HandlerFunc func(ctx context.Context, f Firing) error

// HandleAlarms calls f for each firing in turn.
func (f HandlerFunc) HandleAlarms(ctx context.Context, batch []Firing) []error {
	var errs []error
	for i, fi := range batch {
		if err := f(ctx, fi); err != nil {
			if errs == nil {
				errs = make([]error, len(batch))
			}
			errs[i] = err
		}
	}
	return errs
}

// Queue is the alarm queue of one namespace.
type Queue struct {
	rdb     redis.UniversalClient
	o       Options
	scripts []*redisx.Script
	claim   *redisx.Script
	ack     *redisx.Script
	retry   *redisx.Script
	revive  *redisx.Script
	set     *redisx.Script
	metrics *queueMetrics

	mu    sync.Mutex
	wakes []chan struct{} // one per shard while Run is active
}

// New returns a Queue on rdb.
func New(rdb redis.UniversalClient, o Options) (*Queue, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	metrics, err := metricsFor(o.Metrics, o.Namespace)
	if err != nil {
		return nil, err
	}
	q := &Queue{
		rdb:     rdb,
		o:       o,
		claim:   redisx.NewScript("claim.lua", claimLua),
		ack:     redisx.NewScript("ack.lua", ackLua),
		retry:   redisx.NewScript("retry.lua", retryLua),
		revive:  redisx.NewScript("revive.lua", reviveLua),
		set:     NewScript("set.lua", setLua),
		metrics: metrics,
	}
	q.scripts = []*redisx.Script{q.claim, q.ack, q.retry, q.revive, q.set}
	return q, nil
}

// Namespace is the queue's namespace.
func (q *Queue) Namespace() string { return q.o.Namespace }

// Metrics is the Registerer the queue's metrics are on (Options.Metrics); pkg/alarmadmin puts
// its gauges of the queue's state beside them.
func (q *Queue) Metrics() prometheus.Registerer { return q.o.Metrics }

// Shards is the number of shards.
func (q *Queue) Shards() int { return q.o.Shards }

// ShardOf is the shard that object id lives in.
func (q *Queue) ShardOf(id string) int { return shardOf(id, q.o.Shards) }

// Keys are the keys of one shard.
func (q *Queue) Keys(shard int) ShardKeys { return shardKeys(q.o.Prefix, q.o.Namespace, shard) }

// KeysOf are the keys of the shard that object id lives in.
func (q *Queue) KeysOf(id string) ShardKeys { return q.Keys(q.ShardOf(id)) }

// Set sets (replaces) object id's alarm to fire at due. Due times are whole milliseconds; a
// due time between two is rounded up, so the alarm never fires before due.
func (q *Queue) Set(ctx context.Context, id string, due time.Time) error {
	shard := q.ShardOf(id)
	head, err := q.set.Run(ctx, q.rdb, []string{q.Keys(shard).Alarms}, id, ceilMilli(due)).Int()
	if err != nil {
		return fmt.Errorf("set alarm %q: %w", id, err)
	}
	if head == 1 {
		q.Wake(ctx, shard)
	}
	return nil
}

// Delete removes object id's alarm, if any.
func (q *Queue) Delete(ctx context.Context, id string) error {
	if err := q.set.Run(ctx, q.rdb, []string{q.KeysOf(id).Alarms}, id, "").Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("delete alarm %q: %w", id, err)
	}
	return nil
}

// Get returns when object id's alarm is due; ok is false when it has none. While the alarm is
// leased or waiting for a retry, this is when it fires next.
func (q *Queue) Get(ctx context.Context, id string) (due time.Time, ok bool, err error) {
	s, err := q.rdb.ZScore(ctx, q.KeysOf(id).Alarms, id).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("get alarm %q: %w", id, err)
	}
	return time.UnixMilli(int64(math.Floor(s))), true, nil
}

// Wake tells the schedulers of shard that its earliest alarm moved earlier: the local one
// directly, the others through Redis pub/sub. Domains call it when a state-changing script
// reports that the object's new alarm is its shard's head.
func (q *Queue) Wake(ctx context.Context, shard int) {
	q.wakeLocal(shard)
	if err := q.rdb.Publish(ctx, wakeChannel(q.o.Prefix, q.o.Namespace), strconv.Itoa(shard)).Err(); err != nil {
		// Only a hint: the scheduler's capped sleep still finds the alarm.
		q.o.Logger.Warn("alarm wake hint not published", "event", "alarm_wake_failed", "ns", q.o.Namespace, "err", err)
	}
}

func (q *Queue) wakeLocal(shard int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if shard < 0 || shard >= len(q.wakes) {
		return
	}
	select {
	case q.wakes[shard] <- struct{}{}:
	default:
	}
}

// ceilMilli is t in Unix milliseconds, rounded up.
func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// fractionalScore is at (in ms) plus a random fraction in (0,1): a score no domain ever sets, and
// unlikely to repeat between two claims. A whole-ms time below 2^43 (the year 2248) plus a
// multiple of 1/1024 needs at most 53 bits, so it is exact in a float64 (and a Redis score).
func (q *Queue) fractionalScore(at time.Time) string {
	frac := float64(1+rand.IntN(1023)) / 1024
	return strconv.FormatFloat(float64(at.UnixMilli())+frac, 'f', -1, 64)
}
