// Package store keeps reservations in Redis. Each reservation is a hash under its alarm shard's
// hash tag, so every transition is one Lua compare-and-set script that changes the state and
// moves the alarm together (through pkg/alarm's Lua contract).
package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/reservations/internal/domain"
)

var (
	//go:embed create.lua
	createLua string
	//go:embed expire.lua
	expireLua string
	//go:embed settle.lua
	settleLua string
	//go:embed get.lua
	getLua string
)

// ErrShortReply is a script answer the store cannot read: Redis and the store disagree about
// a script (a deployment mixing versions).
var ErrShortReply = errors.New("reservations store: unexpected script reply")

// Options configure a Store.
type Options struct {
	// Queue is the reservations' alarm queue: its shard layout places every key, and its
	// Wake is called when a new alarm is its shard's earliest. Required.
	Queue *alarm.Queue
}

// Store is the reservations' Redis store.
type Store struct {
	rdb    redis.UniversalClient
	q      *alarm.Queue
	keys   keys
	create *redisx.Script
	expire *redisx.Script
	settle *redisx.Script
	get    *redisx.Script
}

// New returns a store on rdb.
func New(rdb redis.UniversalClient, o Options) (*Store, error) {
	if o.Queue == nil {
		return nil, errors.New("reservations store: Options.Queue is required")
	}
	return &Store{
		rdb:    rdb,
		q:      o.Queue,
		keys:   keys{q: o.Queue},
		create: alarm.NewScript("create.lua", createLua),
		expire: alarm.NewScript("expire.lua", expireLua),
		settle: alarm.NewScript("settle.lua", settleLua),
		get:    alarm.NewScript("get.lua", getLua),
	}, nil
}

// scriptErr is err from a script run for id: a refusal of its arguments is bad input
// (InvalidArgument), anything else the store failing.
func scriptErr(op, id string, err error) error {
	if redisx.Refused(err) {
		return redisx.ArgErr(err)
	}
	return fmt.Errorf("%s reservation %s: %w", op, id, err)
}

// Create holds reservation id from now for ttl, resetting any earlier hold and its alarm.
func (s *Store) Create(ctx context.Context, id string, now time.Time, ttl time.Duration) (domain.Reservation, error) {
	r := domain.New(id, now, ttl)
	head, err := s.create.Run(ctx, s.rdb, s.keys.one(id), id, r.CreatedAt, r.ExpiresAt).Int()
	if err != nil {
		return domain.Reservation{}, scriptErr("create", id, err)
	}
	if head == 1 {
		s.q.Wake(ctx, s.q.ShardOf(id))
	}
	return r, nil
}

// Get reads reservation id; one never created has status Missing.
func (s *Store) Get(ctx context.Context, id string) (domain.Reservation, error) {
	res, err := s.get.Run(ctx, s.rdb, s.keys.one(id), id).Slice()
	if err != nil {
		return domain.Reservation{}, scriptErr("get", id, err)
	}
	return parse(id, res), nil
}

// Expire runs the alarm's transition for reservation id at now and reports whether it changed
// the hold, with the hold's state after it.
func (s *Store) Expire(ctx context.Context, id string, now time.Time) (domain.Reservation, bool, error) {
	res, err := s.expire.Run(ctx, s.rdb, []string{s.keys.alarms(id), s.keys.reservation(id)}, now.UnixMilli(), "full", id).Slice()
	if err != nil {
		return domain.Reservation{}, false, scriptErr("expire", id, err)
	}
	f, _ := res[0].([]any)
	if len(res) != 1 || len(f) < 2 {
		return domain.Reservation{}, false, fmt.Errorf("expire %s: %w", id, ErrShortReply)
	}
	return parse(id, f[1:]), f[0] == int64(1), nil
}

// ExpireDue runs the alarm's transition at now for every reservation of ids, one script call
// per alarm shard (a claimed batch is one shard: one call), and reports which of them it
// expired, in the order of ids. It fails as a whole: a call either ran or did not, and running
// it again changes nothing twice.
func (s *Store) ExpireDue(ctx context.Context, ids []string, now time.Time) ([]bool, error) {
	out := make([]bool, len(ids))
	byShard := map[int][]int{}
	for i, id := range ids {
		sh := s.q.ShardOf(id)
		byShard[sh] = append(byShard[sh], i)
	}
	nowMs := now.UnixMilli()
	for _, idx := range byShard {
		keys := make([]string, 1, len(idx)+1)
		args := make([]any, 2, len(idx)+2)
		keys[0], args[0], args[1] = s.keys.alarms(ids[idx[0]]), nowMs, "brief"
		for _, i := range idx {
			keys = append(keys, s.keys.reservation(ids[i]))
			args = append(args, ids[i])
		}
		res, err := s.expire.Run(ctx, s.rdb, keys, args...).Int64Slice()
		if err != nil {
			return nil, scriptErr("expire", ids[idx[0]], err)
		}
		if len(res) != len(idx) {
			return nil, fmt.Errorf("expire: %d answers for %d reservations: %w", len(res), len(idx), ErrShortReply)
		}
		for j, i := range idx {
			out[i] = res[j] == 1
		}
	}
	return out, nil
}

// Settle moves a held reservation to confirmed or released at now.
func (s *Store) Settle(ctx context.Context, id string, to domain.Status, now time.Time) (domain.Reservation, error) {
	res, err := s.settle.Run(ctx, s.rdb, s.keys.one(id), id, string(to), now.UnixMilli()).Slice()
	if err != nil {
		return domain.Reservation{}, scriptErr("settle", id, err)
	}
	if len(res) < 1 {
		return domain.Reservation{}, fmt.Errorf("settle %s: %w", id, ErrShortReply)
	}
	r := parse(id, res[1:])
	switch res[0] {
	case "missing":
		return r, domain.NotFound(id)
	case "conflict":
		return r, domain.Conflict(id, r.Status, to)
	}
	return r, nil
}

// parse reads {status, createdAt, expiresAt, expiredAt, expirationCount, alarmAt}.
func parse(id string, f []any) domain.Reservation {
	r := domain.Reservation{ID: id, Status: domain.Missing}
	if len(f) == 0 {
		return r
	}
	if st, ok := f[0].(string); ok {
		r.Status = domain.Status(st)
	}
	at := func(i int) int64 {
		if i >= len(f) {
			return 0
		}
		switch v := f[i].(type) {
		case int64:
			return v
		case string:
			x, _ := strconv.ParseFloat(v, 64)
			return int64(math.Floor(x))
		}
		return 0
	}
	r.CreatedAt, r.ExpiresAt, r.ExpiredAt, r.ExpirationCount, r.AlarmAt = at(1), at(2), at(3), at(4), at(5)
	return r
}
