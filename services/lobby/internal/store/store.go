// Package store keeps the lobby in Redis. Every key carries the one hash tag {<prefix>:lobby}:
// the lobby is one index, listed whole, so every script touches one slot and runs unchanged on
// Redis Cluster. Rooms are columns (one hash per field, keyed by code) so that listing 10,000
// rooms is a handful of whole-column reads in one pipeline, not 10,000 lookups.
package store

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
)

var (
	//go:embed lib.lua
	libLua string
	//go:embed create.lua
	createLua string
	//go:embed remove.lua
	removeLua string
	//go:embed prune.lua
	pruneLua string
	//go:embed delta.lua
	deltaLua string
	//go:embed snapshot.lua
	snapshotLua string
	//go:embed touch.lua
	touchLua string
	//go:embed poll.lua
	pollLua string
)

// ErrCodeTaken is returned by Create when the code is already in use.
var ErrCodeTaken = errors.New("room code taken")

// Store is the lobby's Redis store.
type Store struct {
	rdb      redis.UniversalClient
	k        keys
	create   *redisx.Script
	remove   *redisx.Script
	prune    *redisx.Script
	delta    *redisx.Script
	snapshot *redisx.Script
	touch    *redisx.Script
	poll     *redisx.Script
}

// Options configure a Store. Every zero value has the default given in its comment.
type Options struct {
	// Prefix starts every key. Default "vigil".
	Prefix string
}

// New returns the lobby's store over rdb.
func New(rdb redis.UniversalClient, o Options) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("lobby store: a Redis client is required")
	}
	if o.Prefix == "" {
		o.Prefix = "vigil"
	}
	script := func(name, src string) *redisx.Script { return redisx.NewScript(name, libLua+src) }
	return &Store{
		rdb:      rdb,
		k:        keysFor(o.Prefix),
		create:   script("create.lua", createLua),
		remove:   script("remove.lua", removeLua),
		prune:    script("prune.lua", pruneLua),
		delta:    script("delta.lua", deltaLua),
		snapshot: script("snapshot.lua", snapshotLua),
		touch:    script("touch.lua", touchLua),
		poll:     script("poll.lua", pollLua),
	}, nil
}

// encodeInfo packs a room's fixed fields; names and titles hold no control characters, so a
// newline separates them (splitting is far cheaper than JSON when listing 10,000 rooms).
func encodeInfo(r domain.Room) string {
	return strconv.FormatInt(r.CreatedAt, 10) + "\n" + strconv.FormatInt(r.Video.DurationMs, 10) + "\n" + r.Name + "\n" + r.Video.Title
}

func decodeInfo(code, s string) (domain.Room, error) {
	parts := strings.SplitN(s, "\n", 4)
	if len(parts) != 4 {
		return domain.Room{}, fmt.Errorf("room %q: malformed info", code)
	}
	created, err1 := strconv.ParseInt(parts[0], 10, 64)
	dur, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return domain.Room{}, fmt.Errorf("room %q: malformed info", code)
	}
	return domain.Room{Code: code, Name: parts[2], CreatedAt: created, Video: domain.Video{Title: parts[3], DurationMs: dur}}, nil
}

// Create adds r (its CreatedAt is also its first activity) with the leader token's hash.
// It returns ErrCodeTaken when r.Code is in use.
func (s *Store) Create(ctx context.Context, r domain.Room, tokenHash string) error {
	ok, err := s.create.Run(ctx, s.rdb, s.k.all(), r.Code, r.CreatedAt, encodeInfo(r), tokenHash).Int()
	if err != nil {
		return fmt.Errorf("create room: %w", err)
	}
	if ok == 0 {
		return ErrCodeTaken
	}
	return nil
}

// Remove drops a room; it reports whether the room was there.
func (s *Store) Remove(ctx context.Context, code string) (bool, error) {
	n, err := s.remove.Run(ctx, s.rdb, s.k.all(), code).Int()
	if err != nil {
		return false, fmt.Errorf("remove room: %w", err)
	}
	return n > 0, nil
}

// Version is the lobby's change counter: every change of any room bumps it.
func (s *Store) Version(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.k.version).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read lobby version: %w", err)
	}
	return v, nil
}

// Cursor is a position in the lobby's change log: the last change a cached list includes.
type Cursor struct {
	// ID is the change's stream entry ("0-0" before any change).
	ID string
	// Version is the lobby's version after that change.
	Version int64
}

// maxChanges is the most changes Changes reads at once; more means a full reload is cheaper.
const maxChanges = 5000

// List returns the rooms active at or after cutoff most recently active first, the
// position in the change log they include (they may include later changes too, which a patch
// re-reads harmlessly), and how many rooms are idle past cutoff (for Prune).
//
// The read is one pipeline of plain commands: the activity index and whole-column HGETALLs,
// joined here. Redis serves a 10,000-room column in one native call, far cheaper than a script
// that looks every room up one by one; a room missing from a column (removed in between) is
// skipped.
func (s *Store) List(ctx context.Context, cutoffAt time.Time) ([]domain.Room, Cursor, int64, error) {
	cutoff := cutoffAt.UnixMilli()
	var last *redis.XMessageSliceCmd
	var stale *redis.IntCmd
	var rows *redis.ZSliceCmd
	var infos, viewers, leaders *redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		last = p.XRevRangeN(ctx, s.k.changes, "+", "-", 1)
		stale = p.ZCount(ctx, s.k.activity, "-inf", "("+strconv.FormatInt(cutoff, 10))
		rows = p.ZRevRangeByScoreWithScores(ctx, s.k.activity, &redis.ZRangeBy{Min: strconv.FormatInt(cutoff, 10), Max: "+inf"})
		infos = p.HGetAll(ctx, s.k.info)
		viewers = p.HGetAll(ctx, s.k.viewers)
		leaders = p.HGetAll(ctx, s.k.leaders)
		return nil
	})
	if err != nil {
		return nil, Cursor{}, 0, fmt.Errorf("list rooms: %w", err)
	}
	cur := Cursor{ID: "0-0"}
	if msgs := last.Val(); len(msgs) == 1 {
		cur = cursorOf(msgs[0])
	}
	out := make([]domain.Room, 0, len(rows.Val()))
	info, vs, ls := infos.Val(), viewers.Val(), leaders.Val()
	for _, z := range rows.Val() {
		code, _ := z.Member.(string)
		raw, ok := info[code]
		if !ok {
			continue
		}
		r, err := decodeInfo(code, raw)
		if err != nil {
			return nil, Cursor{}, 0, err
		}
		r.LastActivity = int64(z.Score)
		v, _ := strconv.ParseInt(vs[code], 10, 32)
		l, _ := strconv.ParseInt(ls[code], 10, 32)
		r.Viewers, r.LeaderPresent = int32(v), l > 0
		out = append(out, r)
	}
	return out, cur, stale.Val(), nil
}

func cursorOf(m redis.XMessage) Cursor {
	v, _ := strconv.ParseInt(text(m.Values["v"]), 10, 64)
	return Cursor{ID: m.ID, Version: v}
}

// text is a stream field's value as a string (go-redis gives strings; anything else is printed).
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// Poll is what changed in the lobby after a cursor.
type Poll struct {
	// From is the cursor the changes were read after.
	From Cursor
	// Version is the lobby's version when the poll read it: the changes cover at least that.
	Version int64
	// Codes are the rooms changed after From (each once), and Next the cursor of the last
	// change read.
	Codes []string
	Next  Cursor
	// Rooms are the changed rooms as they are now, read with the changes: those of Codes
	// still in the lobby and active at or after the poll's cutoff (the others were removed or
	// went idle).
	Rooms []domain.Room
	// Complete is false when the log cannot say (it was trimmed past From, or holds too many
	// changes): the caller then reloads the whole list.
	Complete bool
}

// Poll reads the lobby's version, the changes after cursor after and the rooms they changed
// in one round trip (poll.lua): an unchanged lobby answers an empty range, a changed one the
// changed rooms, leaving out those last active before cutoffAt.
func (s *Store) Poll(ctx context.Context, after Cursor, cutoffAt time.Time) (Poll, error) {
	res, err := s.poll.Run(ctx, s.rdb, []string{s.k.version, s.k.changes, s.k.activity, s.k.info, s.k.viewers, s.k.leaders},
		after.ID, after.Version, maxChanges).Slice()
	if err != nil {
		return Poll{}, fmt.Errorf("read lobby changes: %w", err)
	}
	if len(res) != 5 {
		return Poll{}, fmt.Errorf("read lobby changes: poll.lua answered %d values, want 5", len(res))
	}
	out := Poll{From: after, Next: after}
	if v := text(res[0]); v != "" {
		if out.Version, err = strconv.ParseInt(v, 10, 64); err != nil {
			return Poll{}, fmt.Errorf("read lobby version: %w", err)
		}
	}
	complete, _ := res[1].(int64)
	out.Complete = complete == 1
	if !out.Complete {
		return out, nil
	}
	out.Next.ID = text(res[2])
	if out.Next.Version, err = strconv.ParseInt(text(res[3]), 10, 64); err != nil {
		return Poll{}, fmt.Errorf("read lobby changes: version %q: %w", res[3], err)
	}
	flat, _ := res[4].([]any)
	cutoff := cutoffAt.UnixMilli()
	for i := 0; i+4 < len(flat); i += 5 {
		code := text(flat[i])
		out.Codes = append(out.Codes, code)
		score, err := strconv.ParseFloat(text(flat[i+1]), 64)
		raw := text(flat[i+2])
		if err != nil || raw == "" || int64(score) < cutoff {
			continue // removed, or idle past the cutoff
		}
		r, err := decodeInfo(code, raw)
		if err != nil {
			return Poll{}, err
		}
		r.LastActivity = int64(score)
		v, _ := strconv.ParseInt(text(flat[i+3]), 10, 32)
		l, _ := strconv.ParseInt(text(flat[i+4]), 10, 32)
		r.Viewers, r.LeaderPresent = int32(v), l > 0
		out.Rooms = append(out.Rooms, r)
	}
	return out, nil
}

// Prune deletes up to limit rooms last active before cutoff and reports how many.
func (s *Store) Prune(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	n, err := s.prune.Run(ctx, s.rdb, s.k.all(), cutoff.UnixMilli(), limit).Int()
	if err != nil {
		return 0, fmt.Errorf("prune rooms: %w", err)
	}
	return n, nil
}

// pageKeyLen is the size of the page tokens' HMAC key.
const pageKeyLen = 32

// PageKey returns the key that signs page tokens. The first replica to ask makes it (SET NX
// of random bytes), so every replica signs and checks with the same key and a token from one
// is honoured by another. Deleting the key, and restarting the replicas (each keeps the key it
// read), invalidates every token given out (they read as garbled, and callers start again from
// the first page).
func (s *Store) PageKey(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, pageKeyLen)
	_, _ = rand.Read(fresh)
	key, err := s.rdb.SetArgs(ctx, s.k.pageKey, fresh, redis.SetArgs{Mode: "NX", Get: true}).Bytes()
	if errors.Is(err, redis.Nil) {
		return fresh, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read page key: %w", err)
	}
	if len(key) != pageKeyLen {
		return nil, fmt.Errorf("page key %s holds %d bytes, want %d", s.k.pageKey, len(key), pageKeyLen)
	}
	return key, nil
}

// Get returns a room, or domain.ErrNotFound when it is missing or was last active before
// cutoff (ms).
func (s *Store) Get(ctx context.Context, code string, cutoffAt time.Time) (domain.Room, error) {
	cutoff := cutoffAt.UnixMilli()
	var score *redis.FloatCmd
	var info, viewers, leaders *redis.StringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		score = p.ZScore(ctx, s.k.activity, code)
		info = p.HGet(ctx, s.k.info, code)
		viewers = p.HGet(ctx, s.k.viewers, code)
		leaders = p.HGet(ctx, s.k.leaders, code)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return domain.Room{}, fmt.Errorf("get room: %w", err)
	}
	if score.Err() != nil || info.Err() != nil || int64(score.Val()) < cutoff {
		return domain.Room{}, domain.NotFound(code)
	}
	r, err := decodeInfo(code, info.Val())
	if err != nil {
		return domain.Room{}, err
	}
	r.LastActivity = int64(score.Val())
	v, _ := viewers.Int64()
	l, _ := leaders.Int64()
	r.Viewers, r.LeaderPresent = int32(v), l > 0
	return r, nil
}

// TokenHash returns the stored hash of a room's leader token ("" when the room is missing).
func (s *Store) TokenHash(ctx context.Context, code string) (string, error) {
	h, err := s.rdb.HGet(ctx, s.k.token, code).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	return h, nil
}

// ApplyDelta applies an occupancy delta with a compare-and-set on seq.
func (s *Store) ApplyDelta(ctx context.Context, code string, seq int64, viewers, leaders int32) (domain.DeltaOutcome, error) {
	n, err := s.delta.Run(ctx, s.rdb, []string{s.k.activity, s.k.seq, s.k.viewers, s.k.leaders, s.k.version, s.k.changes}, code, seq, viewers, leaders).Int()
	if err != nil {
		return 0, fmt.Errorf("apply delta: %w", err)
	}
	switch n {
	case 1:
		return domain.Applied, nil
	case 2:
		return domain.Stale, nil
	case 3:
		return domain.Resync, nil
	}
	return 0, domain.NotFound(code)
}

// ApplySnapshot sets the absolute occupancy unless a newer seq is applied; it reports
// whether it did.
func (s *Store) ApplySnapshot(ctx context.Context, code string, seq int64, viewers, leaders int32) (bool, error) {
	n, err := s.snapshot.Run(ctx, s.rdb, []string{s.k.activity, s.k.seq, s.k.viewers, s.k.leaders, s.k.version, s.k.changes}, code, seq, viewers, leaders).Int()
	if err != nil {
		return false, fmt.Errorf("apply snapshot: %w", err)
	}
	if n < 0 {
		return false, domain.NotFound(code)
	}
	return n == 1, nil
}

// Touch raises a room's last activity to at (ms); it never lowers it and never re-creates a
// removed room.
func (s *Store) Touch(ctx context.Context, code string, at time.Time) error {
	if err := s.touch.Run(ctx, s.rdb, []string{s.k.activity, s.k.version, s.k.changes}, code, at.UnixMilli()).Err(); err != nil {
		return fmt.Errorf("touch room: %w", err)
	}
	return nil
}
