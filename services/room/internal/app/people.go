package app

import (
	"context"
	"errors"

	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

// People answers the people present in a room, in order of arrival. A room the Lobby lists
// that nobody has joined yet has none; a room that is neither open here nor listed is
// domain.ErrNotFound.
func (a *App) People(ctx context.Context, code string) ([]domain.Person, error) {
	if err := domain.CheckCode(code); err != nil {
		return nil, err
	}
	people, err := a.st.People(ctx, code)
	if !errors.Is(err, domain.ErrNoState) {
		return people, err
	}
	if _, err := a.lobby.Seed(ctx, code); err != nil {
		return nil, err
	}
	return []domain.Person{}, nil
}
