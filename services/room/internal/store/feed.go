package store

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
)

// Feed is the rooms' events over Redis pub/sub (hub.Feed): one subscription per room a replica
// has sessions in, carrying what the scripts publish as "<version> <kind> <payload>".
type Feed struct {
	s   *Store
	ps  *redis.PubSub
	log *slog.Logger

	mu    sync.Mutex
	codes map[string]string // channel -> code
}

var _ hub.Feed = (*Feed)(nil)

// Feed opens the replica's pub/sub connection; it closes when Run's ctx ends.
func (s *Store) Feed(ctx context.Context, log *slog.Logger) *Feed {
	return &Feed{s: s, ps: s.rdb.Subscribe(ctx), log: log, codes: map[string]string{}}
}

// Subscribe implements hub.Feed.
func (f *Feed) Subscribe(ctx context.Context, code string) error {
	ch := f.s.Channel(code)
	f.mu.Lock()
	f.codes[ch] = code
	f.mu.Unlock()
	return f.ps.Subscribe(ctx, ch)
}

// Unsubscribe implements hub.Feed.
func (f *Feed) Unsubscribe(ctx context.Context, code string) error {
	ch := f.s.Channel(code)
	f.mu.Lock()
	delete(f.codes, ch)
	f.mu.Unlock()
	return f.ps.Unsubscribe(ctx, ch)
}

// Run implements hub.Feed.
func (f *Feed) Run(ctx context.Context, deliver func(code string, ev hub.Event)) error {
	ch := f.ps.Channel(redis.WithChannelSize(4096))
	for {
		select {
		case <-ctx.Done():
			_ = f.ps.Close()
			return nil
		case m, ok := <-ch:
			if !ok {
				return nil
			}
			ev, ok := Parse([]byte(m.Payload))
			if !ok {
				f.log.Warn("malformed room event", "event", "room_event_malformed", "channel", m.Channel)
				continue
			}
			f.mu.Lock()
			code := f.codes[m.Channel]
			f.mu.Unlock()
			deliver(code, ev)
		}
	}
}

// PublishEnd ends the room's sessions on every replica with reason.
func (s *Store) PublishEnd(ctx context.Context, code, reason string) error {
	return s.rdb.Publish(ctx, s.Channel(code), "0 e "+reason).Err()
}

// Parse decodes "<version> <kind> <payload>".
func Parse(b []byte) (hub.Event, bool) {
	sp := bytes.IndexByte(b, ' ')
	if sp < 1 || len(b) < sp+3 || b[sp+2] != ' ' {
		return hub.Event{}, false
	}
	v, err := strconv.ParseInt(string(b[:sp]), 10, 64)
	if err != nil {
		return hub.Event{}, false
	}
	ev := hub.Event{Version: v, Kind: hub.Kind(b[sp+1])}
	payload := b[sp+3:]
	switch ev.Kind {
	case hub.Frame:
		ev.Frame = payload
	case hub.Occupancy:
		a, c, ok := bytes.Cut(payload, []byte{' '})
		if !ok {
			return hub.Event{}, false
		}
		viewers, err1 := strconv.Atoi(string(a))
		leaders, err2 := strconv.Atoi(string(c))
		if err1 != nil || err2 != nil {
			return hub.Event{}, false
		}
		ev.Viewers, ev.Leaders = int32(viewers), int32(leaders)
	case hub.End:
		ev.Reason = string(payload)
	case hub.Join, hub.Leave:
		// "<role>\t<client id>" and, for a join, "\t<since>\t<name>".
		f := strings.SplitN(string(payload), "\t", 4)
		if len(f[0]) != 1 || (ev.Kind == hub.Join) != (len(f) == 4) || len(f) < 2 {
			return hub.Event{}, false
		}
		ev.Person = domain.Person{Role: domain.Role(f[0]), ClientID: f[1]}
		if ev.Kind == hub.Join {
			since, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				return hub.Event{}, false
			}
			ev.Person.Since, ev.Person.Name = since, f[3]
		}
	default:
		return hub.Event{}, false
	}
	return ev, true
}
