package redisx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Durability says when a write Vigil reports as done is done: Config.Durability.
type Durability string

const (
	// Async acknowledges a write once the primary applied it, as Redis does by itself: a
	// primary lost before its replicas (or its disk, under appendfsync everysec) had a write
	// loses that acknowledged write.
	Async Durability = "async"
	// Replica acknowledges a write once at least one replica has it (WAIT 1 after a barrier
	// write sent to the same server once the write's reply is in, shared by the writes that
	// completed meanwhile): the loss of any one node loses nothing acknowledged.
	// Open refuses a primary (any Cluster master) without a connected replica.
	Replica Durability = "replica"
	// Fsync is Replica, and on disk: WAITAOF on Redis 7.2 and newer; on older Redis every node
	// must run appendonly yes, appendfsync always and no-appendfsync-on-rewrite no (Open
	// checks). On one Redis with no replica it is exactly that check, and no WAIT.
	Fsync Durability = "fsync"
)

// ParseDurability reads a durability setting; "" is Async.
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(strings.ToLower(strings.TrimSpace(s))); d {
	case "":
		return Async, nil
	case Async, Replica, Fsync:
		return d, nil
	}
	return "", fmt.Errorf("redis durability %q: want async (acknowledge once the primary has a write), "+
		"replica (once a replica has it too) or fsync (once it is on disk as well)", s)
}

// ErrNotApplied is a write the store refused: a primary cut off from its replicas
// (NOREPLICAS, min-replicas-to-write) or a node that is no longer the primary (READONLY).
// Nothing was changed; sending the same request again is safe. It is a usererr.ErrUnavailable
// (UNAVAILABLE, 503) with its own sentence.
var ErrNotApplied = usererr.ErrNotApplied

// ErrOutcomeUnknown is a write the store applied on its primary but did not confirm, in time,
// to be on a replica (or on disk) as Config.Durability asks: WAIT timed out, or the barrier
// before it failed. It may or may not survive a failover; the caller sends the same request
// again (same ids) to learn which. A usererr.ErrUnavailable with its own sentence.
var ErrOutcomeUnknown = usererr.ErrOutcomeUnknown

// storeRefusal is one command's failure as ErrNotApplied or ErrOutcomeUnknown, keeping what
// Redis said (for logs and errors.As) beside the kind the transport maps.
type storeRefusal struct {
	kind  error
	cause error
}

func (e *storeRefusal) Error() string   { return fmt.Sprintf("%v (%v)", e.kind, e.cause) }
func (e *storeRefusal) Unwrap() []error { return []error{e.kind, e.cause} }

// notApplied reports whether err is Redis refusing a write before making it: NOREPLICAS (too
// few good replicas, min-replicas-to-write) or READONLY (the node is a replica now). Inside a
// script the reply keeps the code, followed by the script's name.
func notApplied(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "NOREPLICAS") || strings.HasPrefix(msg, "READONLY")
}

// asNotApplied turns a NOREPLICAS or READONLY reply into ErrNotApplied; any other error
// stays as it is.
func asNotApplied(err error) error {
	if notApplied(err) {
		return &storeRefusal{kind: ErrNotApplied, cause: err}
	}
	return err
}

// policy is what the durability hook of every node of one client does after a write. Open
// sets it once its start-up checks know the topology; until then (the checks' own commands)
// it waits for nothing.
type policy struct {
	// replicas is how many replicas must have a write (WAIT n), 0 for none.
	replicas atomic.Int32
	// aof asks WAITAOF 1 <replicas> instead of WAIT: Redis 7.2 or newer under fsync.
	aof atomic.Bool
	// wait is the WAIT timeout: half the client's read timeout, so that a WAIT that times out
	// is answered well before the read does.
	wait time.Duration
	// cluster: the barrier key takes the hash tag of a key of the batch, so that it is served
	// by the node the batch was sent to.
	cluster bool
}

func (p *policy) waits() bool { return p.replicas.Load() > 0 || p.aof.Load() }

// barrierKey is the key of the barrier write on one server: any key will do.
const barrierKey = "vigil:barrier"

// durabilityHook makes a node client's writes as durable as the policy asks, and turns
// refusals into ErrNotApplied. It is installed on each node client (a single server's or
// failover client, or each node of a ClusterClient through OnNewNode), so that it sees one
// node's commands: a batch that holds a write is confirmed by a barrier write and WAIT (or
// WAITAOF) on that node, shared with the node's other writers when it can be (group).
//
// Why the barrier: WAIT covers the connection's write offset. Redis 7.0 (Debian's) moves it to
// the primary's after every command, but the promise WAIT documents is only the connection's
// own writes, and a Redis that moves it only on propagation would let a script that found
// earlier state (written by another connection) and wrote nothing WAIT on nothing. A write on
// the same connection sets the offset to the primary's whatever the version, which covers
// every earlier write by any connection, so the reply's state is covered too.
type durabilityHook struct {
	client *redis.Client
	p      *policy
	g      group
	// servers keeps a round to writes made on the server of its barrier.
	servers servers
}

// group is one node's group commit of confirmations, as a database groups its log's fsyncs:
// while maxRounds barriers and WAITs are in flight, writes that complete queue for the next
// round, which one barrier and WAIT confirm together once a round in flight has answered. Under load a
// node runs one WAIT per round trip to its replica, not one per write, and a writer holds no
// connection while its round waits for the replica.
//
// Why one WAIT can confirm writes other connections made: Redis runs commands one at a time,
// so a write whose reply a client has received is in the replication stream before any command
// sent after that reply, the round's barrier SET among them; WAIT on the barrier's connection
// returns once the replicas have the stream up to the barrier, hence every such write, and any
// state a reply reported (as for a batch's own barrier, above). So a write may join only a
// round whose barrier is not sent yet, and only once its reply is in: join is called after the
// reply, and a round leaves next (under mu) before its barrier is sent. A write never joins a
// round in flight.
//
// Up to maxRounds rounds are in flight at once: a write that completes while fewer are starts
// its round at once instead of waiting for the one in flight to answer, which would cost it up
// to two waits for the replica (a lock hand-off under contention, where writes come one at a
// time, paid that at p99). Writes that find maxRounds in flight share the next round.
type group struct {
	mu sync.Mutex
	// inflight counts the rounds whose barrier is sent or about to be.
	inflight int
	// next is the round writes join while maxRounds are in flight; nil until one does.
	next *round
}

// maxRounds is how many rounds of one node may be in flight at once.
const maxRounds = 2

// round is one barrier and WAIT and the writes it confirms.
type round struct {
	done chan struct{}
	// err is why the round does not confirm its writes (ErrOutcomeUnknown's cause), nil when
	// it does; set before done is closed.
	err error
	// tag routes the barrier to this node on a Cluster: the hash tag of a write that joined.
	tag string
}

func newRound(tag string) *round { return &round{done: make(chan struct{}), tag: tag} }

var _ redis.Hook = (*durabilityHook)(nil)

type resentKey struct{}

// resent reports a context of a single write ProcessHook sends again as a pipeline: the
// pipeline still gets its barrier and WAIT, but observeHook, which timed the write already,
// does not time it twice.
func resent(ctx context.Context) bool { return ctx.Value(resentKey{}) != nil }

func (h *durabilityHook) DialHook(next redis.DialHook) redis.DialHook {
	return h.servers.dialHook(next, h.p.waits)
}

// ProcessHook sends a single write as a one-command pipeline through the same client, so that
// it gets its barrier and WAIT in the same round trip when no round is in flight (go-redis's
// Script.Run and its NOSCRIPT re-send come here).
func (h *durabilityHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if resent(ctx) || !h.p.waits() || !isWrite(cmd) {
			err := next(ctx, cmd)
			if notApplied(err) {
				err = asNotApplied(err)
				cmd.SetErr(err)
			}
			return err
		}
		if blocking[cmd.Name()] {
			// Its own read timeout (the block) holds only outside a pipeline.
			return h.afterward(ctx, func() error { return next(ctx, cmd) }, []redis.Cmder{cmd})
		}
		_, _ = h.client.Pipelined(context.WithValue(ctx, resentKey{}, true), func(p redis.Pipeliner) error {
			return p.Process(ctx, cmd)
		})
		return cmd.Err()
	}
}

// ProcessPipelineHook confirms a pipeline that holds a write, except the pipeline of a barrier
// and WAIT themselves (barrierOnlyKey). With fewer than maxRounds in flight on the node, the pipeline gets
// the barrier and WAIT appended, one round trip on one connection, and stands as the round in
// flight; otherwise it is sent as it is and joins the next round.
func (h *durabilityHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if ctx.Value(barrierOnlyKey{}) != nil || !h.p.waits() || !anyWrite(cmds) {
			err := next(ctx, cmds)
			return refusals(cmds, err)
		}
		if isTx(cmds) {
			return h.afterward(ctx, func() error { return next(ctx, cmds) }, cmds)
		}
		tag, joins := h.joins(cmds)
		var own *round
		if joins {
			h.g.mu.Lock()
			if h.g.inflight < maxRounds {
				own = newRound(tag)
				h.g.inflight++
			}
			h.g.mu.Unlock()
			if own == nil {
				// maxRounds are in flight: this batch's reply comes after their barriers
				// were sent, so the batch waits for the next round.
				gen := h.servers.generation()
				err := next(ctx, cmds)
				if err != nil && !isRedisErr(err) {
					return err
				}
				if cause := h.join(ctx, tag, gen); cause != nil {
					unconfirmed(cmds, cause)
				}
				return refusals(cmds, nil)
			}
		}
		tail := h.tail(ctx, cmds)
		all := append(cmds[:len(cmds):len(cmds)], tail...)
		err := next(ctx, all)
		cause := confirmation(tail, int64(h.p.replicas.Load()), h.p.aof.Load())
		if own != nil {
			if err != nil && !isRedisErr(err) {
				cause = err
			}
			h.finish(ctx, own, cause)
		}
		if err != nil && !isRedisErr(err) {
			// The connection failed: every command carries that error already.
			return err
		}
		if cause != nil {
			unconfirmed(cmds, cause)
		}
		return refusals(cmds, nil)
	}
}

// joins reports whether a batch may be confirmed by a shared round, and the hash tag that
// routes a round's barrier to this node on a Cluster. A Cluster batch with no key to route a
// barrier by keeps today's WAIT on its own connection, which covers its own writes only.
func (h *durabilityHook) joins(cmds []redis.Cmder) (string, bool) {
	if !h.p.cluster {
		return "", true
	}
	return batchTag(cmds)
}

// join waits for the first round whose barrier is sent after now (the caller has its write's
// reply) and returns why that round does not confirm it, nil when it does. With fewer than
// maxRounds in flight it runs one itself; a round queued behind them is run by the goroutine
// that finishes one of them. A caller whose ctx ends first gets ctx's error: its writes were
// applied, their confirmation is not known. gen is the servers generation from before the
// caller's writes were sent: a round that ends in another did not confirm them (servers).
func (h *durabilityHook) join(ctx context.Context, tag string, gen uint64) error {
	h.g.mu.Lock()
	r := h.g.next
	lead := false
	switch {
	case r != nil:
		if r.tag == "" {
			r.tag = tag
		}
	case h.g.inflight >= maxRounds:
		r = newRound(tag)
		h.g.next = r
	default:
		r = newRound(tag)
		h.g.inflight++
		lead = true
	}
	h.g.mu.Unlock()
	if lead {
		h.run(ctx, r)
	} else if hook, ok := ctx.Value(roundJoinedKey{}).(func()); ok {
		hook()
	}
	select {
	case <-r.done:
		if r.err == nil && h.servers.generation() != gen {
			return errServerChanged
		}
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run sends round r's barrier and WAIT alone and finishes it.
func (h *durabilityHook) run(ctx context.Context, r *round) {
	var tail []redis.Cmder
	_, err := h.client.Pipelined(context.WithValue(ctx, barrierOnlyKey{}, true), func(p redis.Pipeliner) error {
		tail = h.barrier(ctx, r.tag, h.p.cluster && r.tag == "")
		for _, c := range tail {
			_ = p.Process(ctx, c)
		}
		return nil
	})
	cause := confirmation(tail, int64(h.p.replicas.Load()), h.p.aof.Load())
	if cause == nil && err != nil && !isRedisErr(err) {
		cause = err
	}
	h.finish(ctx, r, cause)
}

// roundRunners counts the goroutines running queued rounds, for the tests' leak check.
var roundRunners atomic.Int64

// finish hands round r's outcome to its writers and starts the round queued behind it, on a
// goroutine of its own so that r's writers need not wait for it. That goroutine's context is
// none of its writers' (a writer that gives up must not cancel the others' round) and is
// bounded by the client's read timeout, of which WAIT takes half.
func (h *durabilityHook) finish(ctx context.Context, r *round, cause error) {
	r.err = cause
	close(r.done)
	if hook, ok := ctx.Value(roundFinishedKey{}).(func()); ok {
		hook()
	}
	h.g.mu.Lock()
	h.g.inflight--
	q := h.g.next
	if q != nil {
		h.g.next = nil
		h.g.inflight++
	}
	h.g.mu.Unlock()
	if q == nil {
		return
	}
	roundRunners.Add(1)
	go func() {
		defer roundRunners.Add(-1)
		rctx, cancel := context.WithTimeout(context.Background(), max(2*h.p.wait, time.Second))
		defer cancel()
		h.run(rctx, q)
	}()
}

// roundFinishedKey carries a test's function that finish calls once a round's outcome is
// known, before the round queued behind it starts.
type roundFinishedKey struct{}

// roundJoinedKey carries a test's function that join calls once a call with the context has
// joined a round that someone else runs.
type roundJoinedKey struct{}

// barrierOnlyKey marks the pipeline of a barrier and WAIT alone, to get no others.
type barrierOnlyKey struct{}

// afterward runs cmds as they are (a MULTI/EXEC, after whose EXEC go-redis's transaction
// reader reads nothing more; a blocking command), then has them confirmed by a round: the
// round's barrier follows their reply, so its offset covers the writes. (A Cluster batch with
// no key to route a barrier by gets a WAIT of its own instead.)
func (h *durabilityHook) afterward(ctx context.Context, run func() error, cmds []redis.Cmder) error {
	gen := h.servers.generation()
	err := run()
	if err != nil {
		return refusals(cmds, err)
	}
	if tag, joins := h.joins(cmds); joins {
		if cause := h.join(ctx, tag, gen); cause != nil {
			unconfirmed(cmds, cause)
		}
		return refusals(cmds, nil)
	}
	var tail []redis.Cmder
	_, _ = h.client.Pipelined(context.WithValue(ctx, barrierOnlyKey{}, true), func(p redis.Pipeliner) error {
		tail = h.tail(ctx, cmds)
		for _, c := range tail {
			_ = p.Process(ctx, c)
		}
		return nil
	})
	if cause := confirmation(tail, int64(h.p.replicas.Load()), h.p.aof.Load()); cause != nil {
		unconfirmed(cmds, cause)
	}
	return refusals(cmds, nil)
}

// tail is the barrier write and the WAIT (or WAITAOF) that follow a batch's writes.
func (h *durabilityHook) tail(ctx context.Context, cmds []redis.Cmder) []redis.Cmder {
	tag, ok := "", true
	if h.p.cluster {
		tag, ok = batchTag(cmds)
	}
	// With no key to route the barrier by, WAIT still covers the batch's own writes.
	return h.barrier(ctx, tag, !ok)
}

// barrier is a barrier write (on a Cluster, with tag's hash tag, for this node) and the WAIT
// (or WAITAOF) after it; only the WAIT when none is to be written.
func (h *durabilityHook) barrier(ctx context.Context, tag string, none bool) []redis.Cmder {
	key := barrierKey
	if h.p.cluster {
		key = "{" + tag + "}:" + barrierKey
	}
	var out []redis.Cmder
	if !none {
		out = append(out, redis.NewStatusCmd(ctx, "set", key, "1", "px", 10000))
	}
	ms := max(h.p.wait.Milliseconds(), 1)
	n := int64(h.p.replicas.Load())
	if h.p.aof.Load() {
		out = append(out, redis.NewIntSliceCmd(ctx, "waitaof", 1, n, ms))
	} else {
		out = append(out, redis.NewIntCmd(ctx, "wait", n, ms))
	}
	return out
}

// confirmation is nil when tail's barrier and WAIT say the batch is as durable as asked, else
// why not.
func confirmation(tail []redis.Cmder, replicas int64, aof bool) error {
	if len(tail) == 0 {
		return errors.New("no barrier and WAIT were sent")
	}
	for _, c := range tail[:len(tail)-1] {
		if err := c.Err(); err != nil {
			return fmt.Errorf("barrier write: %w", err)
		}
	}
	switch w := tail[len(tail)-1].(type) {
	case *redis.IntCmd:
		got, err := w.Result()
		if err != nil {
			return fmt.Errorf("WAIT: %w", err)
		}
		if got < replicas {
			return fmt.Errorf("WAIT: %d of %d replicas acknowledged in time", got, replicas)
		}
	case *redis.IntSliceCmd:
		got, err := w.Result()
		if err != nil {
			return fmt.Errorf("WAITAOF: %w", err)
		}
		if len(got) != 2 || got[0] < 1 || got[1] < replicas {
			return fmt.Errorf("WAITAOF: %v fsynced (local, replicas), want [1 %d]", got, replicas)
		}
	}
	return nil
}

// unconfirmed marks every write of cmds that succeeded as ErrOutcomeUnknown: it was applied on
// the primary, but not confirmed durable.
func unconfirmed(cmds []redis.Cmder, cause error) {
	for _, c := range cmds {
		if !isWrite(c) {
			continue
		}
		if err := c.Err(); err == nil || errors.Is(err, redis.Nil) {
			c.SetErr(&storeRefusal{kind: ErrOutcomeUnknown, cause: cause})
		}
	}
}

// refusals turns each NOREPLICAS or READONLY reply of cmds into ErrNotApplied and returns the
// batch's error: the first command's error that is not redis.Nil, else err.
func refusals(cmds []redis.Cmder, err error) error {
	var first error
	for _, c := range cmds {
		cerr := c.Err()
		if notApplied(cerr) {
			cerr = asNotApplied(cerr)
			c.SetErr(cerr)
		}
		if first == nil && cerr != nil && !errors.Is(cerr, redis.Nil) {
			first = cerr
		}
	}
	if first != nil {
		return first
	}
	if err != nil && errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

func isRedisErr(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// readOnly are the commands that never write, and so need no WAIT. Anything else counts as a
// write (a script, XREADGROUP, an unknown command): a needless WAIT costs a little, a missing
// one an acknowledged write.
var readOnly = map[string]bool{
	"get": true, "mget": true, "getrange": true, "strlen": true, "exists": true, "type": true,
	"ttl": true, "pttl": true, "expiretime": true, "pexpiretime": true,
	"hget": true, "hmget": true, "hgetall": true, "hkeys": true, "hvals": true, "hlen": true,
	"hexists": true, "hscan": true, "hstrlen": true, "hrandfield": true,
	"lrange": true, "llen": true, "lindex": true, "lpos": true,
	"smembers": true, "sismember": true, "smismember": true, "scard": true, "sscan": true, "srandmember": true,
	"zrange": true, "zrangebyscore": true, "zrevrangebyscore": true, "zrevrange": true,
	"zrangebylex": true, "zrevrangebylex": true, "zscore": true, "zmscore": true, "zcard": true,
	"zcount": true, "zrank": true, "zrevrank": true, "zscan": true, "zlexcount": true,
	"xrange": true, "xrevrange": true, "xlen": true, "xinfo": true, "xpending": true, "xread": true,
	"scan": true, "keys": true, "dbsize": true, "randomkey": true, "object": true, "memory": true,
	"evalsha_ro": true, "eval_ro": true, "fcall_ro": true,
	"ping": true, "echo": true, "time": true, "info": true, "config": true, "client": true,
	"cluster": true, "command": true, "hello": true, "auth": true, "select": true, "role": true,
	"script": true, "wait": true, "waitaof": true, "readonly": true, "readwrite": true, "asking": true,
	"multi": true, "exec": true, "discard": true, "watch": true, "unwatch": true,
	"subscribe": true, "psubscribe": true, "ssubscribe": true, "unsubscribe": true,
	"punsubscribe": true, "sunsubscribe": true, "pubsub": true, "publish": true, "spublish": true,
	"slowlog": true, "latency": true, "lastsave": true, "quit": true, "reset": true, "sentinel": true,
}

// blocking are the commands that may block past the read timeout, which go-redis extends for
// them only when sent alone.
var blocking = map[string]bool{
	"blpop": true, "brpop": true, "brpoplpush": true, "blmove": true, "blmpop": true,
	"bzpopmin": true, "bzpopmax": true, "bzmpop": true, "xreadgroup": true,
}

func isWrite(cmd redis.Cmder) bool { return !readOnly[cmd.Name()] }

func anyWrite(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if isWrite(c) {
			return true
		}
	}
	return false
}

// isTx reports a MULTI/EXEC batch (after an ASKING, on a cluster).
func isTx(cmds []redis.Cmder) bool {
	for _, c := range cmds[:min(2, len(cmds))] {
		if c.Name() == "multi" {
			return true
		}
	}
	return false
}

// batchTag is the hash tag (HashTag's rule) of the first key of the batch's first write that
// has one, and whether it can carry a barrier key to the same slot.
func batchTag(cmds []redis.Cmder) (string, bool) {
	for _, c := range cmds {
		if !isWrite(c) {
			continue
		}
		key, ok := firstKey(c)
		if !ok {
			continue
		}
		tag := hashTag(key)
		if !strings.ContainsAny(tag, "{}") {
			return tag, true
		}
	}
	return "", false
}

// firstKey is cmd's first key: a script's KEYS[1], else the first argument.
func firstKey(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	switch cmd.Name() {
	case "eval", "evalsha", "fcall":
		if len(args) < 4 {
			return "", false
		}
		if n := fmt.Sprint(args[2]); n == "0" {
			return "", false
		}
		k, ok := args[3].(string)
		return k, ok
	}
	if len(args) < 2 {
		return "", false
	}
	k, ok := args[1].(string)
	return k, ok
}

// hashTag is the part of key Redis Cluster hashes: the first {...} with something inside,
// else the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
