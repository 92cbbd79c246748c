// Package store keeps practice rooms in Redis. A room's keys all carry its alarm shard's hash
// tag, so each script changes the room's state, its sessions and its one alarm atomically and
// runs unchanged on Redis Cluster. The scripts publish the room's events (relayed frames and
// occupancy changes) in the same atomic step, numbered by the room's version.
package store

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

var (
	//go:embed lib.lua
	libLua string
	//go:embed init.lua
	initLua string
	//go:embed join.lua
	joinLua string
	//go:embed leave.lua
	leaveLua string
	//go:embed act.lua
	actLua string
	//go:embed renew.lua
	renewLua string
	//go:embed sweep.lua
	sweepLua string
	//go:embed end.lua
	endLua string
	//go:embed finish.lua
	finishLua string
)

// TombstoneTTL is how long a deleted room's code refuses to be re-created from a stale Lobby
// read.
const TombstoneTTL = 10 * time.Minute

// The store's types and sentinel errors are the domain's (the use cases know them without
// knowing Redis).
type (
	Seed         = domain.Seed
	Change       = domain.Change
	State        = domain.State
	Session      = domain.Attached
	Joined       = domain.Joined
	Action       = domain.Action
	Renewal      = domain.Renewal
	SweepOutcome = domain.SweepOutcome
	ErrEnded     = domain.ErrEnded
)

// Sentinel errors of the store.
var (
	ErrMissing       = domain.ErrNoState
	ErrTombstoned    = domain.ErrTombstoned
	ErrSessionTaken  = domain.ErrSessionTaken
	ErrSessionClosed = domain.ErrSessionClosed
)

// Sweep outcomes.
const (
	Gone   = domain.Gone
	Active = domain.Active
	Ending = domain.Ending
)

// Store is the rooms' Redis store.
type Store struct {
	rdb     redis.UniversalClient
	q       *alarm.Queue
	prefix  string
	idleTTL int64 // ms
	// wakeWithin (ms): a script that makes a room's alarm its shard's head wakes the shard's
	// scheduler only when that alarm is due this soon.
	wakeWithin int64
	init       *redisx.Script
	join       *redisx.Script
	leave      *redisx.Script
	act        *redisx.Script
	renew      *redisx.Script
	sweep      *redisx.Script
	end        *redisx.Script
	finish     *redisx.Script
}

// Options configure a Store. Every zero value has the default given in its comment.
type Options struct {
	// Alarms is the rooms' alarm queue (namespace "room"): it places rooms in shards, and each
	// room's one alarm lives there. Required.
	Alarms *alarm.Queue
	// Prefix starts every key and channel; it must match the alarm queue's. Default "vigil".
	Prefix string
	// IdleTTL: a room with no leader action for this long expires. Default 1h.
	IdleTTL time.Duration
	// WakeWithin: a script that makes a room's alarm its shard's earliest wakes the shard's
	// scheduler only when the alarm is due within this time; a later one is found by the
	// scheduler's capped sleep anyway. Set it to the queue's MaxSleep. Default 2s.
	WakeWithin time.Duration
}

// New returns the store over rdb.
func New(rdb redis.UniversalClient, o Options) (*Store, error) {
	if o.Alarms == nil {
		return nil, errors.New("room store: Options.Alarms is required")
	}
	if o.Prefix == "" {
		o.Prefix = "vigil"
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = time.Hour
	}
	if o.WakeWithin <= 0 {
		o.WakeWithin = 2 * time.Second
	}
	s := func(name, src string) *redisx.Script { return alarm.NewScript(name, libLua+src) }
	return &Store{
		rdb: rdb, q: o.Alarms, prefix: o.Prefix, idleTTL: o.IdleTTL.Milliseconds(), wakeWithin: o.WakeWithin.Milliseconds(),
		init: s("init.lua", initLua), join: s("join.lua", joinLua), leave: s("leave.lua", leaveLua), act: s("act.lua", actLua),
		renew: s("renew.lua", renewLua), sweep: s("sweep.lua", sweepLua), end: s("end.lua", endLua), finish: s("finish.lua", finishLua),
	}, nil
}

// run evaluates script for code with the common ARGV (code, channel, now, TTL) and extra.
func (s *Store) run(ctx context.Context, script *redisx.Script, code string, now time.Time, extra ...any) *redis.Cmd {
	args := append([]any{code, s.Channel(code), now.UnixMilli(), s.idleTTL}, extra...)
	return script.Run(ctx, s.rdb, s.keys(code), args...)
}

// wakeIf wakes the scheduler of code's shard when a script made the room's alarm the shard's
// head (head is its due time in ms, 0 when it is not the head) due within wakeWithin of now.
// Under churn every join and leave re-arms the alarm, nearly always to a lease end seconds
// away: waking for those cost a publish and a claim of nothing per change.
func (s *Store) wakeIf(ctx context.Context, code string, head int64, now time.Time) {
	if head > 0 && head < now.UnixMilli()+s.wakeWithin {
		s.q.Wake(ctx, s.q.ShardOf(code))
	}
}

// Init creates a room's state from its Lobby entry unless it exists; ErrTombstoned when the
// room was deleted.
func (s *Store) Init(ctx context.Context, code string, seed Seed, now time.Time) error {
	res, err := s.run(ctx, s.init, code, now, seed.LastActivity.UnixMilli(), seed.CreatedAt.UnixMilli(), seed.Title, seed.DurationMs).Slice()
	if err != nil {
		return fmt.Errorf("init room: %w", err)
	}
	switch toInt(res[0]) {
	case -1:
		return ErrTombstoned
	case 1:
		s.wakeIf(ctx, code, toInt(res[1]), now)
	}
	return nil
}

// Join opens session ss with a lease until leaseUntil (ms), or re-attaches it when it is
// already open with the same role and client id (then nothing is counted again).
// ErrMissing when the room has no state; *ErrEnded when it has ended; ErrSessionTaken when
// the id is open for another role or client.
func (s *Store) Join(ctx context.Context, code string, ss Session, now, leaseUntil time.Time) (Joined, error) {
	res, err := s.run(ctx, s.join, code, now, ss.ID, string(ss.Role), ss.ClientID, leaseUntil.UnixMilli(), ss.Attachment, ss.Name).Slice()
	if err != nil {
		return Joined{}, fmt.Errorf("join room: %w", err)
	}
	if err := status(res); err != nil {
		return Joined{}, err
	}
	if toInt(res[0]) == -3 {
		return Joined{}, ErrSessionTaken
	}
	s.wakeIf(ctx, code, toInt(res[1]), now)
	ch := Change{Seq: toInt(res[2]), ViewersDelta: int32(toInt(res[3])), LeadersDelta: int32(toInt(res[4]))}
	f, _ := res[5].([]any)
	if len(f) != 14 || len(res) != 11 {
		return Joined{}, errors.New("join room: malformed state")
	}
	st := State{
		Playing: toInt(f[0]) == 1, PositionMs: toInt(f[1]), At: toInt(f[2]), FormationJSON: toStr(f[3]),
		Title: toStr(f[4]), DurationMs: toInt(f[5]), Viewers: int32(toInt(f[6])), Leaders: int32(toInt(f[7])),
		Version: toInt(f[8]), RateCenti: toInt(f[9]),
		CountIn: domain.CountIn{Beats: toInt(f[10]), BPM: toInt(f[11])},
		Loop:    domain.Loop{StartMs: toInt(f[12]), EndMs: toInt(f[13])},
	}
	if st.RateCenti == 0 {
		st.RateCenti = domain.DefaultRateCenti // a room from before rates
	}
	marks, _ := res[6].([]any)
	for _, m := range marks {
		st.Marks = append(st.Marks, toStr(m))
	}
	forms, _ := res[9].([]any)
	for i := 0; i+1 < len(forms); i += 2 {
		if js := toStr(forms[i+1]); js != "" {
			if st.MarkFormations == nil {
				st.MarkFormations = map[int64]string{}
			}
			st.MarkFormations[toInt(forms[i])] = js
		}
	}
	flat, _ := res[10].([]any)
	st.People = parsePeople(flat)
	return Joined{State: st, Change: ch, Resumed: toInt(res[7]) == 1, LastRef: toInt(res[8])}, nil
}

// Leave closes session id if the stream with attachment holds it ("" closes it whatever holds
// it); an unknown session, or one re-attached to another stream since, changes nothing.
func (s *Store) Leave(ctx context.Context, code, id, attachment string, now time.Time) (Change, error) {
	res, err := s.run(ctx, s.leave, code, now, id, attachment).Slice()
	if err != nil {
		return Change{}, fmt.Errorf("leave room: %w", err)
	}
	if toInt(res[0]) == 0 {
		return Change{}, nil
	}
	s.wakeIf(ctx, code, toInt(res[1]), now)
	return Change{Seq: toInt(res[2]), ViewersDelta: int32(toInt(res[3])), LeadersDelta: int32(toInt(res[4]))}, nil
}

// Act applies a leader action at now: state, last activity, alarm, and the relayed frame. It
// reports false for a repeat (a ref already applied), which changes nothing. ErrSessionClosed
// when the acting session is not open; *domain.ActRefusal when the room's state refuses it (a
// mark past the limit, a loop past the video's end, a mark formation without a mark), which
// changes nothing.
func (s *Store) Act(ctx context.Context, code string, a Action, now time.Time) (bool, error) {
	args := append([]any{a.Kind, a.Frame, a.Session, a.Ref}, a.Args...)
	res, err := s.run(ctx, s.act, code, now, args...).Slice()
	if err != nil {
		return false, fmt.Errorf("room action: %w", err)
	}
	if err := status(res); err != nil {
		return false, err
	}
	switch toInt(res[0]) {
	case -3:
		return false, ErrSessionClosed
	case -4:
		return false, refusal(a, toStr(res[1]), toInt(res[2]))
	case 2:
		return false, nil
	}
	s.wakeIf(ctx, code, toInt(res[1]), now)
	return true, nil
}

// RenewAll extends the leases of every renewal's sessions to leaseUntil, for all rooms in one
// pipeline (a replica holding sessions in 10,000 rooms renews them in one round trip, not
// 10,000), and fills in each renewal's outcome.
func (s *Store) RenewAll(ctx context.Context, renewals []Renewal, now, leaseUntil time.Time) error {
	cmds := make([]*redis.Cmd, len(renewals))
	_, err := redisx.Pipelined(ctx, s.rdb, []*redisx.Script{s.renew}, func(p redis.Pipeliner) {
		for i, r := range renewals {
			args := make([]any, 0, len(r.IDs)+5)
			args = append(args, r.Code, s.Channel(r.Code), now.UnixMilli(), s.idleTTL, leaseUntil.UnixMilli())
			for _, id := range r.IDs {
				args = append(args, id)
			}
			cmds[i] = s.renew.Queue(ctx, p, s.keys(r.Code), args...)
		}
	})
	if err != nil && cmds[0] == nil {
		return fmt.Errorf("renew sessions: %w", err)
	}
	for i := range renewals {
		r := &renewals[i]
		res, err := cmds[i].Slice()
		if err != nil {
			r.Err = fmt.Errorf("renew sessions: %w", err)
			continue
		}
		if r.Err = status(res); r.Err != nil {
			continue
		}
		s.wakeIf(ctx, r.Code, toInt(res[1]), now)
		raw, _ := res[2].([]any)
		for _, m := range raw {
			r.Missing = append(r.Missing, toStr(m))
		}
	}
	return nil
}

// Sweep runs the alarm's transition at now: close sessions whose lease ended, then end the room
// if it is idle. It returns the outcome, the end reason when Ending, and the occupancy change.
func (s *Store) Sweep(ctx context.Context, code string, now time.Time) (SweepOutcome, string, Change, error) {
	res, err := s.run(ctx, s.sweep, code, now).Slice()
	if err != nil {
		return 0, "", Change{}, fmt.Errorf("sweep room: %w", err)
	}
	switch toInt(res[0]) {
	case 0:
		return Gone, "", Change{}, nil
	case 2:
		return Ending, toStr(res[1]), Change{}, nil
	case 3:
		return Ending, domain.ReasonExpired, Change{Seq: toInt(res[1]), ViewersDelta: int32(toInt(res[2])), LeadersDelta: int32(toInt(res[3]))}, nil
	}
	s.wakeIf(ctx, code, toInt(res[1]), now)
	return Active, "", Change{Seq: toInt(res[2]), ViewersDelta: int32(toInt(res[3])), LeadersDelta: int32(toInt(res[4]))}, nil
}

// End marks the room ended for reason and makes its alarm due now. It reports false when the
// room has no state here (never joined).
func (s *Store) End(ctx context.Context, code, reason string, now time.Time) (bool, error) {
	n, err := s.run(ctx, s.end, code, now, reason, TombstoneTTL.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("end room: %w", err)
	}
	if n == 1 {
		s.q.Wake(ctx, s.q.ShardOf(code))
	}
	return n == 1, nil
}

// Finish deletes an ended room's storage; it refuses (an error) when the room is open.
func (s *Store) Finish(ctx context.Context, code string, now time.Time) error {
	n, err := s.run(ctx, s.finish, code, now, TombstoneTTL.Milliseconds()).Int64()
	if err != nil {
		return fmt.Errorf("delete room: %w", err)
	}
	if n < 0 {
		return errors.New("delete room: the room is open")
	}
	return nil
}

// Occupancy reads a room's absolute occupancy and its sequence number, for a Lobby snapshot.
// ErrMissing when the room has no state.
func (s *Store) Occupancy(ctx context.Context, code string) (seq int64, viewers, leaders int32, err error) {
	vals, err := s.rdb.HMGet(ctx, s.keys(code)[0], "seq", "viewers", "leaders").Result()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("read occupancy: %w", err)
	}
	if vals[0] == nil {
		return 0, 0, 0, ErrMissing
	}
	return toInt(vals[0]), int32(toInt(vals[1])), int32(toInt(vals[2])), nil
}

// People reads the people present in a room, in order of arrival. ErrMissing when the room
// has no state (nobody has joined it yet, or it was deleted).
func (s *Store) People(ctx context.Context, code string) ([]domain.Person, error) {
	k := s.keys(code)
	var exists *redis.IntCmd
	var people *redis.MapStringStringCmd
	// One MULTI: the room's existence and its people as of one moment.
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, k[0])
		people = p.HGetAll(ctx, k[10])
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read people: %w", err)
	}
	if exists.Val() == 0 {
		return nil, ErrMissing
	}
	flat := make([]any, 0, 2*len(people.Val()))
	for f, v := range people.Val() {
		flat = append(flat, f, v)
	}
	return parsePeople(flat), nil
}

// parsePeople reads the people hash (HGETALL: "<role>:<client id>", "<since ms> <name>", …).
func parsePeople(flat []any) []domain.Person {
	out := make([]domain.Person, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		info, val := toStr(flat[i]), toStr(flat[i+1])
		since, name, ok1 := strings.Cut(val, " ")
		if len(info) < 3 || info[1] != ':' || !ok1 {
			continue
		}
		ms, _ := strconv.ParseInt(since, 10, 64)
		out = append(out, domain.Person{Role: domain.Role(info[:1]), ClientID: info[2:], Name: name, Since: ms})
	}
	domain.SortPeople(out)
	return out
}

// Exists reports whether the room has state here.
func (s *Store) Exists(ctx context.Context, code string) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.keys(code)[0]).Result()
	return n == 1, err
}

// refusal is the sentence for act.lua's {-4, why, n}.
func refusal(a Action, why string, n int64) error {
	var err error
	switch why {
	case "marks":
		err = domain.TooManyMarks()
	case "loop":
		end, _ := a.Args[1].(int64)
		err = domain.LoopOutside(end, n)
	default:
		pos, _ := a.Args[0].(int64)
		err = domain.NoMarkAt(pos)
	}
	return &domain.ActRefusal{Err: err}
}

func status(res []any) error {
	if len(res) == 0 {
		return errors.New("empty script reply")
	}
	switch toInt(res[0]) {
	case -1:
		return ErrMissing
	case -2:
		return &ErrEnded{Reason: toStr(res[1])}
	}
	return nil
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func toStr(v any) string {
	s, _ := v.(string)
	return s
}
