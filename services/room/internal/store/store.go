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

// ErrEnded is returned for a room that has ended; Reason says why.
type ErrEnded struct{ Reason string }

func (e *ErrEnded) Error() string { return "room ended: " + e.Reason }

// ErrMissing is returned when the room has no state here.
var ErrMissing = errors.New("room has no state")

// ErrTombstoned is returned by Init for a room whose storage was deleted.
var ErrTombstoned = errors.New("room was deleted")

// ErrSessionTaken is returned by Join when the session id is open for another role or client.
var ErrSessionTaken = errors.New("session id is open for another role or client")

// ErrSessionClosed is returned by Act when the acting session is not open (its lease ended).
var ErrSessionClosed = errors.New("session is not open")

// Store is the rooms' Redis store.
type Store struct {
	rdb     redis.UniversalClient
	q       *alarm.Queue
	prefix  string
	idleTTL int64 // ms
	init    *redisx.Script
	join    *redisx.Script
	leave   *redisx.Script
	act     *redisx.Script
	renew   *redisx.Script
	sweep   *redisx.Script
	end     *redisx.Script
	finish  *redisx.Script
}

// New returns the store; q is the rooms' alarm queue, idleTTL their inactivity TTL.
func New(rdb redis.UniversalClient, q *alarm.Queue, prefix string, idleTTL time.Duration) *Store {
	s := func(name, src string) *redisx.Script { return redisx.NewScript(name, libLua+src) }
	return &Store{
		rdb: rdb, q: q, prefix: prefix, idleTTL: idleTTL.Milliseconds(),
		init: s("init.lua", initLua), join: s("join.lua", joinLua), leave: s("leave.lua", leaveLua), act: s("act.lua", actLua),
		renew: s("renew.lua", renewLua), sweep: s("sweep.lua", sweepLua), end: s("end.lua", endLua), finish: s("finish.lua", finishLua),
	}
}

// Channel is the pub/sub channel of a room's events.
func (s *Store) Channel(code string) string { return s.prefix + ":room:events:" + code }

func (s *Store) keys(code string) []string {
	k := s.q.KeysOf(code)
	base := k.Tag + ":" + code
	return []string{base + ":state", base + ":sessions", base + ":sinfo", base + ":refs", base + ":marks", k.Alarms, base + ":gone",
		base + ":attach", base + ":crefs"}
}

// run evaluates script for code with the common ARGV (code, channel, now, TTL) and extra.
func (s *Store) run(ctx context.Context, script *redisx.Script, code string, now int64, extra ...any) *redis.Cmd {
	args := append([]any{code, s.Channel(code), now, s.idleTTL}, extra...)
	return script.Run(ctx, s.rdb, s.keys(code), args...)
}

func (s *Store) wakeIf(ctx context.Context, code string, head int64) {
	if head == 1 {
		s.q.Wake(ctx, s.q.ShardOf(code))
	}
}

// Seed is what a room's state starts from: its Lobby entry.
type Seed struct {
	LastActivity, CreatedAt int64
	Title                   string
	DurationMs              int64
}

// Init creates a room's state from its Lobby entry unless it exists; ErrTombstoned when the
// room was deleted.
func (s *Store) Init(ctx context.Context, code string, seed Seed, now int64) error {
	n, err := s.run(ctx, s.init, code, now, seed.LastActivity, seed.CreatedAt, seed.Title, seed.DurationMs).Int64()
	if err != nil {
		return fmt.Errorf("init room: %w", err)
	}
	if n < 0 {
		return ErrTombstoned
	}
	s.wakeIf(ctx, code, n-1)
	return nil
}

// Change is an occupancy change for the Lobby: Seq is 0 when nothing changed.
type Change struct {
	Seq                        int64
	ViewersDelta, LeadersDelta int32
}

// State is a room's state as a joiner receives it.
type State struct {
	Playing       bool
	PositionMs    int64
	At            int64
	FormationJSON string // "" when unset
	Title         string
	DurationMs    int64
	Viewers       int32
	Leaders       int32
	Version       int64
	Marks         []string // each mark's wire form (roomv1.Mark), oldest first
}

// Session names a session and the stream it is attached to.
type Session struct {
	ID       string
	Role     domain.Role
	ClientID string
	// Attachment identifies the stream holding the session; Leave closes the session only for
	// the stream it is attached to now.
	Attachment string
}

// Joined is what Join answers: the state for the joiner, the occupancy change for the Lobby,
// whether the session was re-attached, and the last control ref applied for it.
type Joined struct {
	State   State
	Change  Change
	Resumed bool
	LastRef int64
}

// Join opens session ss with a lease until leaseUntil (ms), or re-attaches it when it is
// already open with the same role and client id (then nothing is counted again).
// ErrMissing when the room has no state; *ErrEnded when it has ended; ErrSessionTaken when
// the id is open for another role or client.
func (s *Store) Join(ctx context.Context, code string, ss Session, now, leaseUntil int64) (Joined, error) {
	res, err := s.run(ctx, s.join, code, now, ss.ID, string(ss.Role), ss.ClientID, leaseUntil, ss.Attachment).Slice()
	if err != nil {
		return Joined{}, fmt.Errorf("join room: %w", err)
	}
	if err := status(res); err != nil {
		return Joined{}, err
	}
	if toInt(res[0]) == -3 {
		return Joined{}, ErrSessionTaken
	}
	s.wakeIf(ctx, code, toInt(res[1]))
	ch := Change{Seq: toInt(res[2]), ViewersDelta: int32(toInt(res[3])), LeadersDelta: int32(toInt(res[4]))}
	f, _ := res[5].([]any)
	if len(f) != 9 || len(res) != 9 {
		return Joined{}, errors.New("join room: malformed state")
	}
	st := State{
		Playing: toInt(f[0]) == 1, PositionMs: toInt(f[1]), At: toInt(f[2]), FormationJSON: toStr(f[3]),
		Title: toStr(f[4]), DurationMs: toInt(f[5]), Viewers: int32(toInt(f[6])), Leaders: int32(toInt(f[7])),
		Version: toInt(f[8]),
	}
	marks, _ := res[6].([]any)
	for _, m := range marks {
		st.Marks = append(st.Marks, toStr(m))
	}
	return Joined{State: st, Change: ch, Resumed: toInt(res[7]) == 1, LastRef: toInt(res[8])}, nil
}

// Leave closes session id if the stream with attachment holds it ("" closes it whatever holds
// it); an unknown session, or one re-attached to another stream since, changes nothing.
func (s *Store) Leave(ctx context.Context, code, id, attachment string, now int64) (Change, error) {
	res, err := s.run(ctx, s.leave, code, now, id, attachment).Slice()
	if err != nil {
		return Change{}, fmt.Errorf("leave room: %w", err)
	}
	if toInt(res[0]) == 0 {
		return Change{}, nil
	}
	s.wakeIf(ctx, code, toInt(res[1]))
	return Change{Seq: toInt(res[2]), ViewersDelta: int32(toInt(res[3])), LeadersDelta: int32(toInt(res[4]))}, nil
}

// Action is one leader action as act.lua takes it.
type Action struct {
	// Kind is sync, formation, mark or reload.
	Kind string
	// Frame is the stamped frame every replica relays (an encoded roomv1.JoinResponse).
	Frame []byte
	// Session is the acting session's id; it must be open.
	Session string
	// Ref is the caller's number for the action, increasing per session (0: none). An action
	// whose ref is at or below the session's last applied one is a repeat and is not applied.
	Ref int64
	// Args are the kind's ARGV[9..] (see act.lua): sync: playing 0/1, positionMs;
	// formation: its JSON; mark: the mark's wire form; reload: 0, or 1, title, durationMs.
	Args []any
}

// Act applies a leader action at now: state, last activity, alarm, and the relayed frame. It
// reports false for a repeat (a ref already applied), which changes nothing. ErrSessionClosed
// when the acting session is not open.
func (s *Store) Act(ctx context.Context, code string, a Action, now int64) (bool, error) {
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
	case 2:
		return false, nil
	}
	s.wakeIf(ctx, code, toInt(res[1]))
	return true, nil
}

// Renewal is one room's lease renewal: the sessions this replica holds in it, and (after
// RenewAll) what the store said.
type Renewal struct {
	Code string
	IDs  []string
	// Missing are the sessions no longer open (swept after their lease ended).
	Missing []string
	// Err is ErrMissing or *ErrEnded when the room is gone or ended, or a store error.
	Err error
}

// RenewAll extends the leases of every renewal's sessions to leaseUntil, for all rooms in one
// pipeline (a replica holding sessions in 10,000 rooms renews them in one round trip, not
// 10,000), and fills in each renewal's outcome.
func (s *Store) RenewAll(ctx context.Context, renewals []Renewal, now, leaseUntil int64) error {
	cmds := make([]*redis.Cmd, len(renewals))
	_, err := redisx.Pipelined(ctx, s.rdb, []*redisx.Script{s.renew}, func(p redis.Pipeliner) {
		for i, r := range renewals {
			args := make([]any, 0, len(r.IDs)+5)
			args = append(args, r.Code, s.Channel(r.Code), now, s.idleTTL, leaseUntil)
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
		s.wakeIf(ctx, r.Code, toInt(res[1]))
		raw, _ := res[2].([]any)
		for _, m := range raw {
			r.Missing = append(r.Missing, toStr(m))
		}
	}
	return nil
}

// SweepOutcome is what the alarm's transition found.
type SweepOutcome int

// Sweep outcomes.
const (
	// Gone: the room has no state; nothing to do.
	Gone SweepOutcome = iota
	// Active: the room is in use; its alarm is re-armed.
	Active
	// Ending: the room has ended (now or earlier); finish its clean-up.
	Ending
)

// Sweep runs the alarm's transition at now: close sessions whose lease ended, then end the room
// if it is idle. It returns the outcome, the end reason when Ending, and the occupancy change.
func (s *Store) Sweep(ctx context.Context, code string, now int64) (SweepOutcome, string, Change, error) {
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
	s.wakeIf(ctx, code, toInt(res[1]))
	return Active, "", Change{Seq: toInt(res[2]), ViewersDelta: int32(toInt(res[3])), LeadersDelta: int32(toInt(res[4]))}, nil
}

// End marks the room ended for reason and makes its alarm due now. It reports false when the
// room has no state here (never joined).
func (s *Store) End(ctx context.Context, code, reason string, now int64) (bool, error) {
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
func (s *Store) Finish(ctx context.Context, code string, now int64) error {
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

// Exists reports whether the room has state here.
func (s *Store) Exists(ctx context.Context, code string) (bool, error) {
	n, err := s.rdb.Exists(ctx, s.keys(code)[0]).Result()
	return n == 1, err
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
