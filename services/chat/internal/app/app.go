// Package app holds the chat use cases: post, list, and attach to a room's live messages with
// no gap and no duplicate, whatever pub/sub drops.
package app

import (
	"context"
	"log/slog"
	"sync"
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
	lease     time.Duration
	log       *slog.Logger
}

// Options are the App's settings; the service fills every one.
type Options struct {
	// Now is the clock that stamps messages.
	Now func() time.Time
	// JoinLimit is how many messages a new member gets.
	JoinLimit int
	// Lease is how long an entered session stays open without a renewal.
	Lease time.Duration
	// Logger for the use cases' events.
	Logger *slog.Logger
}

// New builds the use cases on a store and the replica's live feed.
func New(s *store.Store, f *store.Feed, o Options) *App {
	return &App{store: s, feed: f, now: o.Now, joinLimit: o.JoinLimit, lease: o.Lease, log: o.Logger}
}

// Lease is how long an entered session stays open without a renewal; attachments renew every
// third of it.
func (a *App) Lease() time.Duration { return a.lease }

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
	// Presence is the room's members when the attachment asked for presence, else nil.
	Presence *domain.Presence
}

// Update is one thing an attachment delivers after its history: a message, a presence change
// at the next version, or (after presence events were lost) the whole presence.
type Update struct {
	Message  *domain.Message
	Change   *domain.Change
	Presence *domain.Presence
}

// Attachment is a member's live view of a room: Next returns every message after the
// history, in id order, once each.
type Attachment struct {
	a    *App
	room string
	sub  *store.Sub
	last int64
	// presence: deliver presence changes; pversion is the presence version delivered last.
	presence bool
	pversion int64
	// holder is the attachment's token in the sessions it holds (store.Enter).
	holder string

	// opMu orders the attachment's presence writes: a renewal that re-enters a lapsed session
	// never races that session's exit.
	opMu     sync.Mutex
	sessions map[string]domain.Session
}

// Attach subscribes to room, then reads its history: the last JoinLimit messages, or, when
// since is set, every kept message after since; with presence, also the room's members, and
// Next then delivers their changes.
func (a *App) Attach(ctx context.Context, room string, since *int64, presence bool) (*Attachment, History, error) {
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
	at := &Attachment{a: a, room: room, sub: sub, last: h.LastID, presence: presence, holder: uuid.NewString(), sessions: map[string]domain.Session{}}
	if presence {
		p, err := a.store.Presence(ctx, room, a.now())
		if err != nil {
			sub.Close()
			return nil, History{}, err
		}
		h.Presence, at.pversion = &p, p.Version
	}
	return at, h, nil
}

// maxBatch bounds how many queued messages one Next returns.
const maxBatch = 128

// Next waits for the room's next events and returns them in order: messages in id order, with
// any gap that pub/sub dropped read back from the log, and (with presence) presence changes in
// version order, a gap answered by the whole presence. It fails with ErrTooSlow when the
// attachment fell behind, and with ctx's error when ctx ends.
func (at *Attachment) Next(ctx context.Context) ([]Update, error) {
	var e store.Event
	select {
	case e = <-at.sub.C:
	case <-at.sub.Dropped:
		return nil, ErrTooSlow
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var out []Update
	for {
		var err error
		if e.Change == nil {
			out, err = at.accept(ctx, out, e.Message)
		}
		if err == nil && at.presence && (e.Change != nil || e.Message.ID == 0) {
			out, err = at.acceptChange(ctx, out, e.Change)
		}
		if err != nil {
			return nil, err
		}
		if len(out) >= maxBatch {
			return out, nil
		}
		select {
		case e = <-at.sub.C:
		default:
			return out, nil
		}
	}
}

// acceptChange appends a presence change at the next version to out; after a gap (or for a
// Resync hint, c nil) it reads the presence and appends it whole when it moved on.
func (at *Attachment) acceptChange(ctx context.Context, out []Update, c *domain.Change) ([]Update, error) {
	if c != nil && c.Version <= at.pversion {
		return out, nil
	}
	if c != nil && c.Version == at.pversion+1 {
		at.pversion = c.Version
		return append(out, Update{Change: c}), nil
	}
	p, err := at.a.store.Presence(ctx, at.room, at.a.now())
	if err != nil {
		return out, err
	}
	if p.Version <= at.pversion {
		return out, nil
	}
	at.pversion = p.Version
	return append(out, Update{Presence: &p}), nil
}

// accept appends m to out, first reading from the log whatever came between the last id and
// m (or everything after the last id, for a Resync hint), and skipping what was delivered.
func (at *Attachment) accept(ctx context.Context, out []Update, m domain.Message) ([]Update, error) {
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
				out = append(out, Update{Message: &g})
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
	return append(out, Update{Message: &m}), nil
}

// Close ends the attachment.
func (at *Attachment) Close() { at.sub.Close() }
