package lobbylink

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

// Client is the Lobby's calls the room's use cases make synchronously (app.Lobby): each with
// a timeout, a room the Lobby does not list answered as domain.NotFound.
type Client struct {
	lobby lobbyv1.LobbyServiceClient
}

// NewClient wraps a Lobby gRPC client.
func NewClient(lobby lobbyv1.LobbyServiceClient) *Client { return &Client{lobby: lobby} }

// VerifyLeaderToken reports whether token is the room's leader token, with its entry.
func (c *Client) VerifyLeaderToken(ctx context.Context, code, token string) (bool, domain.Seed, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := c.lobby.VerifyLeaderToken(ctx, &lobbyv1.VerifyLeaderTokenRequest{Code: code, LeaderToken: token})
	if err != nil {
		return false, domain.Seed{}, lobbyErr(code, err)
	}
	return res.GetValid(), seedOf(res.GetRoom()), nil
}

// Seed reads the room's entry.
func (c *Client) Seed(ctx context.Context, code string) (domain.Seed, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := c.lobby.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: code})
	if err != nil {
		return domain.Seed{}, lobbyErr(code, err)
	}
	return seedOf(res.GetRoom()), nil
}

// Remove takes the room off the list (idempotent: a room not listed is removed already).
func (c *Client) Remove(ctx context.Context, code string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := c.lobby.RemoveRoom(ctx, &lobbyv1.RemoveRoomRequest{Code: code})
	if err != nil {
		return lobbyErr(code, err)
	}
	return nil
}

func seedOf(r *lobbyv1.Room) domain.Seed {
	return domain.Seed{
		LastActivity: time.UnixMilli(r.GetLastActivity()), CreatedAt: time.UnixMilli(r.GetCreatedAt()),
		Title: r.GetVideo().GetTitle(), DurationMs: r.GetVideo().GetDurationMs(),
	}
}

// lobbyErr turns a Lobby NOT_FOUND into the domain's and keeps other failures as they are.
func lobbyErr(code string, err error) error {
	if status.Code(err) == codes.NotFound {
		return domain.NotFound(code)
	}
	return fmt.Errorf("lobby: %w", err)
}
