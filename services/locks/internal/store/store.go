// Package store keeps locks in Redis. Each operation is one Lua compare-and-set script that
// first settles the lock (a lease past its end is handed to the next live waiter or freed),
// so correctness never waits for the expiry alarm. Waiting calls queue in Redis; the script
// that frees a lock grants it to the first waiter and publishes to that waiter's service,
// which answers the waiting call without another round trip. The script does not publish
// itself: it returns the notice, and the store publishes it once the call has succeeded (after
// the durability wait, pkg/redisx), so no waiter hears of a grant a failover then loses. A
// notice lost on the way (the service crashing between the write and the publish) costs
// latency only: a waiting call looks for a grant itself every pollEvery.
package store

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/locks/internal/domain"
)

var (
	//go:embed lib.lua
	libLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed release.lua
	releaseLua string
	//go:embed renew.lua
	renewLua string
	//go:embed get.lua
	getLua string
	//go:embed expire.lua
	expireLua string
	//go:embed leave.lua
	leaveLua string
)

// Options configure a Store. Every zero value has the default given in its comment.
type Options struct {
	// Alarms is the alarm queue of the "locks" namespace: it places resources in shards, and a
	// lock's alarm (its lease end) lives there. Required.
	Alarms *alarm.Queue
	// Prefix starts every key and channel; it must match the alarm queue's. Default "vigil".
	Prefix string
	// Replica names this process's grant channel. Default: random.
	Replica string
	// Now is the clock for lease ends and waiter deadlines. Default time.Now.
	Now func() time.Time
	// WakeWithin: a script that makes a lock's alarm its shard's earliest wakes the shard's
	// scheduler only when the alarm is due within this time; a later one is found by the
	// scheduler's capped sleep anyway. Set it to the queue's MaxSleep. Default 2s.
	WakeWithin time.Duration
	// Logger for notification problems. Default slog.Default().
	Logger *slog.Logger
	// MaxWaiting bounds the acquires waiting on this replica at once; beyond it a waiting
	// acquire of a held lock is refused with domain.ErrTooManyWaiting. It keeps waiting calls
	// from filling the server's in-flight limit, so releases always get through. Default 512.
	MaxWaiting int
	// Pipelines is how many pipelines of concurrent calls may be in flight at once; calls that
	// arrive meanwhile share the next one. Default 2.
	Pipelines int
	// MaxWaitersPerLock is how many calls may queue for one lock, across replicas; one more
	// is refused at once (acquired false, with the holder) instead of queueing. Default 1000;
	// negative: no limit.
	MaxWaitersPerLock int
}

// Store is the Redis side of the lock service.
type Store struct {
	rdb     redis.UniversalClient
	q       *alarm.Queue
	o       Options
	channel string
	scripts []*redisx.Script
	acquire *redisx.Script
	release *redisx.Script
	renew   *redisx.Script
	get     *redisx.Script
	expire  *redisx.Script
	leave   *redisx.Script

	pipe    *pipeliner
	seq     atomic.Uint64
	mu      sync.Mutex
	waiting map[string]chan notice // by waiter id
	sub     *redis.PubSub
	closing chan struct{} // closed when Listen stops: waiting calls leave
}

// notice tells a waiting call that the lock was granted to it, or (recheck) that notices may
// have been lost and it should look for itself.
type notice struct {
	recheck bool
	token   int64
	exp     int64
}

// New returns a Store on rdb whose locks' alarms live in o.Alarms.
func New(rdb redis.UniversalClient, o Options) (*Store, error) {
	if o.Alarms == nil {
		return nil, errors.New("locks store: Options.Alarms is required")
	}
	if o.Prefix == "" {
		o.Prefix = "vigil"
	}
	if o.Replica == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		o.Replica = hex.EncodeToString(b[:])
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.WakeWithin <= 0 {
		o.WakeWithin = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = 512
	}
	if o.Pipelines <= 0 {
		o.Pipelines = 2
	}
	if o.MaxWaitersPerLock == 0 {
		o.MaxWaitersPerLock = 1000
	}
	// Every lock script is pkg/alarm's contract, then lib.lua, then its own body.
	lib := libFor(o.WakeWithin)
	script := func(name, src string) *redisx.Script { return alarm.NewScript(name, lib+src) }
	s := &Store{
		rdb:     rdb,
		q:       o.Alarms,
		o:       o,
		channel: grantChannel(o.Prefix, o.Replica),
		acquire: script("acquire.lua", acquireLua),
		release: script("release.lua", releaseLua),
		renew:   script("renew.lua", renewLua),
		get:     script("get.lua", getLua),
		expire:  script("expire.lua", expireLua),
		leave:   script("leave.lua", leaveLua),
		waiting: map[string]chan notice{},
		closing: make(chan struct{}),
	}
	s.scripts = []*redisx.Script{s.acquire, s.release, s.renew, s.get, s.expire, s.leave}
	s.pipe = &pipeliner{rdb: rdb, scripts: s.scripts, max: o.Pipelines, publish: s.publish}
	return s, nil
}

// libFor is lib.lua with the WakeWithin it reads in front: a script looks up its shard's
// earliest alarm only for a lease ending sooner, since only then is the scheduler woken.
func libFor(wakeWithin time.Duration) string {
	return "local wake_within = " + strconv.FormatInt(wakeWithin.Milliseconds(), 10) + "\n" + libLua
}

// Subscribe listens on this replica's grant channel; call it before serving, then run Listen.
func (s *Store) Subscribe(ctx context.Context) error {
	sub := s.rdb.Subscribe(ctx, s.channel)
	if _, err := sub.Receive(ctx); err != nil {
		_ = sub.Close()
		return fmt.Errorf("subscribe %s: %w", s.channel, err)
	}
	s.sub = sub
	return nil
}

// Listen delivers grant notices to waiting calls until ctx ends. When the subscription is
// re-established after a lost connection, every waiting call rechecks, since notices sent
// meanwhile are lost.
func (s *Store) Listen(ctx context.Context) error {
	if s.sub == nil {
		return errors.New("locks store: Listen before Subscribe")
	}
	defer s.sub.Close()
	// Waiting calls leave the queue now, while Redis is still open, rather than being cut by
	// the drain and leaving entries that a release would grant to nobody.
	defer close(s.closing)
	ch := s.sub.ChannelWithSubscriptions(redis.WithChannelSize(4096))
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-ch:
			if !ok {
				return nil
			}
			switch m := m.(type) {
			case *redis.Message:
				s.deliver(m.Payload)
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					s.o.Logger.Info("grant channel resubscribed; waiting calls recheck", "event", "lock_resubscribed", "channel", s.channel)
					s.recheckAll()
				}
			}
		}
	}
}

// deliver hands "wid\ntoken\nexp" to the waiting call wid, if it is still here.
func (s *Store) deliver(payload string) {
	parts := strings.SplitN(payload, "\n", 3)
	if len(parts) != 3 {
		return
	}
	token, err1 := strconv.ParseInt(parts[1], 10, 64)
	exp, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	s.notify(parts[0], notice{token: token, exp: exp})
}

// notify hands n to the waiting call wid, if it is on this replica and still waiting.
func (s *Store) notify(wid string, n notice) {
	s.mu.Lock()
	ch := s.waiting[wid]
	s.mu.Unlock()
	if ch != nil {
		send(ch, n)
	}
}

func (s *Store) recheckAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.waiting {
		send(ch, notice{recheck: true})
	}
}

// send never blocks: each channel holds one notice, and a grant outranks a recheck.
func send(ch chan notice, n notice) {
	select {
	case ch <- n:
		return
	default:
	}
	if !n.recheck {
		select {
		case <-ch:
		default:
		}
		select {
		case ch <- n:
		default:
		}
	}
}

// splitNotices returns a script's reply without its last element, the grant notices
// {channel, payload, ...}, and notices with those appended.
func splitNotices(res []any, notices []string) ([]any, []string) {
	if len(res) == 0 {
		return res, notices
	}
	last, _ := res[len(res)-1].([]any)
	for _, v := range last {
		str, _ := v.(string)
		notices = append(notices, str)
	}
	return res[:len(res)-1], notices
}

// publish sends grant notices ({channel, payload, ...}) in one pipeline, in order. A notice
// that does not go out is logged: its waiter finds the grant when it next looks (pollEvery).
func (s *Store) publish(ctx context.Context, notices []string) {
	if len(notices) < 2 {
		return
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i+1 < len(notices); i += 2 {
			p.Publish(ctx, notices[i], notices[i+1])
		}
		return nil
	})
	if err != nil {
		s.o.Logger.Warn("grant notices not published; their waiters find the grants when they next look",
			"event", "lock_notice_failed", "notices", len(notices)/2, "err", err)
	}
}

// Scripts are the store's Lua scripts, for loading before a pipeline uses them.
func (s *Store) Scripts() []*redisx.Script { return s.scripts }

// run runs one lock script through the pipeliner. A script refusing its arguments (a value
// the domain's checks should have stopped) is an invalid request, not a store failure.
func (s *Store) run(ctx context.Context, sc *redisx.Script, k lockKeys, resource string, now time.Time, args ...any) ([]any, error) {
	res, err := s.pipe.do(ctx, sc, k.list(), append([]any{resource, now.UnixMilli()}, args...)...)
	return res, redisx.ArgErr(err)
}

// wakeIfDue wakes the shard's scheduler when a script made an alarm due soon its shard's head.
func (s *Store) wakeIfDue(ctx context.Context, k lockKeys, now time.Time, wake any) {
	ms, _ := wake.(int64)
	if ms == 0 || time.UnixMilli(ms).Sub(now) >= s.o.WakeWithin {
		return
	}
	s.q.Wake(ctx, k.shard)
}

// Acquire takes resource for owner for ttl, waiting up to wait for it when it is held.
// Waiting callers are served in arrival order; a caller whose ctx ends leaves the queue (and
// gives back a lock granted to it meanwhile) and gets ctx's error.
func (s *Store) Acquire(ctx context.Context, resource, owner string, ttl, wait time.Duration) (domain.Acquired, error) {
	k := keysOf(s.q, resource)
	now := s.o.Now()
	if wait <= 0 {
		res, err := s.run(ctx, s.acquire, k, resource, now, owner, ttl.Milliseconds(), "", 0, 0)
		if err != nil {
			return domain.Acquired{}, fmt.Errorf("acquire %q: %w", resource, err)
		}
		s.wakeIfDue(ctx, k, now, res[4])
		return acquired(res), nil
	}

	s.mu.Lock()
	full := len(s.waiting) >= s.o.MaxWaiting
	s.mu.Unlock()
	if full {
		a, err := s.Acquire(ctx, resource, owner, ttl, 0)
		if err == nil && !a.OK {
			err = domain.ErrTooManyWaiting
		}
		return a, err
	}

	wid := s.o.Replica + "-" + strconv.FormatUint(s.seq.Add(1), 36)
	deadline := now.Add(wait)
	entry := strconv.FormatInt(deadline.UnixMilli(), 10) + "\n" + strconv.FormatInt(ttl.Milliseconds(), 10) + "\n" +
		wid + "\n" + s.channel + "\n" + owner
	notices := make(chan notice, 1)
	s.mu.Lock()
	s.waiting[wid] = notices
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, wid)
		s.mu.Unlock()
	}()

	res, err := s.run(ctx, s.acquire, k, resource, now, owner, ttl.Milliseconds(), entry, (wait + 5*time.Second).Milliseconds(), max(s.o.MaxWaitersPerLock, 0))
	if err != nil {
		// The script may have queued the caller before the answer was lost.
		s.abandon(k, resource, entry, wid)
		return domain.Acquired{}, fmt.Errorf("acquire %q: %w", resource, err)
	}
	s.wakeIfDue(ctx, k, now, res[4])
	if st, _ := res[0].(int64); st != 2 {
		return acquired(res), nil
	}

	timer := time.NewTimer(wait)
	defer timer.Stop()
	poll := time.NewTicker(pollEvery(ttl))
	defer poll.Stop()
	for {
		select {
		case <-poll.C:
			// A grant's notice may have been lost (the service that granted it stopped between
			// its write and its publish): look, well before the granted lease would run out.
			if a, err := s.leaveQueue(ctx, k, resource, entry, wid, "2"); err == nil && a.OK {
				return a, nil
			}
		case n := <-notices:
			if !n.recheck {
				if ctx.Err() != nil {
					s.abandon(k, resource, entry, wid)
					return domain.Acquired{}, ctx.Err()
				}
				return domain.Acquired{OK: true, Token: n.token, ExpiresAt: time.UnixMilli(n.exp)}, nil
			}
			a, err := s.leaveQueue(ctx, k, resource, entry, wid, "2")
			if err != nil {
				continue // the subscription is back, so a later grant still reaches us
			}
			if a.OK {
				return a, nil
			}
		case <-timer.C:
			a, err := s.leaveQueue(ctx, k, resource, entry, wid, "0")
			if err != nil {
				s.abandon(k, resource, entry, wid)
				return domain.Acquired{}, err
			}
			return a, nil
		case <-ctx.Done():
			s.abandon(k, resource, entry, wid)
			return domain.Acquired{}, ctx.Err()
		case <-s.closing:
			s.abandon(k, resource, entry, wid)
			return domain.Acquired{}, domain.ErrShuttingDown
		}
	}
}

// pollEvery is how often a waiting call looks for a grant whose notice was lost: within half
// the lease it asked for (so it finds the grant before the lease runs out), between 1 s and
// 10 s (a notice is rarely lost, and every look is a script run).
func pollEvery(ttl time.Duration) time.Duration {
	return min(max(ttl/2, time.Second), 10*time.Second)
}

// abandon takes a waiter whose caller is gone out of the queue, and gives back the lock if it
// was granted to it. It outlives the caller's context; if it fails, the entry's deadline and
// the lease still bound the damage.
func (s *Store) abandon(k lockKeys, resource, entry, wid string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.leaveQueue(ctx, k, resource, entry, wid, "1"); err != nil {
		s.o.Logger.Warn("abandoned waiter not removed", "event", "lock_abandon_failed", "resource", resource, "err", err)
	}
}

func (s *Store) leaveQueue(ctx context.Context, k lockKeys, resource, entry, wid, mode string) (domain.Acquired, error) {
	now := s.o.Now()
	res, err := s.run(ctx, s.leave, k, resource, now, entry, wid, mode)
	if err != nil {
		return domain.Acquired{}, fmt.Errorf("leave queue of %q: %w", resource, err)
	}
	s.wakeIfDue(ctx, k, now, res[4])
	return acquired(res), nil
}

// acquired reads {status, token, exp, holder, ...}; status 1 means the caller holds the lock.
func acquired(res []any) domain.Acquired {
	st, _ := res[0].(int64)
	token, _ := res[1].(int64)
	exp, _ := res[2].(int64)
	holder, _ := res[3].(string)
	a := domain.Acquired{OK: st == 1, Token: token, Holder: holder}
	if exp > 0 {
		a.ExpiresAt = time.UnixMilli(exp)
	}
	return a
}

// Release frees resource if owner holds it (under token, unless token is 0) and reports
// whether it did.
func (s *Store) Release(ctx context.Context, resource, owner string, token int64) (bool, error) {
	k := keysOf(s.q, resource)
	now := s.o.Now()
	res, err := s.run(ctx, s.release, k, resource, now, owner, s.channel, tokenArg(token))
	if err != nil {
		// The release may have granted the lock to a waiter here without publishing it:
		// every waiting call looks for itself.
		s.recheckAll()
		return false, fmt.Errorf("release %q: %w", resource, err)
	}
	s.wakeIfDue(ctx, k, now, res[1])
	if wid, _ := res[2].(string); wid != "" {
		// The next holder may be waiting on this replica: answer it now (its grant was not
		// published).
		token, _ := res[3].(int64)
		exp, _ := res[4].(int64)
		s.notify(wid, notice{token: token, exp: exp})
	}
	ok, _ := res[0].(int64)
	return ok == 1, nil
}

// Renew extends owner's lease on resource to ttl from now, if owner holds it (under token,
// unless token is 0).
func (s *Store) Renew(ctx context.Context, resource, owner string, ttl time.Duration, token int64) (domain.Renewed, error) {
	k := keysOf(s.q, resource)
	now := s.o.Now()
	res, err := s.run(ctx, s.renew, k, resource, now, owner, ttl.Milliseconds(), tokenArg(token))
	if err != nil {
		return domain.Renewed{}, fmt.Errorf("renew %q: %w", resource, err)
	}
	s.wakeIfDue(ctx, k, now, res[2])
	ok, _ := res[0].(int64)
	if ok != 1 {
		return domain.Renewed{}, nil
	}
	exp, _ := res[1].(int64)
	return domain.Renewed{OK: true, ExpiresAt: time.UnixMilli(exp)}, nil
}

// tokenArg is a fencing token as release.lua and renew.lua take it: the empty string for any.
func tokenArg(token int64) string {
	if token == 0 {
		return ""
	}
	return strconv.FormatInt(token, 10)
}

// Get describes resource as the next acquire would see it.
func (s *Store) Get(ctx context.Context, resource string) (domain.Lock, error) {
	k := keysOf(s.q, resource)
	now := s.o.Now()
	res, err := s.run(ctx, s.get, k, resource, now)
	if err != nil {
		return domain.Lock{}, fmt.Errorf("get %q: %w", resource, err)
	}
	s.wakeIfDue(ctx, k, now, res[5])
	l := domain.Lock{Resource: resource}
	if held, _ := res[0].(int64); held == 1 {
		l.Held = true
		l.Owner, _ = res[1].(string)
		l.Token, _ = res[2].(int64)
		exp, _ := res[3].(int64)
		l.ExpiresAt = time.UnixMilli(exp)
	}
	return l, nil
}

// Expire is the expiry transition for a batch of fired lock alarms (ids are resources), one
// pipelined script per lock: changed[i] is true when ids[i]'s lease had ended and the lock was
// freed or handed to its next waiter. A lock renewed meanwhile is left alone, so a replayed
// alarm changes nothing.
func (s *Store) Expire(ctx context.Context, ids []string) (changed []bool, errs []error) {
	now := s.o.Now()
	keys := make([]lockKeys, len(ids))
	cmds := make([]*redis.Cmd, len(ids))
	_, err := redisx.Pipelined(ctx, s.rdb, s.scripts, func(p redis.Pipeliner) {
		for i, id := range ids {
			keys[i] = keysOf(s.q, id)
			cmds[i] = s.expire.Queue(ctx, p, keys[i].list(), id, now.UnixMilli())
		}
	})
	changed, errs = make([]bool, len(ids)), make([]error, len(ids))
	var notices []string
	defer func() { s.publish(ctx, notices) }()
	for i, id := range ids {
		if cmds[i] == nil {
			errs[i] = fmt.Errorf("expire %q: %w", id, err)
			continue
		}
		res, cerr := cmds[i].Slice()
		if cerr != nil {
			errs[i] = fmt.Errorf("expire %q: %w", id, cerr)
			continue
		}
		res, notices = splitNotices(res, notices)
		c, _ := res[0].(int64)
		changed[i] = c == 1
		s.wakeIfDue(ctx, keys[i], now, res[1])
	}
	return changed, errs
}
