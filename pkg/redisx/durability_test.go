package redisx_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/usererr"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// durableTimeout is the client timeout of the durability tests: WAIT waits half of it, long
// enough that a replica on a busy machine answers, short enough to keep a paused one cheap.
const durableTimeout = 2 * time.Second

// wantUnavailable fails t unless err is kind and reaches a caller as UNAVAILABLE with kind's
// sentence.
func wantUnavailable(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: err = %v, want %v", what, err, kind)
	}
	st := status.Convert(usererr.Status(context.Background(), nil, "test store", err))
	var ue *usererr.Error
	errors.As(kind, &ue)
	if st.Code() != codes.Unavailable || st.Message() != ue.Msg {
		t.Fatalf("%s: status = %v %q, want UNAVAILABLE %q", what, st.Code(), st.Message(), ue.Msg)
	}
}

// TestReplicaDurability runs a primary with one replica. Under replica durability a write is
// acknowledged only once the replica has it; with the replica paused, every kind of write (a
// pipeline, a single script with its NOSCRIPT re-send, a MULTI/EXEC, a script that only reports
// state another connection wrote) fails as ErrOutcomeUnknown, while an async client's write
// succeeds (the promise switched off); once the replica answers again, writes succeed.
func TestReplicaDurability(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 1, Sentinels: -1})
	primary, replica := s.Nodes()[0], s.Nodes()[1]
	ctx := context.Background()
	open := func(addr string, d redisx.Durability) redis.UniversalClient {
		t.Helper()
		c, err := redisx.Open(ctx, redisx.Config{URL: "redis://" + addr, Durability: d, Timeout: durableTimeout})
		if err != nil {
			t.Fatalf("Open(%s, %s): %v", addr, d, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	durable, async := open(primary, redisx.Replica), open(primary, redisx.Async)
	onReplica := s.NodeClient(t, replica)
	other := s.NodeClient(t, primary) // a connection of its own, with no hook
	prefix := redistest.Prefix(t)
	incr := redisx.NewScript("incr.lua", "return redis.call('INCR', KEYS[1])")
	get := redisx.NewScript("get.lua", "return redis.call('GET', KEYS[1]) -- "+prefix)

	t.Run("acknowledged once on the replica", func(t *testing.T) {
		var n *redis.Cmd
		if _, err := redisx.Pipelined(ctx, durable, []*redisx.Script{incr}, func(p redis.Pipeliner) {
			n = incr.Queue(ctx, p, []string{prefix + ":n"})
			p.Set(ctx, prefix+":set", "v", 0)
		}); err != nil {
			t.Fatalf("Pipelined: %v", err)
		}
		// Read at once, no waiting: the acknowledgment came after the replica had both.
		if v := onReplica.Get(ctx, prefix+":n").Val(); v != fmt.Sprint(n.Val()) {
			t.Fatalf("replica's %s:n = %q right after the acknowledgment, want %v", prefix, v, n.Val())
		}
		if v := onReplica.Get(ctx, prefix+":set").Val(); v != "v" {
			t.Fatalf("replica's %s:set = %q right after the acknowledgment, want v", prefix, v)
		}
		if err := incr.Run(ctx, durable, []string{prefix + ":single"}).Err(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if v := onReplica.Get(ctx, prefix+":single").Val(); v != "1" {
			t.Fatalf("replica's %s:single = %q right after the acknowledgment, want 1", prefix, v)
		}
		// A blocking pop is sent alone (its block is its read timeout), the barrier after it.
		durable.RPush(ctx, prefix+":list", "a")
		if v, err := durable.BLPop(ctx, time.Second, prefix+":list").Result(); err != nil || v[1] != "a" {
			t.Fatalf("BLPOP = %v, %v; want a", v, err)
		}
		if n := onReplica.LLen(ctx, prefix+":list").Val(); n != 0 {
			t.Fatalf("replica's %s:list has %d items right after the pop's acknowledgment, want 0", prefix, n)
		}
	})

	t.Run("a node that is not the primary refuses", func(t *testing.T) {
		wrong := open(replica, redisx.Async)
		wantUnavailable(t, "SET on a replica", wrong.Set(ctx, prefix+":ro", 1, 0).Err(), redisx.ErrNotApplied)
		_, err := redisx.Open(ctx, redisx.Config{URL: "redis://" + replica, Durability: redisx.Replica, Timeout: durableTimeout})
		if err == nil || !strings.Contains(err.Error(), "is a replica") || !strings.Contains(err.Error(), "point Vigil at the primary") {
			t.Fatalf("Open(replica's URL, replica) = %v, want a refusal naming the fix", err)
		}
	})

	s.Pause(t, replica)
	paused := true
	t.Cleanup(func() {
		if paused {
			s.Unpause(t, replica)
		}
	})
	t.Run("replica paused: outcome unknown", func(t *testing.T) {
		_, err := redisx.Pipelined(ctx, durable, []*redisx.Script{incr}, func(p redis.Pipeliner) {
			incr.Queue(ctx, p, []string{prefix + ":n"})
		})
		wantUnavailable(t, "pipelined script", err, redisx.ErrOutcomeUnknown)

		fresh := redisx.NewScript("fresh.lua", "return redis.call('INCR', KEYS[1]) -- never loaded "+prefix)
		wantUnavailable(t, "Run of a script Redis has not seen (EVALSHA, NOSCRIPT, EVAL)",
			fresh.Run(ctx, durable, []string{prefix + ":fresh"}).Err(), redisx.ErrOutcomeUnknown)

		_, err = durable.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, prefix+":tx")
			return nil
		})
		wantUnavailable(t, "MULTI/EXEC", err, redisx.ErrOutcomeUnknown)

		other.RPush(ctx, prefix+":list", "b")
		wantUnavailable(t, "BLPOP", durable.BLPop(ctx, time.Second, prefix+":list").Err(), redisx.ErrOutcomeUnknown)

		// State another connection wrote, which the replica never got: a reply reporting it is
		// not acknowledged either, though its script writes nothing.
		if err := other.Set(ctx, prefix+":elsewhere", "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		wantUnavailable(t, "a script reporting another connection's write",
			get.Run(ctx, durable, []string{prefix + ":elsewhere"}).Err(), redisx.ErrOutcomeUnknown)

		// The promise switched off: async acknowledges what the replica does not have.
		if err := async.Set(ctx, prefix+":async", 1, 0).Err(); err != nil {
			t.Fatalf("async SET with the replica paused: %v, want success", err)
		}
	})
	s.Unpause(t, replica)
	paused = false

	t.Run("replica back: acknowledged again", func(t *testing.T) {
		wait.For(t, "a durable write once the replica answers again", func() error {
			return durable.Set(ctx, prefix+":after", 1, 0).Err()
		})
		if v := onReplica.Get(ctx, prefix+":elsewhere").Val(); v != "x" {
			t.Fatalf("replica's %s:elsewhere = %q after the barrier's acknowledgment, want x", prefix, v)
		}
	})
}

// TestFencedPrimaryRefusesWrites: a primary with min-replicas-to-write 1 whose replica is gone
// refuses writes (NOREPLICAS); Vigil reports them as ErrNotApplied, and nothing was written.
func TestFencedPrimaryRefusesWrites(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 1, Sentinels: -1,
		NodeArgs: []string{"--min-replicas-to-write", "1", "--min-replicas-max-lag", "2"}})
	primary, replica := s.Nodes()[0], s.Nodes()[1]
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	clients := map[redisx.Durability]redis.UniversalClient{}
	for _, d := range []redisx.Durability{redisx.Async, redisx.Replica} {
		// Opened while the replica is there: replica durability refuses to start without one.
		c, err := redisx.Open(ctx, redisx.Config{URL: "redis://" + primary, Durability: d, Timeout: durableTimeout})
		if err != nil {
			t.Fatalf("Open(%s): %v", d, err)
		}
		defer c.Close()
		clients[d] = c
	}
	s.Kill(t, replica)
	raw := s.NodeClient(t, primary)
	wait.For(t, "the primary refusing writes without its replica", func() error {
		if err := raw.Set(ctx, prefix+":probe", 1, 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOREPLICAS") {
			return fmt.Errorf("SET = %v, want NOREPLICAS", err)
		}
		return nil
	})
	incr := redisx.NewScript("incr.lua", "return redis.call('INCR', KEYS[1])")
	for d, c := range clients {
		key := fmt.Sprintf("%s:%s", prefix, d)
		_, err := redisx.Pipelined(ctx, c, []*redisx.Script{incr}, func(p redis.Pipeliner) {
			incr.Queue(ctx, p, []string{key})
		})
		wantUnavailable(t, string(d)+" pipelined script", err, redisx.ErrNotApplied)
		wantUnavailable(t, string(d)+" Run", incr.Run(ctx, c, []string{key}).Err(), redisx.ErrNotApplied)
		wantUnavailable(t, string(d)+" SET", c.Set(ctx, key, 1, 0).Err(), redisx.ErrNotApplied)
		if n := raw.Exists(ctx, key).Val(); n != 0 {
			t.Fatalf("%s exists after writes refused as not applied", key)
		}
	}
}

// waitCalls is how many WAIT commands the Redis at c has run (INFO commandstats).
func waitCalls(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_wait:calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			var calls int
			if _, err := fmt.Sscan(n, &calls); err != nil {
				t.Fatalf("INFO commandstats line %q: %v", line, err)
			}
			return calls
		}
	}
	return 0
}

// TestConcurrentWritesShareWait: 64 writers of single writes on one primary each have their
// write on the replica when it is acknowledged, and share barriers and WAITs: Redis runs far
// fewer WAITs than there were writes (one per write before group commit). With the replica
// paused mid-load, every write acknowledged while it is paused fails as ErrOutcomeUnknown,
// and no round goroutine outlives the load.
func TestConcurrentWritesShareWait(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 1, Sentinels: -1})
	primary, replica := s.Nodes()[0], s.Nodes()[1]
	ctx := context.Background()
	durable, err := redisx.Open(ctx, redisx.Config{URL: "redis://" + primary, Durability: redisx.Replica, Timeout: durableTimeout, PoolSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer durable.Close()
	onPrimary, onReplica := s.NodeClient(t, primary), s.NodeClient(t, replica)
	prefix := redistest.Prefix(t)
	const writers, each = 64, 20

	t.Run("every write confirmed, WAITs shared", func(t *testing.T) {
		before := waitCalls(t, onPrimary)
		errs := make(chan error, writers)
		for w := range writers {
			go func() {
				for i := range each {
					key := fmt.Sprintf("%s:%d:%d", prefix, w, i)
					if err := durable.Set(ctx, key, i, 0).Err(); err != nil {
						errs <- fmt.Errorf("SET %s: %w", key, err)
						return
					}
					if v, err := onReplica.Get(ctx, key).Result(); err != nil || v != fmt.Sprint(i) {
						errs <- fmt.Errorf("replica's %s = %q, %v right after the acknowledgment, want %d", key, v, err, i)
						return
					}
				}
				errs <- nil
			}()
		}
		for range writers {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		waits := waitCalls(t, onPrimary) - before
		if writes := writers * each; waits > writes/2 {
			t.Fatalf("Redis ran %d WAITs for %d acknowledged writes of %d writers, want at most %d (shared)", waits, writes, writers, writes/2)
		}
	})

	t.Run("replica paused: no write acknowledged", func(t *testing.T) {
		// phase: 0 before the pause, 1 while paused, 2 once unpausing.
		var phase atomic.Int32
		var unknown, acknowledged, wrong atomic.Int64
		stop := make(chan struct{})
		errs := make(chan error, writers)
		for w := range writers {
			go func() {
				var first error
				defer func() { errs <- first }()
				for {
					select {
					case <-stop:
						return
					default:
					}
					started := phase.Load()
					err := durable.Incr(ctx, fmt.Sprintf("%s:paused:%d", prefix, w)).Err()
					ended := phase.Load()
					switch {
					case err == nil && started == 1 && ended == 1:
						wrong.Add(1)
						first = cmp.Or(first, fmt.Errorf("writer %d: INCR acknowledged while the replica was paused", w))
					case err == nil:
						acknowledged.Add(1)
					case errors.Is(err, redisx.ErrOutcomeUnknown):
						unknown.Add(1)
					default:
						wrong.Add(1)
						first = cmp.Or(first, fmt.Errorf("writer %d: INCR = %v, want success or ErrOutcomeUnknown", w, err))
					}
				}
			}()
		}
		wait.Until(t, "writes acknowledged before the pause", func() bool { return acknowledged.Load() >= writers })
		s.Pause(t, replica)
		phase.Store(1)
		wait.Until(t, "two writes of every writer left unknown (or acknowledged) with the replica paused", func() bool {
			return unknown.Load() >= 2*writers || wrong.Load() > 0
		})
		phase.Store(2)
		s.Unpause(t, replica)
		after := acknowledged.Load()
		wait.Until(t, "writes acknowledged again", func() bool { return acknowledged.Load() > after || wrong.Load() > 0 })
		close(stop)
		for range writers {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		wait.Until(t, "no goroutine running a round", func() bool { return redisx.RoundRunners() == 0 })
	})
}

// TestWriteInFlightRoundNotConfirmed: a write whose reply comes while a round is in flight is
// not confirmed by that round. The replica is paused once round A's WAIT has answered (the
// replica has A's write) but before A's round is over; write B, made then, joins the next
// round and fails as ErrOutcomeUnknown (the replica does not have it), while A succeeds.
func TestWriteInFlightRoundNotConfirmed(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 1, Sentinels: -1})
	primary, replica := s.Nodes()[0], s.Nodes()[1]
	ctx := context.Background()
	durable, err := redisx.Open(ctx, redisx.Config{URL: "redis://" + primary, Durability: redisx.Replica, Timeout: durableTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer durable.Close()
	onReplica := s.NodeClient(t, replica)
	prefix := redistest.Prefix(t)
	paused := false
	defer func() {
		if paused {
			s.Unpause(t, replica)
		}
	}()
	b := make(chan error, 1)
	var once sync.Once
	inA := redisx.WithRoundFinished(ctx, func() {
		once.Do(func() {
			s.Pause(t, replica)
			paused = true
			joined := make(chan struct{})
			go func() {
				b <- durable.Set(redisx.WithRoundJoined(ctx, func() { close(joined) }), prefix+":b", "b", 0).Err()
			}()
			// B's reply is in and B has joined a round while A's is still in flight. (Were B
			// to take A's outcome, it would already have it, and fail the test below.)
			select {
			case <-joined:
			case err := <-b:
				b <- err
			}
		})
	})
	if err := durable.Set(inA, prefix+":a", "a", 0).Err(); err != nil {
		t.Fatalf("SET a, confirmed before the replica was paused: %v", err)
	}
	wantUnavailable(t, "SET b, made while A's round was in flight", <-b, redisx.ErrOutcomeUnknown)
	s.Unpause(t, replica)
	paused = false
	if v := onReplica.Get(ctx, prefix+":a").Val(); v != "a" {
		t.Fatalf("replica's %s:a = %q after A's acknowledgment, want a", prefix, v)
	}
}
