// Package store keeps reservations in Redis. Each reservation is a hash under its alarm shard's
// hash tag, so every transition is one Lua compare-and-set script that changes the state and
// moves the alarm together.
package store

import (
	"context"
	_ "embed"
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

// Store is the reservations' Redis store.
type Store struct {
	rdb    redis.UniversalClient
	q      *alarm.Queue
	create *redisx.Script
	expire *redisx.Script
	settle *redisx.Script
	get    *redisx.Script
}

// New returns a store on rdb whose alarms live in q.
func New(rdb redis.UniversalClient, q *alarm.Queue) *Store {
	return &Store{
		rdb:    rdb,
		q:      q,
		create: redisx.NewScript("create.lua", createLua),
		expire: redisx.NewScript("expire.lua", expireLua),
		settle: redisx.NewScript("settle.lua", settleLua),
		get:    redisx.NewScript("get.lua", getLua),
	}
}

// keys are the reservation's hash and its shard's alarm set: one hash tag.
func (s *Store) keys(id string) []string {
	k := s.q.KeysOf(id)
	return []string{k.Tag + ":res:" + id, k.Alarms}
}

// Create holds reservation id from now for ttl, resetting any earlier hold and its alarm.
func (s *Store) Create(ctx context.Context, id string, now time.Time, ttl time.Duration) (domain.Reservation, error) {
	r := domain.New(id, now, ttl)
	head, err := s.create.Run(ctx, s.rdb, s.keys(id), id, r.CreatedAt, r.ExpiresAt).Int()
	if err != nil {
		return domain.Reservation{}, fmt.Errorf("create reservation %s: %w", id, err)
	}
	if head == 1 {
		s.q.Wake(ctx, s.q.ShardOf(id))
	}
	return r, nil
}

// Get reads reservation id; one never created has status Missing.
func (s *Store) Get(ctx context.Context, id string) (domain.Reservation, error) {
	res, err := s.get.Run(ctx, s.rdb, s.keys(id), id).Slice()
	if err != nil {
		return domain.Reservation{}, fmt.Errorf("get reservation %s: %w", id, err)
	}
	return parse(id, res), nil
}

// Expire runs the alarm's transition at nowMs and reports whether it changed the hold.
func (s *Store) Expire(ctx context.Context, id string, nowMs int64) (domain.Reservation, bool, error) {
	res, err := s.expire.Run(ctx, s.rdb, s.keys(id), id, nowMs).Slice()
	if err != nil {
		return domain.Reservation{}, false, fmt.Errorf("expire reservation %s: %w", id, err)
	}
	return parse(id, res[1:]), res[0] == int64(1), nil
}

// ExpireResult is the outcome of one expiry in a batch.
type ExpireResult struct {
	Reservation domain.Reservation
	Changed     bool
	Err         error
}

// ExpireBatch runs the alarm's transition for many reservations in one pipeline.
func (s *Store) ExpireBatch(ctx context.Context, ids []string, nowMs int64) []ExpireResult {
	out := make([]ExpireResult, len(ids))
	cmds := make([]*redis.Cmd, len(ids))
	_, err := redisx.Pipelined(ctx, s.rdb, []*redisx.Script{s.expire}, func(p redis.Pipeliner) {
		for i, id := range ids {
			cmds[i] = s.expire.Queue(ctx, p, s.keys(id), id, nowMs)
		}
	})
	for i, id := range ids {
		res, cerr := cmds[i].Slice()
		switch {
		case cerr != nil:
			out[i].Err = fmt.Errorf("expire reservation %s: %w", id, cerr)
		case err != nil && len(res) == 0:
			out[i].Err = fmt.Errorf("expire reservation %s: %w", id, err)
		default:
			out[i] = ExpireResult{Reservation: parse(id, res[1:]), Changed: res[0] == int64(1)}
		}
	}
	return out
}

// Settle moves a held reservation to confirmed or released at nowMs.
func (s *Store) Settle(ctx context.Context, id string, to domain.Status, nowMs int64) (domain.Reservation, error) {
	res, err := s.settle.Run(ctx, s.rdb, s.keys(id), id, string(to), nowMs).Slice()
	if err != nil {
		return domain.Reservation{}, fmt.Errorf("settle reservation %s: %w", id, err)
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
