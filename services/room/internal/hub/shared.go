package hub

import (
	"context"

	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

// AddShared registers a session of a shared stream (RoomService.Attach): like Add, but the
// session has no Events of its own (Deliver skips it; an End still ends it). Its stream reads
// the room's events once, from a listener (Listen), for all of its sessions.
func (h *Hub) AddShared(ctx context.Context, id, attachment, code string, role domain.Role, clientID string) (*Session, error) {
	return h.add(ctx, &Session{ID: id, Attachment: attachment, Code: code, Role: role, ClientID: clientID, done: make(chan struct{})})
}

// Listen registers a listener: a session that is no session (no id, never counted) whose
// Events carry the room's events once for a shared stream. It returns once the room's
// subscription is sent, so a state read after it misses no event.
func (h *Hub) Listen(ctx context.Context, attachment, code string) (*Session, error) {
	return h.Add(ctx, "", attachment, code, domain.Viewer, "")
}
