package alarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// What operators see: read-only views of the queue for the admin service. They read the same
// keys the scripts write, so the rules for reading a score live here, beside the scripts.

// AlarmState is one object's alarm as the queue holds it.
type AlarmState struct {
	// ID is the object.
	ID string
	// Shard is the object's shard.
	Shard int
	// Due is when the alarm fires next: its due time, or for an alarm in flight the end of its
	// lease or the time of its retry.
	Due time.Time
	// InFlight is true while a scheduler holds the alarm (leased) or it waits for a retry: its
	// score is fractional, which only a claim or a retry writes.
	InFlight bool
	// Attempts made so far in its current flight: 1 on its first claim, 0 while it waits for
	// one.
	Attempts int
}

// ShardState is one shard's alarms at one instant.
type ShardState struct {
	// Shard is the shard's number.
	Shard int
	// Pending counts the shard's alarms, due or not, in flight included.
	Pending int64
	// Overdue counts alarms due at or before the instant: not yet claimed, or in flight with an
	// ended lease (a crashed scheduler) or a due retry.
	Overdue int64
	// InFlight counts alarms claimed and not yet acknowledged, or waiting for a retry (the
	// shard's count, ShardKeys.InFlight).
	InFlight int64
	// Dead counts the shard's dead letters.
	Dead int64
	// Next are the shard's earliest alarms, earliest first.
	Next []AlarmState
}

// Now is the queue's clock.
func (q *Queue) Now() time.Time { return q.o.Now() }

// Inspect describes every shard at the queue clock's now, listing up to next of each shard's
// earliest alarms. It reads every shard in one pipeline, so its counts are close to one instant
// though not atomic across shards.
func (q *Queue) Inspect(ctx context.Context, next int) (now time.Time, shards []ShardState, err error) {
	now = q.o.Now()
	nowMs := strconv.FormatInt(now.UnixMilli(), 10)
	type shardCmds struct {
		card, overdue, dead *redis.IntCmd
		inflight            *redis.SliceCmd
		head                *redis.ZSliceCmd
	}
	cmds := make([]shardCmds, q.o.Shards)
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for s := range q.o.Shards {
			k := q.Keys(s)
			cmds[s] = shardCmds{
				card:     p.ZCard(ctx, k.Alarms),
				overdue:  p.ZCount(ctx, k.Alarms, "-inf", nowMs),
				inflight: p.MGet(ctx, k.InFlight), // MGET: an absent count is nil, not an error
				dead:     p.ZCard(ctx, k.Dead),
			}
			if next > 0 {
				cmds[s].head = p.ZRangeWithScores(ctx, k.Alarms, 0, int64(next-1))
			}
		}
		return nil
	})
	if err != nil {
		return now, nil, fmt.Errorf("inspect %s alarms: %w", q.o.Namespace, err)
	}
	shards = make([]ShardState, q.o.Shards)
	attempts := make([]*redis.SliceCmd, q.o.Shards)
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for s, c := range cmds {
			st := ShardState{Shard: s, Pending: c.card.Val(), Overdue: c.overdue.Val(), Dead: c.dead.Val()}
			if v, _ := c.inflight.Val()[0].(string); v != "" {
				st.InFlight, _ = strconv.ParseInt(v, 10, 64)
				st.InFlight = max(st.InFlight, 0)
			}
			if c.head != nil {
				ids := make([]string, 0, len(c.head.Val()))
				for _, z := range c.head.Val() {
					a := stateOf(z.Member.(string), s, z.Score)
					st.Next = append(st.Next, a)
					ids = append(ids, a.ID)
				}
				if len(ids) > 0 {
					attempts[s] = p.HMGet(ctx, q.Keys(s).Attempts, ids...)
				}
			}
			shards[s] = st
		}
		return nil
	})
	if err != nil {
		return now, nil, fmt.Errorf("inspect %s attempts: %w", q.o.Namespace, err)
	}
	for s, c := range attempts {
		if c == nil {
			continue
		}
		for i, v := range c.Val() {
			if i < len(shards[s].Next) {
				str, _ := v.(string)
				shards[s].Next[i].setAttempts(str)
			}
		}
	}
	return now, shards, nil
}

// Alarm reads object id's alarm; ok is false when it has none.
func (q *Queue) Alarm(ctx context.Context, id string) (a AlarmState, ok bool, err error) {
	k := q.KeysOf(id)
	score, attempts, ok, err := q.entry(ctx, k.Alarms, k.Attempts, id)
	if err != nil {
		return AlarmState{}, false, fmt.Errorf("read alarm %q: %w", id, err)
	}
	if !ok {
		return AlarmState{}, false, nil
	}
	a = stateOf(id, q.ShardOf(id), score)
	a.setAttempts(attempts)
	return a, true, nil
}

// DeadLetter reads object id's dead letter; ok is false when it has none.
func (q *Queue) DeadLetter(ctx context.Context, id string) (d DeadLetter, ok bool, err error) {
	k := q.KeysOf(id)
	at, info, ok, err := q.entry(ctx, k.Dead, k.DeadInfo, id)
	if err != nil {
		return DeadLetter{}, false, fmt.Errorf("read dead letter %q: %w", id, err)
	}
	if !ok {
		return DeadLetter{}, false, nil
	}
	d = DeadLetter{ID: id, Shard: q.ShardOf(id), At: time.UnixMilli(int64(at))}
	if info != "" {
		_ = json.Unmarshal([]byte(info), &d)
	}
	return d, true, nil
}

// entry reads id's score in the sorted set set and its field in the hash info, in one round
// trip; ok is false when id is not in set.
func (q *Queue) entry(ctx context.Context, set, info, id string) (score float64, field string, ok bool, err error) {
	var z *redis.FloatCmd
	var h *redis.StringCmd
	_, err = q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		z = p.ZScore(ctx, set, id)
		h = p.HGet(ctx, info, id)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, "", false, err
	}
	if errors.Is(z.Err(), redis.Nil) {
		return 0, "", false, nil
	}
	return z.Val(), h.Val(), true, nil
}

// stateOf reads an alarm's score: a whole ms is a due time set by the domain; a fractional one
// was written by a claim or a retry and becomes claimable at the next whole ms.
func stateOf(id string, shard int, score float64) AlarmState {
	inFlight := score != math.Floor(score)
	return AlarmState{ID: id, Shard: shard, Due: time.UnixMilli(int64(math.Ceil(score))), InFlight: inFlight}
}

// setAttempts reads the alarm's count in the attempts hash (raw, "" when it has none). The
// hash counts only alarms claimed more than once (claim.lua), so an alarm in flight without a
// count is on its first attempt, and one not in flight has made none since it was last set.
func (a *AlarmState) setAttempts(raw string) {
	a.Attempts = 0
	if a.InFlight {
		a.Attempts, _ = strconv.Atoi(raw)
		a.Attempts = max(a.Attempts, 1)
	}
}
