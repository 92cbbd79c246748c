// Package store keeps chat rooms in Redis: one stream per room holds the kept messages under
// ids "<n>-0" from a per-room counter (append.lua: consecutive, with a jump above every
// earlier id after a failover), and each new message is published on the room's channel once
// it is stored; who is in each room is kept beside it, under leases (presence.go). All of the chat service's Redis access is in this package (Lua in the .lua files
// beside it; the live feed in feed.go).
package store

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

var (
	//go:embed append.lua
	appendSrc string
	//go:embed read.lua
	readSrc string
)

// Options configure a Store. Every zero value has the default given in its comment.
type Options struct {
	// Prefix starts every key. Default "vigil".
	Prefix string
	// Keep is how many messages each room's log keeps. Default 1000.
	Keep int
	// PostIDTTL is how long a post's idempotency key is remembered. Default 1m.
	PostIDTTL time.Duration
	// Logger reports messages stored but not published. Default slog.Default().
	Logger *slog.Logger
}

// Store reads and appends room messages.
type Store struct {
	rdb      redis.UniversalClient
	prefix   string
	keep     int
	postTTL  time.Duration
	log      *slog.Logger
	appendSc *redisx.Script
	readSc   *redisx.Script
	presence presenceScripts
}

// New builds a Store on rdb.
func New(rdb redis.UniversalClient, o Options) *Store {
	if o.Prefix == "" {
		o.Prefix = "vigil"
	}
	if o.Keep <= 0 {
		o.Keep = 1000
	}
	if o.PostIDTTL <= 0 {
		o.PostIDTTL = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Store{
		rdb: rdb, prefix: o.Prefix, keep: o.Keep, postTTL: o.PostIDTTL, log: o.Logger,
		appendSc: redisx.NewScript("append.lua", appendSrc), readSc: redisx.NewScript("read.lua", readSrc),
		presence: newPresenceScripts(),
	}
}

// Keep is how many messages each room's log keeps.
func (s *Store) Keep() int { return s.keep }

// Append stores a validated post at time at and then publishes it. dup is true when the
// post's idempotency key was seen before: nothing was stored, the message carries the first
// post's id, and it is published again (its first publish may have been lost). The message is
// published only once the script's call succeeded, after the durability wait, so a subscriber
// never sees a message a failover then loses. A publish that fails is logged, not returned:
// the message is stored, and subscribers read it from the log at their next gap or resync.
func (s *Store) Append(ctx context.Context, p domain.Post, at time.Time) (m domain.Message, dup bool, err error) {
	k := s.keys(p.Room)
	m = domain.Message{UserID: p.UserID, User: p.User, Body: p.Body, TS: at.UnixMilli()}
	ttl := "0"
	postKey := k.seq // any key of the room's slot; the script does not touch it without a TTL
	if p.PostID != "" {
		ttl = strconv.FormatInt(s.postTTL.Milliseconds(), 10)
		postKey = s.postKey(p.Room, p.PostID)
	}
	res, err := s.appendSc.Run(ctx, s.rdb, []string{k.log, k.seq, postKey, k.epoch}, encode(m), s.keep, k.channel, ttl).Slice()
	if err != nil {
		return m, false, fmt.Errorf("chat append: %w", err)
	}
	if len(res) < 2 {
		return m, false, fmt.Errorf("chat append: unexpected reply %v", res)
	}
	id, ok1 := res[0].(int64)
	seen, ok2 := res[1].(int64)
	if !ok1 || !ok2 {
		return m, false, fmt.Errorf("chat append: unexpected reply %v", res)
	}
	m.ID = id
	if len(res) == 4 {
		channel, _ := res[2].(string)
		payload, _ := res[3].(string)
		if err := s.publish(ctx, k.seq, channel, payload); err != nil {
			s.log.Warn("chat message stored but not published; subscribers read it from the log at their next gap",
				"event", "chat_publish_failed", "room", p.Room, "id", id, "err", err)
		}
	}
	return m, seen == 1, nil
}

// publish sends the room's payloads on channel, in order, from the master of key's slot
// (redisx.Publisher: a room's messages leave from one node, so they arrive in order on a
// Cluster too).
func (s *Store) publish(ctx context.Context, key, channel string, payloads ...string) error {
	c, err := redisx.Publisher(ctx, s.rdb, key)
	if err != nil {
		return err
	}
	if len(payloads) == 1 {
		return c.Publish(ctx, channel, payloads[0]).Err()
	}
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range payloads {
			p.Publish(ctx, channel, m)
		}
		return nil
	})
	return err
}

// Last reads the newest n messages of a room, oldest first, and the room's last id.
func (s *Store) Last(ctx context.Context, room string, n int) ([]domain.Message, int64, error) {
	msgs, seq, err := s.read(ctx, room, "last", 0, n)
	reverse(msgs)
	return msgs, seq, err
}

// After reads the oldest n messages with an id greater than after, and the room's last id.
func (s *Store) After(ctx context.Context, room string, after int64, n int) ([]domain.Message, int64, error) {
	return s.read(ctx, room, "after", after, n)
}

// Before reads the newest n messages with an id less than before, oldest first, and the
// room's last id.
func (s *Store) Before(ctx context.Context, room string, before int64, n int) ([]domain.Message, int64, error) {
	msgs, seq, err := s.read(ctx, room, "before", before, n)
	reverse(msgs)
	return msgs, seq, err
}

func (s *Store) read(ctx context.Context, room, mode string, bound int64, n int) ([]domain.Message, int64, error) {
	k := s.keys(room)
	res, err := s.readSc.Run(ctx, s.rdb, []string{k.log, k.seq}, mode, bound, n).Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("chat read: %w", err)
	}
	if len(res) != 2 {
		return nil, 0, fmt.Errorf("chat read: unexpected reply %v", res)
	}
	seq, ok := res[0].(int64)
	entries, ok2 := res[1].([]any)
	if !ok || !ok2 {
		return nil, 0, fmt.Errorf("chat read: unexpected reply %v", res)
	}
	msgs := make([]domain.Message, 0, len(entries))
	for _, e := range entries {
		m, err := parseEntry(e)
		if err != nil {
			return nil, 0, err
		}
		msgs = append(msgs, m)
	}
	return msgs, seq, nil
}

// parseEntry reads one XRANGE entry: {id, {"m", encoded}}.
func parseEntry(e any) (domain.Message, error) {
	pair, ok := e.([]any)
	if !ok || len(pair) != 2 {
		return domain.Message{}, errCorrupt
	}
	idStr, ok := pair[0].(string)
	fields, ok2 := pair[1].([]any)
	if !ok || !ok2 || len(fields) != 2 {
		return domain.Message{}, errCorrupt
	}
	id, err := entryID(idStr)
	if err != nil {
		return domain.Message{}, errCorrupt
	}
	enc, ok := fields[1].(string)
	if !ok {
		return domain.Message{}, errCorrupt
	}
	return decode(id, enc)
}

func reverse(msgs []domain.Message) {
	for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
		msgs[i], msgs[j] = msgs[j], msgs[i]
	}
}
