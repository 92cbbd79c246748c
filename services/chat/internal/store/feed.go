package store

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

// Feed delivers a replica's live messages: ONE Redis pub/sub connection per replica, one
// channel subscription per room that has subscribers on this replica, and a local fan-out to
// them. Pub/sub may drop messages (a reconnect); subscribers detect that by a gap in the ids
// (ids are contiguous per room) or by a Resync hint, and read the gap from the log.
type Feed struct {
	s   *Store
	log *slog.Logger
	ps  *redis.PubSub
	buf int

	mu    sync.Mutex
	rooms map[string]*feedRoom // by channel
}

type feedRoom struct {
	room      string
	subs      map[*Sub]struct{}
	confirmed chan struct{} // closed once Redis confirmed the subscription
	done      bool
}

// Event is one published event of a room: a message, or (Change set) a presence change. An
// Event with neither (Message.ID 0, no Change) is a Resync hint: events may have been missed,
// so read the log after the last id you have, and the presence.
type Event struct {
	Message domain.Message
	Change  *domain.Change
}

// Sub is one subscriber's view of a room's live events.
type Sub struct {
	// C carries the room's events in publish order.
	C <-chan Event
	// Dropped is closed when the subscriber fell behind by more than its buffer; nothing
	// more is sent on C.
	Dropped <-chan struct{}

	c       chan Event
	dropped chan struct{}
	f       *Feed
	channel string
	room    *feedRoom
}

// NewFeed builds the feed of s; buf is each subscriber's buffer (default 1024). Run it.
func NewFeed(s *Store, buf int, log *slog.Logger) *Feed {
	if buf <= 0 {
		buf = 1024
	}
	return &Feed{s: s, log: log, buf: buf, rooms: map[string]*feedRoom{}, ps: s.rdb.Subscribe(context.Background())}
}

// Run receives published messages and fans them out until ctx ends.
func (f *Feed) Run(ctx context.Context) error {
	defer f.ps.Close()
	ch := f.ps.ChannelWithSubscriptions(redis.WithChannelSize(4096))
	for {
		select {
		case <-ctx.Done():
			return nil
		case msg, ok := <-ch:
			if !ok {
				return errors.New("chat feed: pub/sub closed")
			}
			switch m := msg.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					f.confirm(m.Channel)
				}
			case *redis.Message:
				f.deliver(m)
			}
		}
	}
}

// confirm marks a room's subscription live. A repeated confirmation means go-redis
// re-subscribed after a reconnect, so subscribers get a Resync hint.
func (f *Feed) confirm(channel string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[channel]
	if r == nil {
		return
	}
	select {
	case <-r.confirmed:
		f.log.Warn("chat feed re-subscribed; resyncing", "event", "feed_resync", "room", r.room)
		for sub := range r.subs {
			f.push(r, sub, Event{})
		}
	default:
		close(r.confirmed)
	}
}

func (f *Feed) deliver(pm *redis.Message) {
	var e Event
	var err error
	if strings.HasPrefix(pm.Payload, "p") {
		var c domain.Change
		c, err = decodeChange(pm.Payload)
		e.Change = &c
	} else {
		e.Message, err = decodePublished(pm.Payload)
	}
	if err != nil {
		f.log.Error("chat feed: bad payload", "event", "feed_error", "channel", pm.Channel, "err", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rooms[pm.Channel]
	if r == nil {
		return
	}
	for sub := range r.subs {
		f.push(r, sub, e)
	}
}

// push hands e to sub without blocking; a full buffer drops the subscriber. Called with f.mu.
func (f *Feed) push(r *feedRoom, sub *Sub, e Event) {
	select {
	case sub.c <- e:
	default:
		delete(r.subs, sub)
		close(sub.dropped)
	}
}

// Subscribe starts delivering room's messages, and returns once Redis has confirmed the
// subscription: every message published after that reaches Sub.C, so a log read done after
// Subscribe returns misses nothing in between.
func (f *Feed) Subscribe(ctx context.Context, room string) (*Sub, error) {
	channel := f.s.keys(room).channel
	sub := &Sub{c: make(chan Event, f.buf), dropped: make(chan struct{}), f: f, channel: channel}
	sub.C, sub.Dropped = sub.c, sub.dropped
	f.mu.Lock()
	r := f.rooms[channel]
	if r == nil {
		r = &feedRoom{room: room, subs: map[*Sub]struct{}{}, confirmed: make(chan struct{})}
		if err := f.ps.Subscribe(ctx, channel); err != nil {
			f.mu.Unlock()
			return nil, err
		}
		f.rooms[channel] = r
	}
	r.subs[sub] = struct{}{}
	sub.room = r
	f.mu.Unlock()
	select {
	case <-r.confirmed:
		return sub, nil
	case <-ctx.Done():
		sub.Close()
		return nil, ctx.Err()
	}
}

// Close stops the subscription; the room's channel is unsubscribed when its last subscriber
// leaves.
func (s *Sub) Close() {
	f := s.f
	f.mu.Lock()
	defer f.mu.Unlock()
	r := s.room
	delete(r.subs, s)
	if len(r.subs) > 0 || r.done {
		return
	}
	r.done = true
	if f.rooms[s.channel] == r {
		delete(f.rooms, s.channel)
		// Under f.mu, so a later Subscribe to the same room is sent after this.
		if err := f.ps.Unsubscribe(context.Background(), s.channel); err != nil && !strings.Contains(err.Error(), "closed") {
			f.log.Warn("chat feed: unsubscribe failed", "event", "feed_error", "room", r.room, "err", err)
		}
	}
}
