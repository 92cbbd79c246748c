package app

import (
	"context"
	"fmt"

	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
)

// Listen subscribes an Attach stream to a room's events: they arrive once on the returned
// listener's Events, for all of the stream's sessions (opened with Hello.Shared). Unlisten
// lets go of it.
func (a *App) Listen(ctx context.Context, code string) (*hub.Session, error) {
	if err := domain.CheckCode(code); err != nil {
		return nil, err
	}
	l, err := a.hub.Listen(ctx, newID(), code)
	if err != nil {
		return nil, fmt.Errorf("subscribe to room: %w", err)
	}
	return l, nil
}

// Unlisten ends a listener.
func (a *App) Unlisten(l *hub.Session) { a.hub.Remove(l) }
