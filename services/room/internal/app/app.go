// Package app holds the room's use cases: opening, re-attaching and closing sessions, the
// leader's actions, ending a room, the alarm's transition (sweep dead sessions, expire idle
// rooms) and the session lease renewal. It knows no Redis, protobuf or gRPC: the store, the
// Lobby, the outbox to the Lobby and the frame codec are ports (interfaces below), and the hub
// is this replica's sessions in plain Go.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
)

// lobbyTimeout bounds one synchronous call to the Lobby or the store on a closing path.
const lobbyTimeout = 5 * time.Second

// Store keeps rooms (internal/store: Redis and its Lua scripts).
type Store interface {
	Init(ctx context.Context, code string, seed domain.Seed, now time.Time) error
	Join(ctx context.Context, code string, ss domain.Attached, now, leaseUntil time.Time) (domain.Joined, error)
	Leave(ctx context.Context, code, id, attachment string, now time.Time) (domain.Change, error)
	Act(ctx context.Context, code string, a domain.Action, now time.Time) (bool, error)
	RenewAll(ctx context.Context, renewals []domain.Renewal, now, leaseUntil time.Time) error
	Sweep(ctx context.Context, code string, now time.Time) (domain.SweepOutcome, string, domain.Change, error)
	End(ctx context.Context, code, reason string, now time.Time) (bool, error)
	Finish(ctx context.Context, code string, now time.Time) error
	// People reads the people present (domain.ErrNoState: the room has no state here).
	People(ctx context.Context, code string) ([]domain.Person, error)
	// PublishEnd ends the room's sessions on every replica.
	PublishEnd(ctx context.Context, code, reason string) error
}

// Lobby is what the room asks the Lobby service (internal/lobbylink.Client). A room the Lobby
// does not list is domain.ErrNotFound.
type Lobby interface {
	// VerifyLeaderToken reports whether token is the room's leader token, with its entry.
	VerifyLeaderToken(ctx context.Context, code, token string) (bool, domain.Seed, error)
	// Seed reads the room's entry, what its state starts from.
	Seed(ctx context.Context, code string) (domain.Seed, error)
	// Remove takes the room off the list (idempotent).
	Remove(ctx context.Context, code string) error
}

// Outbox pushes occupancy and activity to the Lobby in the background (internal/lobbylink.Link).
type Outbox interface {
	Delta(code string, ch domain.Change)
	Touch(code string, at time.Time)
	Snapshot(code string)
}

// Codec encodes a stamped control: the frame every session receives and, for a mark, the form
// the room's marks list keeps (internal/transport: protobuf).
type Codec interface {
	Encode(c domain.Control, at time.Time) (frame, stored []byte, err error)
}

// Options are the App's settings; the service fills every one.
type Options struct {
	// IdleTTL: a room with no leader action for this long expires.
	IdleTTL time.Duration
	// SessionLease: a session not renewed for this long stops counting.
	SessionLease time.Duration
	// Now is the clock of every time decision.
	Now func() time.Time
	// Logger for the rooms' lifecycle events.
	Logger *slog.Logger
}

// App is one Room replica's use cases.
type App struct {
	st    Store
	hub   *hub.Hub
	link  Outbox
	lobby Lobby
	codec Codec
	c     Options
}

// New assembles the use cases.
func New(st Store, h *hub.Hub, link Outbox, lobby Lobby, codec Codec, c Options) *App {
	return &App{st: st, hub: h, link: link, lobby: lobby, codec: codec, c: c}
}

// Hello is what a session opens with.
type Hello struct {
	Code        string
	Role        domain.Role
	ClientID    string
	LeaderToken string
	// SessionID is the caller's id for the session ("": the service picks one). An open
	// session's id with the same role and client id re-attaches to it.
	SessionID string
	// Shared: the session is one of an Attach stream's, whose listener gets the room's events.
	Shared bool
	// Name is the person's display name ("": domain.DefaultName of the client id).
	Name string
}

// Open checks a hello (the leader's token with the Lobby), creates the room's state from its
// Lobby entry on the first join, opens and counts the session (or re-attaches to it, counting
// nothing), and returns it with the state the joiner starts from.
func (a *App) Open(ctx context.Context, h Hello) (*hub.Session, domain.Joined, error) {
	if err := domain.CheckCode(h.Code); err != nil {
		return nil, domain.Joined{}, err
	}
	if h.Role != domain.Leader && h.Role != domain.Viewer {
		return nil, domain.Joined{}, domain.Invalid("role must be leader or viewer.")
	}
	if err := domain.CheckClientID(h.ClientID); err != nil {
		return nil, domain.Joined{}, err
	}
	if h.Name == "" {
		h.Name = domain.DefaultName(h.ClientID)
	} else if err := domain.CheckName(h.Name); err != nil {
		return nil, domain.Joined{}, err
	}
	if h.SessionID == "" {
		h.SessionID = newID()
	} else if err := domain.CheckSessionID(h.SessionID); err != nil {
		return nil, domain.Joined{}, err
	}
	var seed *domain.Seed
	if h.Role == domain.Leader {
		if h.LeaderToken == "" {
			return nil, domain.Joined{}, domain.Unauthenticated()
		}
		ok, entry, err := a.lobby.VerifyLeaderToken(ctx, h.Code, h.LeaderToken)
		if err != nil {
			return nil, domain.Joined{}, err
		}
		if !ok {
			return nil, domain.Joined{}, domain.Unauthenticated()
		}
		seed = &entry
	}
	add := a.hub.Add
	if h.Shared {
		add = a.hub.AddShared
	}
	s, err := add(ctx, h.SessionID, newID(), h.Code, h.Role, h.ClientID)
	if err != nil {
		return nil, domain.Joined{}, fmt.Errorf("subscribe to room: %w", err)
	}
	joined, err := a.join(ctx, s, h.Name, seed)
	if err != nil {
		var ue *domain.UserError
		if !errors.As(err, &ue) {
			// The join script may have run although its answer was lost (a timeout): undo it
			// now rather than leave a phantom viewer until its lease ends.
			a.Close(s)
		} else {
			a.hub.Remove(s)
		}
		return nil, domain.Joined{}, err
	}
	if joined.Resumed {
		a.hub.Supersede(s)
		a.c.Logger.DebugContext(ctx, "session re-attached", "event", "session_resumed", "code", h.Code, "session", h.SessionID)
	}
	return s, joined, nil
}

func (a *App) join(ctx context.Context, s *hub.Session, name string, seed *domain.Seed) (domain.Joined, error) {
	now := a.c.Now()
	leaseUntil := now.Add(a.c.SessionLease)
	ss := domain.Attached{ID: s.ID, Role: s.Role, ClientID: s.ClientID, Attachment: s.Attachment, Name: name}
	joined, err := a.st.Join(ctx, s.Code, ss, now, leaseUntil)
	seeded := false
	if errors.Is(err, domain.ErrNoState) {
		seeded = true
		// The room's first join: its state starts from its Lobby entry.
		if seed == nil {
			entry, err := a.lobby.Seed(ctx, s.Code)
			if err != nil {
				return domain.Joined{}, err
			}
			seed = &entry
		}
		if !seed.LastActivity.Add(a.c.IdleTTL).After(now) {
			return domain.Joined{}, domain.NotFound(s.Code) // idle past its TTL: it is only not pruned yet
		}
		err = a.st.Init(ctx, s.Code, *seed, now)
		if errors.Is(err, domain.ErrTombstoned) {
			return domain.Joined{}, domain.NotFound(s.Code)
		}
		if err != nil {
			return domain.Joined{}, err
		}
		a.c.Logger.InfoContext(ctx, "room state created", "event", "room_init", "code", s.Code)
		joined, err = a.st.Join(ctx, s.Code, ss, now, leaseUntil)
	}
	var ended *domain.ErrEnded
	switch {
	case errors.As(err, &ended) || errors.Is(err, domain.ErrNoState):
		return domain.Joined{}, domain.NotFound(s.Code)
	case errors.Is(err, domain.ErrSessionTaken):
		return domain.Joined{}, domain.SessionTaken()
	case err != nil:
		return domain.Joined{}, err
	}
	s.SetCounted(true)
	if seeded {
		// A new state's seqs start at Redis TIME (init.lua), above any the Lobby holds for the
		// room: a delta would be a gap and cost a resync, a snapshot is taken at once.
		a.link.Snapshot(s.Code)
	} else {
		a.link.Delta(s.Code, joined.Change)
	}
	return joined, nil
}

// Detach lets go of a session without closing it: this replica is shutting down, and the
// session stays open under its lease for its caller to re-attach on another replica. Nobody
// re-attaching within the lease (the caller died too), the lease sweep closes it.
func (a *App) Detach(s *hub.Session) {
	s.SetCounted(false)
	a.hub.Remove(s)
}

// Close closes a session: it leaves the count first, then the hub. A session re-attached on
// another stream since is not closed (the store checks the attachment).
func (a *App) Close(s *hub.Session) {
	s.SetCounted(false)
	ctx, cancel := context.WithTimeout(context.Background(), lobbyTimeout)
	defer cancel()
	ch, err := a.st.Leave(ctx, s.Code, s.ID, s.Attachment, a.c.Now())
	if err != nil {
		// The session's lease runs out and the sweeper closes it.
		a.c.Logger.Warn("session close not recorded; its lease will end it", "event", "session_close_failed", "code", s.Code, "err", err)
	}
	a.hub.Remove(s)
	a.link.Delta(s.Code, ch)
}

// Act applies a leader's control from session s: it is stamped, stored, relayed to every
// viewer, and it moves the room's inactivity alarm. It returns the stamp: the room-clock time
// the relayed frame carries (a leader times its own count-in by it). A repeat (a ref the session
// already applied, re-sent after a re-attach) changes nothing and has no stamp.
func (a *App) Act(ctx context.Context, s *hub.Session, c domain.Control) (at time.Time, repeat bool, err error) {
	if s.Role != domain.Leader && c.Kind != "" {
		return time.Time{}, false, domain.ViewerControl(c.Kind)
	}
	if err := domain.CheckControl(&c); err != nil {
		return time.Time{}, false, err
	}
	now := a.c.Now()
	frame, stored, err := a.codec.Encode(c, now)
	if err != nil {
		return time.Time{}, false, err
	}
	act := domain.Action{Kind: c.Kind, Frame: frame, Session: s.ID, Ref: c.Ref}
	switch c.Kind {
	case domain.KindSync:
		var count domain.CountIn
		if c.CountIn != nil {
			count = *c.CountIn
		}
		act.Args = []any{boolInt(c.Playing), c.PositionMs, c.RateCenti, count.Beats, count.BPM}
	case domain.KindFormation:
		act.Args = []any{c.Formation}
	case domain.KindMark:
		act.Args = []any{stored, c.PositionMs, int64(domain.MaxMarks)}
	case domain.KindLoop:
		act.Args = []any{c.Loop.StartMs, c.Loop.EndMs}
	case domain.KindMarkFormation:
		js := string(c.Formation)
		if js == "null" {
			js = "" // cleared: the mark stays, without a formation
		}
		act.Args = []any{c.PositionMs, js}
	case domain.KindReload:
		act.Args = []any{0}
		if v := c.Video; v != nil {
			act.Args = []any{1, v.Title, v.DurationMs}
		}
	}
	applied, err := a.st.Act(ctx, s.Code, act, now)
	var (
		ended   *domain.ErrEnded
		refused *domain.ActRefusal
	)
	switch {
	case errors.As(err, &refused):
		return time.Time{}, false, refused.Err
	case errors.As(err, &ended) || errors.Is(err, domain.ErrNoState):
		return time.Time{}, false, domain.NotFound(s.Code)
	case errors.Is(err, domain.ErrSessionClosed):
		return time.Time{}, false, domain.SessionLapsed()
	case err != nil:
		return time.Time{}, false, err
	}
	if applied {
		a.link.Touch(s.Code, now)
	}
	if !applied {
		return time.Time{}, true, nil
	}
	return now, false, nil
}

// End ends a room for everyone on its leader's word.
func (a *App) End(ctx context.Context, code, token string) error {
	if err := domain.CheckCode(code); err != nil {
		return err
	}
	if token == "" {
		return domain.Unauthenticated()
	}
	ok, _, err := a.lobby.VerifyLeaderToken(ctx, code, token)
	if err != nil {
		return err
	}
	if !ok {
		return domain.Unauthenticated()
	}
	hasState, err := a.st.End(ctx, code, domain.ReasonEnded, a.c.Now())
	if err != nil {
		return err
	}
	a.c.Logger.InfoContext(ctx, "room ended by its leader", "event", "room_ended", "code", code)
	if !hasState {
		// Never joined: nothing here to close, only the Lobby entry.
		return a.lobby.Remove(ctx, code)
	}
	if err := a.finish(ctx, code, domain.ReasonEnded); err != nil {
		// The room's alarm is due now and finishes the clean-up.
		a.c.Logger.Warn("room clean-up left to its alarm", "event", "room_cleanup_deferred", "code", code, "err", err)
	}
	return nil
}

// finish is the clean-up of an ended room, in order: close every replica's sockets, remove the
// room from the Lobby, delete its storage last. Each step is idempotent, so a retry after a
// partial failure (or a second run) is harmless.
func (a *App) finish(ctx context.Context, code, reason string) error {
	if err := a.st.PublishEnd(ctx, code, reason); err != nil {
		return fmt.Errorf("close sockets: %w", err)
	}
	a.hub.Deliver(code, hub.Event{Kind: hub.End, Reason: reason}) // this replica's, without waiting for the echo
	if err := a.lobby.Remove(ctx, code); err != nil {
		return fmt.Errorf("remove from lobby: %w", err)
	}
	return a.st.Finish(ctx, code, a.c.Now())
}

// HandleAlarm is the rooms' alarm: close sessions whose lease ended, and expire the room if it
// has been idle for the TTL (re-arming it otherwise), then finish an ended room's clean-up.
func (a *App) HandleAlarm(ctx context.Context, f alarm.Firing) error {
	outcome, reason, ch, err := a.st.Sweep(ctx, f.ID, a.c.Now())
	if err != nil {
		return err
	}
	switch outcome {
	case domain.Active:
		if ch.Seq > 0 {
			a.c.Logger.InfoContext(ctx, "lapsed sessions closed", "event", "sessions_swept", "code", f.ID,
				"viewersDelta", ch.ViewersDelta, "leadersDelta", ch.LeadersDelta, "isRetry", f.IsRetry(), "retryCount", f.RetryCount())
		}
		a.link.Delta(f.ID, ch)
		return nil
	case domain.Gone:
		return nil
	}
	a.c.Logger.InfoContext(ctx, "room closing", "event", "room_closing", "code", f.ID, "reason", reason,
		"isRetry", f.IsRetry(), "retryCount", f.RetryCount())
	if err := a.finish(ctx, f.ID, reason); err != nil {
		return err
	}
	a.c.Logger.InfoContext(ctx, "room closed", "event", "room_closed", "code", f.ID, "reason", reason)
	return nil
}

// RenewLeases extends the leases of this replica's sessions until ctx ends, every third of
// the lease. It also sends each of its rooms' occupancy snapshot to the Lobby, which bounds
// how long any lost update can last, and ends local sessions whose room is gone.
func (a *App) RenewLeases(ctx context.Context) error {
	t := time.NewTicker(a.c.SessionLease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		a.renew(ctx)
	}
}

func (a *App) renew(ctx context.Context) {
	sessions := a.hub.Sessions()
	if len(sessions) == 0 {
		return
	}
	renewals := make([]domain.Renewal, 0, len(sessions))
	for code, ids := range sessions {
		renewals = append(renewals, domain.Renewal{Code: code, IDs: ids})
	}
	now := a.c.Now()
	if err := a.st.RenewAll(ctx, renewals, now, now.Add(a.c.SessionLease)); err != nil {
		if ctx.Err() == nil {
			a.c.Logger.Warn("session leases not renewed", "event", "lease_renew_failed", "rooms", len(renewals), "err", err)
		}
		return
	}
	for _, r := range renewals {
		var ended *domain.ErrEnded
		switch {
		case errors.As(r.Err, &ended):
			a.hub.KillSessions(r.Code, r.IDs, ended.Reason)
			continue
		case errors.Is(r.Err, domain.ErrNoState):
			a.hub.KillSessions(r.Code, r.IDs, domain.ReasonEnded)
			continue
		case r.Err != nil:
			if ctx.Err() == nil {
				a.c.Logger.Warn("session leases not renewed", "event", "lease_renew_failed", "code", r.Code, "err", r.Err)
			}
			continue
		}
		if len(r.Missing) > 0 {
			a.hub.KillSessions(r.Code, r.Missing, "Your session lapsed; reconnect.")
		}
		a.link.Snapshot(r.Code)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
