// Package hub holds one replica's open sessions and fans the rooms' events out to them. A
// replica subscribes once per room it has sessions in (its Feed: Redis pub/sub) and delivers
// each event to its own sessions, so an event costs one publish however many replicas and
// sockets follow.
package hub

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

// Feed is the rooms' event stream shared by the replicas (Redis pub/sub: store.Feed).
type Feed interface {
	// Subscribe starts the room's events; it returns once the subscription is sent.
	Subscribe(ctx context.Context, code string) error
	// Unsubscribe stops them.
	Unsubscribe(ctx context.Context, code string) error
	// Run hands every event of a subscribed room to deliver until ctx ends.
	Run(ctx context.Context, deliver func(code string, ev Event)) error
}

// Kind of an event.
type Kind byte

// Event kinds, as the store's scripts publish them.
const (
	// Frame is a stamped leader frame, relayed to viewers.
	Frame Kind = 'f'
	// Occupancy is a change of viewers or leader presence, sent to everyone.
	Occupancy Kind = 'o'
	// End closes the room's sessions.
	End Kind = 'e'
	// Join is a person's arrival (their first session opened), sent to everyone.
	Join Kind = 'j'
	// Leave is a person's departure (their last session closed), sent to everyone.
	Leave Kind = 'l'
)

// Event is one event of a room.
type Event struct {
	// Version orders the room's events; a joiner skips those its state already includes.
	// End events have version 0.
	Version int64
	Kind    Kind
	// Frame is the encoded frame (Frame events), and Msg its decoded form, shared by every
	// session (decoded once per event, not once per session).
	Frame []byte
	Msg   any
	// Viewers and Leaders (Occupancy events).
	Viewers, Leaders int32
	// Reason (End events): "expired" or "ended".
	Reason string
	// Person who arrived (Join: every field) or left (Leave: Role and ClientID).
	Person domain.Person
}

// Session is one open session held by this replica.
type Session struct {
	ID string
	// Attachment is the token of the stream holding the session (a re-attach gets a new one).
	Attachment string
	Code       string
	Role       domain.Role
	ClientID   string
	// Events delivers the room's events in order; the consumer skips versions its state has.
	Events chan Event

	once    sync.Once
	done    chan struct{}
	reason  string
	counted atomic.Bool
}

// SetCounted marks whether the session is open in the store (counted in the room's
// occupancy); only counted sessions have their leases renewed and are reported missing.
func (s *Session) SetCounted(c bool) { s.counted.Store(c) }

// Done is closed when the hub ends the session; Reason then says why.
func (s *Session) Done() <-chan struct{} { return s.done }

// Reason is why the hub ended the session: "expired", "ended", or a sentence for an error.
func (s *Session) Reason() string { return s.reason }

func (s *Session) kill(reason string) {
	s.once.Do(func() { s.reason = reason; close(s.done) })
}

// Kill ends the session with reason.
func (s *Session) Kill(reason string) { s.kill(reason) }

// Hub is one replica's sessions by room.
type Hub struct {
	feed   Feed
	log    *slog.Logger
	buffer int
	decode func([]byte) (any, error)

	mu    sync.Mutex
	rooms map[string]map[string]*Session // code -> attachment -> session

	// subMu serialises (un)subscribing, so a room's last session leaving while a new one joins
	// cannot leave the room unsubscribed.
	subMu      sync.Mutex
	subscribed map[string]bool
}

// New returns a hub over feed; buffer is each session's event buffer (a session that falls
// that far behind is closed); decode decodes relayed frames (once per event, for all sessions).
func New(feed Feed, buffer int, decode func([]byte) (any, error), log *slog.Logger) *Hub {
	return &Hub{
		feed: feed, log: log, buffer: buffer, decode: decode,
		rooms:      map[string]map[string]*Session{},
		subscribed: map[string]bool{},
	}
}

// Run delivers the feed's events to the local sessions until ctx ends.
func (h *Hub) Run(ctx context.Context) error {
	return h.feed.Run(ctx, func(code string, ev Event) {
		if ev.Kind == Frame {
			msg, err := h.decode(ev.Frame)
			if err != nil {
				h.log.Warn("malformed room frame", "event", "room_event_malformed", "code", code)
				return
			}
			ev.Msg = msg
		}
		h.Deliver(code, ev)
	})
}

// Deliver hands ev to the room's local sessions; an End event ends them.
func (h *Hub) Deliver(code string, ev Event) {
	h.mu.Lock()
	sessions := make([]*Session, 0, len(h.rooms[code]))
	for _, s := range h.rooms[code] {
		sessions = append(sessions, s)
	}
	h.mu.Unlock()
	for _, s := range sessions {
		if ev.Kind == End {
			s.kill(ev.Reason)
			continue
		}
		if s.Events == nil {
			continue // a shared stream's session: its listener gets the event
		}
		select {
		case s.Events <- ev:
		default:
			s.kill("This connection fell too far behind the room; reconnect.")
		}
	}
}

// Replaced is the reason a session's older stream on this replica ends when the session is
// re-attached here on a new one.
const Replaced = "This session was re-attached on another stream."

// Add registers a session's stream (by its attachment), subscribing to its room on the room's
// first local session. It returns once the subscription is sent, so the caller may read the
// room's state after it.
func (h *Hub) Add(ctx context.Context, id, attachment, code string, role domain.Role, clientID string) (*Session, error) {
	return h.add(ctx, &Session{ID: id, Attachment: attachment, Code: code, Role: role, ClientID: clientID, Events: make(chan Event, h.buffer), done: make(chan struct{})})
}

// add registers s and subscribes to its room, as Add says.
func (h *Hub) add(ctx context.Context, s *Session) (*Session, error) {
	code := s.Code
	h.mu.Lock()
	if h.rooms[code] == nil {
		h.rooms[code] = map[string]*Session{}
	}
	h.rooms[code][s.Attachment] = s
	h.mu.Unlock()
	if err := h.subscription(ctx, code); err != nil {
		h.Remove(s)
		return nil, err
	}
	return s, nil
}

// Remove unregisters a session, unsubscribing from its room after its last local session.
func (h *Hub) Remove(s *Session) {
	h.mu.Lock()
	if room := h.rooms[s.Code]; room != nil {
		delete(room, s.Attachment)
		if len(room) == 0 {
			delete(h.rooms, s.Code)
		}
	}
	h.mu.Unlock()
	if err := h.subscription(context.Background(), s.Code); err != nil {
		h.log.Warn("room unsubscribe failed", "event", "room_unsubscribe_failed", "code", s.Code, "err", err)
	}
}

// subscription makes the room's subscription match whether it has local sessions.
func (h *Hub) subscription(ctx context.Context, code string) error {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	want := h.rooms[code] != nil
	h.mu.Unlock()
	switch {
	case want && !h.subscribed[code]:
		if err := h.feed.Subscribe(ctx, code); err != nil {
			return err
		}
		h.subscribed[code] = true
	case !want && h.subscribed[code]:
		delete(h.subscribed, code)
		return h.feed.Unsubscribe(ctx, code)
	}
	return nil
}

// Supersede ends this replica's other streams of s's session (given up by their caller for s,
// a re-attach) with Replaced; they are no longer counted here.
func (h *Hub) Supersede(s *Session) {
	h.mu.Lock()
	var old []*Session
	for _, o := range h.rooms[s.Code] {
		if o != s && o.ID == s.ID {
			old = append(old, o)
		}
	}
	h.mu.Unlock()
	for _, o := range old {
		o.SetCounted(false)
		o.kill(Replaced)
	}
}

// Sessions lists the local counted session ids by room, for lease renewal. A session still
// joining (or already closing) is left out: the store would rightly report it missing.
func (h *Hub) Sessions() map[string][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]string, len(h.rooms))
	for code, room := range h.rooms {
		ids := make([]string, 0, len(room))
		for _, s := range room {
			if s.counted.Load() {
				ids = append(ids, s.ID)
			}
		}
		if len(ids) > 0 {
			out[code] = ids
		}
	}
	return out
}

// KillSessions ends the named local sessions of a room with reason.
func (h *Hub) KillSessions(code string, ids []string, reason string) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	h.mu.Lock()
	var hit []*Session
	for _, s := range h.rooms[code] {
		if want[s.ID] {
			hit = append(hit, s)
		}
	}
	h.mu.Unlock()
	for _, s := range hit {
		s.kill(reason)
	}
}
