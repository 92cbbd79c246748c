// Package app holds the room's use cases: opening and closing sessions, the leader's actions,
// ending a room, the alarm's transition (sweep dead sessions, expire idle rooms) and the
// session lease renewal. It ties the store (Redis), the hub (this replica's sessions) and the
// link to the Lobby together.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
	"github.com/vigil-dev/vigil/services/room/internal/lobbylink"
	"github.com/vigil-dev/vigil/services/room/internal/store"
)

// lobbyTimeout bounds one synchronous call to the Lobby.
const lobbyTimeout = 5 * time.Second

// Config are the App's settings.
type Config struct {
	IdleTTL      time.Duration
	SessionLease time.Duration
	Now          func() time.Time
	Log          *slog.Logger
}

// App is one Room replica's use cases.
type App struct {
	st    *store.Store
	hub   *hub.Hub
	link  *lobbylink.Link
	lobby lobbyv1.LobbyServiceClient
	rdb   redis.UniversalClient
	c     Config
}

// New assembles the use cases.
func New(st *store.Store, h *hub.Hub, link *lobbylink.Link, lobby lobbyv1.LobbyServiceClient, rdb redis.UniversalClient, c Config) *App {
	return &App{st: st, hub: h, link: link, lobby: lobby, rdb: rdb, c: c}
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
}

// Open checks a hello (the leader's token with the Lobby), creates the room's state from its
// Lobby entry on the first join, opens and counts the session (or re-attaches to it, counting
// nothing), and returns it with the state the joiner starts from.
func (a *App) Open(ctx context.Context, h Hello) (*hub.Session, store.Joined, error) {
	if err := domain.CheckCode(h.Code); err != nil {
		return nil, store.Joined{}, err
	}
	if h.Role != domain.Leader && h.Role != domain.Viewer {
		return nil, store.Joined{}, domain.Invalid("role must be leader or viewer.")
	}
	if err := domain.CheckClientID(h.ClientID); err != nil {
		return nil, store.Joined{}, err
	}
	if h.SessionID == "" {
		h.SessionID = newID()
	} else if err := domain.CheckSessionID(h.SessionID); err != nil {
		return nil, store.Joined{}, err
	}
	var seed *lobbyv1.Room
	if h.Role == domain.Leader {
		if h.LeaderToken == "" {
			return nil, store.Joined{}, domain.Unauthenticated()
		}
		res, err := callLobby(ctx, func(ctx context.Context) (*lobbyv1.VerifyLeaderTokenResponse, error) {
			return a.lobby.VerifyLeaderToken(ctx, &lobbyv1.VerifyLeaderTokenRequest{Code: h.Code, LeaderToken: h.LeaderToken})
		})
		if err != nil {
			return nil, store.Joined{}, a.lobbyErr(h.Code, err)
		}
		if !res.GetValid() {
			return nil, store.Joined{}, domain.Unauthenticated()
		}
		seed = res.GetRoom()
	}
	s, err := a.hub.Add(ctx, h.SessionID, newID(), h.Code, h.Role, h.ClientID)
	if err != nil {
		return nil, store.Joined{}, fmt.Errorf("subscribe to room: %w", err)
	}
	joined, err := a.join(ctx, s, seed)
	if err != nil {
		var ue *domain.UserError
		if !errors.As(err, &ue) {
			// The join script may have run although its answer was lost (a timeout): undo it
			// now rather than leave a phantom viewer until its lease ends.
			a.Close(s)
		} else {
			a.hub.Remove(s)
		}
		return nil, store.Joined{}, err
	}
	if joined.Resumed {
		a.hub.Supersede(s)
		a.c.Log.DebugContext(ctx, "session re-attached", "event", "session_resumed", "code", h.Code, "session", h.SessionID)
	}
	return s, joined, nil
}

func (a *App) join(ctx context.Context, s *hub.Session, seed *lobbyv1.Room) (store.Joined, error) {
	now := a.c.Now()
	leaseUntil := now.Add(a.c.SessionLease).UnixMilli()
	ss := store.Session{ID: s.ID, Role: s.Role, ClientID: s.ClientID, Attachment: s.Attachment}
	joined, err := a.st.Join(ctx, s.Code, ss, now.UnixMilli(), leaseUntil)
	if errors.Is(err, store.ErrMissing) {
		// The room's first join: its state starts from its Lobby entry.
		if seed == nil {
			res, err := callLobby(ctx, func(ctx context.Context) (*lobbyv1.GetRoomResponse, error) {
				return a.lobby.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: s.Code})
			})
			if err != nil {
				return store.Joined{}, a.lobbyErr(s.Code, err)
			}
			seed = res.GetRoom()
		}
		if seed.GetLastActivity()+a.c.IdleTTL.Milliseconds() <= now.UnixMilli() {
			return store.Joined{}, domain.NotFound(s.Code) // idle past its TTL: it is only not pruned yet
		}
		err = a.st.Init(ctx, s.Code, store.Seed{
			LastActivity: seed.GetLastActivity(), CreatedAt: seed.GetCreatedAt(),
			Title: seed.GetVideo().GetTitle(), DurationMs: seed.GetVideo().GetDurationMs(),
		}, now.UnixMilli())
		if errors.Is(err, store.ErrTombstoned) {
			return store.Joined{}, domain.NotFound(s.Code)
		}
		if err != nil {
			return store.Joined{}, err
		}
		a.c.Log.InfoContext(ctx, "room state created", "event", "room_init", "code", s.Code)
		joined, err = a.st.Join(ctx, s.Code, ss, now.UnixMilli(), leaseUntil)
	}
	var ended *store.ErrEnded
	if errors.As(err, &ended) || errors.Is(err, store.ErrMissing) {
		return store.Joined{}, domain.NotFound(s.Code)
	}
	if errors.Is(err, store.ErrSessionTaken) {
		return store.Joined{}, domain.SessionTaken()
	}
	if err != nil {
		return store.Joined{}, err
	}
	s.SetCounted(true)
	a.link.Delta(s.Code, joined.Change)
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
	ch, err := a.st.Leave(ctx, s.Code, s.ID, s.Attachment, a.c.Now().UnixMilli())
	if err != nil {
		// The session's lease runs out and the sweeper closes it.
		a.c.Log.Warn("session close not recorded; its lease will end it", "event", "session_close_failed", "code", s.Code, "err", err)
	}
	a.hub.Remove(s)
	a.link.Delta(s.Code, ch)
}

// Act applies a leader frame from session s: it is stamped, stored, relayed to every viewer,
// and it moves the room's inactivity alarm. It reports a repeat (a ref the session already
// applied, re-sent after a re-attach), which changes nothing.
func (a *App) Act(ctx context.Context, s *hub.Session, req *roomv1.JoinRequest) (repeat bool, err error) {
	kind := frameKind(req)
	if kind == "" {
		return false, domain.Invalid("Send a sync, formation, mark or reload frame.")
	}
	if err := domain.CheckRef(req.GetRef()); err != nil {
		return false, err
	}
	if s.Role != domain.Leader {
		return false, domain.ViewerControl(kind)
	}
	applied, err := a.act(ctx, s, kind, req)
	return err == nil && !applied, err
}

func (a *App) act(ctx context.Context, s *hub.Session, kind string, req *roomv1.JoinRequest) (bool, error) {
	now := a.c.Now().UnixMilli()
	act := store.Action{Kind: kind, Session: s.ID, Ref: req.GetRef()}
	var out roomv1.JoinResponse
	switch f := req.GetFrame().(type) {
	case *roomv1.JoinRequest_Sync:
		if err := domain.CheckPosition(f.Sync.GetPositionMs()); err != nil {
			return false, err
		}
		out.Frame = &roomv1.JoinResponse_Sync{Sync: &roomv1.Sync{Playing: f.Sync.GetPlaying(), PositionMs: f.Sync.GetPositionMs(), At: now}}
		act.Args = []any{boolInt(f.Sync.GetPlaying()), f.Sync.GetPositionMs()}
	case *roomv1.JoinRequest_Formation:
		js, err := protojson.Marshal(f.Formation.GetFormation())
		if f.Formation.GetFormation() == nil {
			js, err = []byte("null"), nil
		}
		if err != nil {
			return false, domain.Invalid("A formation must be a JSON value.")
		}
		if err := domain.CheckFormation(js); err != nil {
			return false, err
		}
		out.Frame = &roomv1.JoinResponse_Formation{Formation: &roomv1.Formation{Formation: f.Formation.GetFormation(), At: now}}
		act.Args = []any{js}
	case *roomv1.JoinRequest_Mark:
		if err := domain.CheckPosition(f.Mark.GetPositionMs()); err != nil {
			return false, err
		}
		if err := domain.CheckLabel(f.Mark.GetLabel()); err != nil {
			return false, err
		}
		m := &roomv1.Mark{PositionMs: f.Mark.GetPositionMs(), Label: f.Mark.GetLabel(), At: now}
		stored, err := proto.Marshal(m) // the marks list keeps each mark's wire form
		if err != nil {
			return false, err
		}
		out.Frame = &roomv1.JoinResponse_Mark{Mark: m}
		act.Args = []any{stored}
	case *roomv1.JoinRequest_Reload:
		r := &roomv1.Reload{At: now}
		act.Args = []any{0}
		if v := f.Reload.Video; v != nil {
			if err := domain.CheckVideo(v.GetTitle(), v.GetDurationMs()); err != nil {
				return false, err
			}
			r.Video = &roomv1.Video{Title: v.GetTitle(), DurationMs: v.GetDurationMs()}
			act.Args = []any{1, v.GetTitle(), v.GetDurationMs()}
		}
		out.Frame = &roomv1.JoinResponse_Reload{Reload: r}
	}
	frame, err := proto.Marshal(&out)
	if err != nil {
		return false, err
	}
	act.Frame = frame
	applied, err := a.st.Act(ctx, s.Code, act, now)
	var ended *store.ErrEnded
	switch {
	case errors.As(err, &ended) || errors.Is(err, store.ErrMissing):
		return false, domain.NotFound(s.Code)
	case errors.Is(err, store.ErrSessionClosed):
		return false, domain.SessionLapsed()
	case err != nil:
		return false, err
	}
	if applied {
		a.link.Touch(s.Code, now)
	}
	return applied, nil
}

// End ends a room for everyone on its leader's word.
func (a *App) End(ctx context.Context, code, token string) error {
	if err := domain.CheckCode(code); err != nil {
		return err
	}
	if token == "" {
		return domain.Unauthenticated()
	}
	res, err := callLobby(ctx, func(ctx context.Context) (*lobbyv1.VerifyLeaderTokenResponse, error) {
		return a.lobby.VerifyLeaderToken(ctx, &lobbyv1.VerifyLeaderTokenRequest{Code: code, LeaderToken: token})
	})
	if err != nil {
		return a.lobbyErr(code, err)
	}
	if !res.GetValid() {
		return domain.Unauthenticated()
	}
	hasState, err := a.st.End(ctx, code, domain.ReasonEnded, a.c.Now().UnixMilli())
	if err != nil {
		return err
	}
	a.c.Log.InfoContext(ctx, "room ended by its leader", "event", "room_ended", "code", code)
	if !hasState {
		// Never joined: nothing here to close, only the Lobby entry.
		_, err := callLobby(ctx, func(ctx context.Context) (*lobbyv1.RemoveRoomResponse, error) {
			return a.lobby.RemoveRoom(ctx, &lobbyv1.RemoveRoomRequest{Code: code})
		})
		return err
	}
	if err := a.finish(ctx, code, domain.ReasonEnded); err != nil {
		// The room's alarm is due now and finishes the clean-up.
		a.c.Log.Warn("room clean-up left to its alarm", "event", "room_cleanup_deferred", "code", code, "err", err)
	}
	return nil
}

// finish is the clean-up of an ended room, in order: close every replica's sockets, remove the
// room from the Lobby, delete its storage last. Each step is idempotent, so a retry after a
// partial failure (or a second run) is harmless.
func (a *App) finish(ctx context.Context, code, reason string) error {
	if err := a.rdb.Publish(ctx, a.st.Channel(code), hub.EndMessage(reason)).Err(); err != nil {
		return fmt.Errorf("close sockets: %w", err)
	}
	a.hub.Deliver(code, hub.Event{Kind: hub.End, Reason: reason}) // this replica's, without waiting for the echo
	if _, err := callLobby(ctx, func(ctx context.Context) (*lobbyv1.RemoveRoomResponse, error) {
		return a.lobby.RemoveRoom(ctx, &lobbyv1.RemoveRoomRequest{Code: code})
	}); err != nil {
		return fmt.Errorf("remove from lobby: %w", err)
	}
	return a.st.Finish(ctx, code, a.c.Now().UnixMilli())
}

// HandleAlarm is the rooms' alarm: close sessions whose lease ended, and expire the room if it
// has been idle for the TTL (re-arming it otherwise), then finish an ended room's clean-up.
func (a *App) HandleAlarm(ctx context.Context, f alarm.Firing) error {
	outcome, reason, ch, err := a.st.Sweep(ctx, f.ID, a.c.Now().UnixMilli())
	if err != nil {
		return err
	}
	switch outcome {
	case store.Active:
		if ch.Seq > 0 {
			a.c.Log.InfoContext(ctx, "lapsed sessions closed", "event", "sessions_swept", "code", f.ID,
				"viewersDelta", ch.ViewersDelta, "leadersDelta", ch.LeadersDelta, "isRetry", f.IsRetry(), "retryCount", f.RetryCount())
		}
		a.link.Delta(f.ID, ch)
		return nil
	case store.Gone:
		return nil
	}
	a.c.Log.InfoContext(ctx, "room closing", "event", "room_closing", "code", f.ID, "reason", reason,
		"isRetry", f.IsRetry(), "retryCount", f.RetryCount())
	if err := a.finish(ctx, f.ID, reason); err != nil {
		return err
	}
	a.c.Log.InfoContext(ctx, "room closed", "event", "room_closed", "code", f.ID, "reason", reason)
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
		sessions := a.hub.Sessions()
		if len(sessions) == 0 {
			continue
		}
		renewals := make([]store.Renewal, 0, len(sessions))
		for code, ids := range sessions {
			renewals = append(renewals, store.Renewal{Code: code, IDs: ids})
		}
		now := a.c.Now()
		if err := a.st.RenewAll(ctx, renewals, now.UnixMilli(), now.Add(a.c.SessionLease).UnixMilli()); err != nil {
			if ctx.Err() == nil {
				a.c.Log.Warn("session leases not renewed", "event", "lease_renew_failed", "rooms", len(renewals), "err", err)
			}
			continue
		}
		for _, r := range renewals {
			var ended *store.ErrEnded
			switch {
			case errors.As(r.Err, &ended):
				a.hub.KillSessions(r.Code, r.IDs, ended.Reason)
				continue
			case errors.Is(r.Err, store.ErrMissing):
				a.hub.KillSessions(r.Code, r.IDs, domain.ReasonEnded)
				continue
			case r.Err != nil:
				if ctx.Err() == nil {
					a.c.Log.Warn("session leases not renewed", "event", "lease_renew_failed", "code", r.Code, "err", r.Err)
				}
				continue
			}
			if len(r.Missing) > 0 {
				a.hub.KillSessions(r.Code, r.Missing, "Your session lapsed; reconnect.")
			}
			a.link.Snapshot(r.Code)
		}
	}
}

// callLobby runs one Lobby call with a timeout.
func callLobby[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, lobbyTimeout)
	defer cancel()
	return call(ctx)
}

// lobbyErr turns a Lobby NOT_FOUND into the domain's and keeps other failures as they are.
func (a *App) lobbyErr(code string, err error) error {
	if status.Code(err) == codes.NotFound {
		return domain.NotFound(code)
	}
	return fmt.Errorf("lobby: %w", err)
}

func frameKind(req *roomv1.JoinRequest) string {
	switch req.GetFrame().(type) {
	case *roomv1.JoinRequest_Sync:
		return "sync"
	case *roomv1.JoinRequest_Formation:
		return "formation"
	case *roomv1.JoinRequest_Mark:
		return "mark"
	case *roomv1.JoinRequest_Reload:
		return "reload"
	}
	return ""
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
