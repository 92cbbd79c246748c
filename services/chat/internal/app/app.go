// Package app holds the chat use cases: post, list, and attach to a room's live messages with
// no gap and no duplicate, whatever pub/sub drops.
package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/vigil-dev/vigil/pkg/usererr"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
	"github.com/vigil-dev/vigil/services/chat/internal/store"
)

// ErrTooSlow marks an attachment that fell behind its buffer and was dropped; the caller
// attaches again from the last id it has.
var ErrTooSlow = usererr.New(usererr.ErrExhausted, "the stream fell behind the room; join again from the last id received")

// App runs the chat use cases on a store and the replica's live feed.
type App struct {
	store     *store.Store
	feed      *store.Feed
	now       func() time.Time
	joinLimit int
	log       *slog.Logger
}

// Options are the App's settings; the service fills every one.
type Options struct {
	// Now is the clock that stamps messages.
	Now func() time.Time
	// JoinLimit is how many messages a new member gets.
	JoinLimit int
	// Logger for the use cases' events.
	Logger *slog.Logger
}

// New builds the use cases on a store and the replica's live feed.
func New(s *store.Store, f *store.Feed, o Options) *App {
	return &App{store: s, feed: f, now: o.Now, joinLimit: o.JoinLimit, log: o.Logger}
}

// JoinLimit is how many messages a new member gets.
func (a *App) JoinLimit() int { return a.joinLimit }

// Post validates and stores a message, publishing it to the room's members. A post without a
// user id gets a random UUID, as in the seed.
func (a *App) Post(ctx context.Context, p domain.Post) (domain.Message, error) {
	if p.UserID == "" {
		p.UserID = uuid.NewString()
	}
	if err := domain.ValidatePost(&p); err != nil {
		return domain.Message{}, err
	}
	m, dup, err := a.store.Append(ctx, p, a.now())
	if err != nil {
		return domain.Message{}, err
	}
	if dup {
		a.log.InfoContext(ctx, "repeated post stored once", "event", "post_dup", "room", p.Room, "id", m.ID)
	}
	return m, nil
}

// List reads a page of a room's history, oldest first, and the room's last id.
func (a *App) List(ctx context.Context, room string, limit int, before, since *int64) ([]domain.Message, int64, error) {
	if err := domain.ValidateRoom(room); err != nil {
		return nil, 0, err
	}
	pg, err := domain.ValidatePage(limit, before, since, a.joinLimit)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case pg.Before > 0:
		return a.store.Before(ctx, room, pg.Before, pg.Limit)
	case pg.HasSince:
		return a.store.After(ctx, room, pg.Since, pg.Limit)
	default:
		return a.store.Last(ctx, room, pg.Limit)
	}
}

// History is what a member gets on attaching.
type History struct {
	// Messages, oldest first.
	Messages []domain.Message
	// LastID is the room's last id when read; live messages continue after it.
	LastID int64
	// Truncated is true when a resume asked for messages no longer kept.
	Truncated bool
}

// Attachment is a member's live view of a room: Next returns every message after the
// history, in id order, once each.
type Attachment struct {
	a    *App
	room string
	sub  *store.Sub
	last int64
}

// Attach subscribes to room, then reads its history: the last JoinLimit messages, or, when
// since is set, every kept message after since.
func (a *App) Attach(ctx context.Context, room string, since *int64) (*Attachment, History, error) {
	if err := domain.ValidateRoom(room); err != nil {
		return nil, History{}, err
	}
	if since != nil {
		if err := domain.ValidateSince(*since); err != nil {
			return nil, History{}, err
		}
	}
	// Subscribe first: every message published from here on reaches the subscription, and the
	// history read below covers everything before, so nothing falls between the two.
	sub, err := a.feed.Subscribe(ctx, room)
	if err != nil {
		return nil, History{}, err
	}
	var h History
	if since != nil {
		h.Messages, h.LastID, err = a.store.After(ctx, room, *since, a.store.Keep())
		h.Truncated = *since < h.LastID && (len(h.Messages) == 0 || h.Messages[0].ID > *since+1)
	} else {
		h.Messages, h.LastID, err = a.store.Last(ctx, room, a.joinLimit)
	}
	if err != nil {
		sub.Close()
		return nil, History{}, err
	}
	return &Attachment{a: a, room: room, sub: sub, last: h.LastID}, h, nil
}

// maxBatch bounds how many queued messages one Next returns.
const maxBatch = 128

// Next waits for the room's next messages and returns them in id order, with any gap that
// pub/sub dropped read back from the log. It fails with ErrTooSlow when the attachment fell
// behind, and with ctx's error when ctx ends.
func (at *Attachment) Next(ctx context.Context) ([]domain.Message, error) {
	var m domain.Message
	select {
	case m = <-at.sub.C:
	case <-at.sub.Dropped:
		return nil, ErrTooSlow
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var out []domain.Message
	for {
		var err error
		if out, err = at.accept(ctx, out, m); err != nil {
			return nil, err
		}
		if len(out) >= maxBatch {
			return out, nil
		}
		select {
		case m = <-at.sub.C:
		default:
			return out, nil
		}
	}
}

// accept appends m to out, first reading from the log whatever came between the last id and
// m (or everything after the last id, for a Resync hint), and skipping what was delivered.
func (at *Attachment) accept(ctx context.Context, out []domain.Message, m domain.Message) ([]domain.Message, error) {
	if m.ID != 0 && m.ID <= at.last {
		return out, nil
	}
	if m.ID == 0 || m.ID > at.last+1 {
		n := at.a.store.Keep()
		if m.ID != 0 && m.ID-at.last-1 < int64(n) {
			n = int(m.ID - at.last - 1)
		}
		gap, _, err := at.a.store.After(ctx, at.room, at.last, n)
		if err != nil {
			return out, err
		}
		for _, g := range gap {
			if g.ID > at.last && (m.ID == 0 || g.ID < m.ID) {
				out = append(out, g)
				at.last = g.ID
			}
		}
		if m.ID == 0 {
			return out, nil
		}
		if m.ID > at.last+1 {
			at.a.log.WarnContext(ctx, "chat messages no longer kept were skipped", "event", "gap_lost", "room", at.room, "from", at.last+1, "to", m.ID-1)
		}
	}
	at.last = m.ID
	return append(out, m), nil
}

// Close ends the attachment.
func (at *Attachment) Close() { at.sub.Close() }
