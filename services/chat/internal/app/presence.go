package app

import (
	"context"
	"errors"
	"slices"

	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

// Who is here: an attachment's stream carries the sessions (sockets) of many members, each
// announced by Enter and closed by Exit. The attachment holds them under leases it renews
// (Renew, every third of the lease); a stream that ends without its client closing it leaves
// them open until their leases end, to be entered again on the next stream without a leave or
// a join.

// ListPresence sweeps room's lapsed sessions and answers its members, in order of arrival.
func (a *App) ListPresence(ctx context.Context, room string) (domain.Presence, error) {
	if err := domain.ValidateRoom(room); err != nil {
		return domain.Presence{}, err
	}
	return a.store.Presence(ctx, room, a.now())
}

// Enter opens session s in the attachment's room, held by this attachment, or re-attaches it
// when it is open for the same user (resumed: nobody is told). It fails with
// domain.ErrSessionTaken when the id is open for another user.
func (at *Attachment) Enter(ctx context.Context, s domain.Session) (resumed bool, err error) {
	if err := domain.ValidateSession(&s); err != nil {
		return false, err
	}
	at.opMu.Lock()
	defer at.opMu.Unlock()
	now := at.a.now()
	if resumed, err = at.a.store.Enter(ctx, at.room, s, at.holder, now, now.Add(at.a.lease)); err != nil {
		return false, err
	}
	at.sessions[s.ID] = s
	return resumed, nil
}

// Exit closes a session of the room, whichever stream entered it; closing one that is not
// open changes nothing.
func (at *Attachment) Exit(ctx context.Context, id string) error {
	if err := domain.ValidateSessionID(id); err != nil {
		return err
	}
	at.opMu.Lock()
	defer at.opMu.Unlock()
	delete(at.sessions, id)
	_, err := at.a.store.Exit(ctx, at.room, id, "", at.a.now())
	return err
}

// RenewBatch is how many sessions one renewal script carries. A script blocks Redis while it
// runs: renewing 10,000 sessions in one call used 51 ms of Redis CPU, a batch of 500 uses
// 3.5 ms (BenchmarkPresenceRenew), so other commands of the room's Redis wait no longer.
const RenewBatch = 500

// Renew sweeps the room's lapsed sessions and extends the leases of the attachment's. A session
// of the attachment that lapsed meanwhile (a renewal came too late) is entered again, and one
// that another stream holds now (re-attached there) is forgotten.
func (at *Attachment) Renew(ctx context.Context) error {
	at.opMu.Lock()
	defer at.opMu.Unlock()
	ids := make([]string, 0, len(at.sessions))
	for id := range at.sessions {
		ids = append(ids, id)
	}
	for batch := range slices.Chunk(ids, RenewBatch) {
		now := at.a.now()
		missing, moved, err := at.a.store.Renew(ctx, at.room, at.holder, batch, now, now.Add(at.a.lease))
		if err != nil {
			return err
		}
		for _, id := range moved {
			delete(at.sessions, id)
		}
		for _, id := range missing {
			at.a.log.WarnContext(ctx, "chat session lapsed before its renewal; entering it again", "event", "presence_lapsed", "room", at.room, "session", id)
			_, err := at.a.store.Enter(ctx, at.room, at.sessions[id], at.holder, now, now.Add(at.a.lease))
			if errors.Is(err, domain.ErrSessionTaken) {
				delete(at.sessions, id)
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}

// ExitAll closes every session the attachment still holds: its client closed the stream.
func (at *Attachment) ExitAll(ctx context.Context) error {
	at.opMu.Lock()
	defer at.opMu.Unlock()
	for id := range at.sessions {
		if _, err := at.a.store.Exit(ctx, at.room, id, at.holder, at.a.now()); err != nil {
			return err
		}
		delete(at.sessions, id)
	}
	return nil
}

// Holds reports whether the attachment holds sessions or delivers presence: then it renews.
func (at *Attachment) Holds() bool {
	at.opMu.Lock()
	defer at.opMu.Unlock()
	return at.presence || len(at.sessions) > 0
}
