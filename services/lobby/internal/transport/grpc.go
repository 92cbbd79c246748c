// Package transport serves the lobby over gRPC: proto ⇄ domain, and the one place domain errors
// become gRPC status codes.
package transport

import (
	"context"
	"log/slog"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/usererr"
	"github.com/vigil-dev/vigil/services/lobby/internal/app"
	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
)

// Server implements vigil.lobby.v1.LobbyService.
type Server struct {
	lobbyv1.UnimplementedLobbyServiceServer
	app *app.App
	log *slog.Logger
}

// NewServer serves a over gRPC.
func NewServer(a *app.App, log *slog.Logger) *Server { return &Server{app: a, log: log} }

// CreateRoom implements the RPC.
func (s *Server) CreateRoom(ctx context.Context, req *lobbyv1.CreateRoomRequest) (*lobbyv1.CreateRoomResponse, error) {
	var v *domain.Video
	if pv := req.GetVideo(); pv != nil {
		v = &domain.Video{Title: pv.GetTitle(), DurationMs: pv.GetDurationMs()}
	}
	r, token, err := s.app.Create(ctx, req.GetName(), v)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &lobbyv1.CreateRoomResponse{Code: r.Code, LeaderToken: token, Room: toProto(r)}, nil
}

// ListRooms implements the RPC: one page of the lobby (AIP-158).
func (s *Server) ListRooms(ctx context.Context, req *lobbyv1.ListRoomsRequest) (*lobbyv1.ListRoomsResponse, error) {
	if req.KnownVersion != nil {
		if err := domain.CheckVersion(req.GetKnownVersion()); err != nil {
			return nil, s.toStatus(ctx, err)
		}
	}
	page, err := s.app.ListPage(ctx, app.PageRequest{
		Size: req.GetPageSize(), SizeSet: req.PageSize != nil, Token: req.GetPageToken(),
		Query: req.GetQuery(), Joinable: req.GetJoinable(),
	})
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if req.KnownVersion != nil && req.GetKnownVersion() == page.Version {
		return &lobbyv1.ListRoomsResponse{Version: page.Version, NotModified: true}, nil
	}
	out := make([]*lobbyv1.Room, len(page.Rooms))
	// One allocation for the page's rooms and one for their videos.
	ps := make([]lobbyv1.Room, len(page.Rooms))
	vs := make([]lobbyv1.Video, len(page.Rooms))
	for i, r := range page.Rooms {
		fill(&ps[i], &vs[i], r)
		out[i] = &ps[i]
	}
	return &lobbyv1.ListRoomsResponse{Rooms: out, Version: page.Version, NextPageToken: page.Next}, nil
}

// GetRoom implements the RPC.
func (s *Server) GetRoom(ctx context.Context, req *lobbyv1.GetRoomRequest) (*lobbyv1.GetRoomResponse, error) {
	r, err := s.app.Get(ctx, req.GetCode())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &lobbyv1.GetRoomResponse{Room: toProto(r)}, nil
}

// RemoveRoom implements the RPC.
func (s *Server) RemoveRoom(ctx context.Context, req *lobbyv1.RemoveRoomRequest) (*lobbyv1.RemoveRoomResponse, error) {
	removed, err := s.app.Remove(ctx, req.GetCode())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &lobbyv1.RemoveRoomResponse{Removed: removed}, nil
}

// ApplyOccupancyDelta implements the RPC.
func (s *Server) ApplyOccupancyDelta(ctx context.Context, req *lobbyv1.ApplyOccupancyDeltaRequest) (*lobbyv1.ApplyOccupancyDeltaResponse, error) {
	out, err := s.app.ApplyDelta(ctx, req.GetCode(), req.GetSeq(), req.GetViewersDelta(), req.GetLeadersDelta())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	o := lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED
	switch out {
	case domain.Stale:
		o = lobbyv1.DeltaOutcome_DELTA_OUTCOME_STALE
	case domain.Resync:
		o = lobbyv1.DeltaOutcome_DELTA_OUTCOME_RESYNC
	}
	return &lobbyv1.ApplyOccupancyDeltaResponse{Outcome: o}, nil
}

// ApplyOccupancySnapshot implements the RPC.
func (s *Server) ApplyOccupancySnapshot(ctx context.Context, req *lobbyv1.ApplyOccupancySnapshotRequest) (*lobbyv1.ApplyOccupancySnapshotResponse, error) {
	ok, err := s.app.ApplySnapshot(ctx, req.GetCode(), req.GetSeq(), req.GetViewers(), req.GetLeaders())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &lobbyv1.ApplyOccupancySnapshotResponse{Applied: ok}, nil
}

// TouchRoom implements the RPC.
func (s *Server) TouchRoom(ctx context.Context, req *lobbyv1.TouchRoomRequest) (*lobbyv1.TouchRoomResponse, error) {
	if err := s.app.Touch(ctx, req.GetCode(), req.GetAt()); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &lobbyv1.TouchRoomResponse{}, nil
}

// VerifyLeaderToken implements the RPC.
func (s *Server) VerifyLeaderToken(ctx context.Context, req *lobbyv1.VerifyLeaderTokenRequest) (*lobbyv1.VerifyLeaderTokenResponse, error) {
	ok, r, err := s.app.VerifyToken(ctx, req.GetCode(), req.GetLeaderToken())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &lobbyv1.VerifyLeaderTokenResponse{Valid: ok, Room: toProto(r)}, nil
}

// toStatus maps an error to its gRPC status: usererr.Status, the one mapping every service
// shares.
func (s *Server) toStatus(ctx context.Context, err error) error {
	return usererr.Status(ctx, s.log, "lobby store", err)
}

func toProto(r domain.Room) *lobbyv1.Room {
	p, v := &lobbyv1.Room{}, &lobbyv1.Video{}
	fill(p, v, &r)
	return p
}

func fill(p *lobbyv1.Room, v *lobbyv1.Video, r *domain.Room) {
	v.Title, v.DurationMs = r.Video.Title, r.Video.DurationMs
	p.Code, p.Name, p.Video = r.Code, r.Name, v
	p.Viewers, p.LeaderPresent = r.Viewers, r.LeaderPresent
	p.LastActivity, p.CreatedAt = r.LastActivity, r.CreatedAt
}
