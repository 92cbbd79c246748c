// Package transport serves the reservation use cases over gRPC: it only maps proto ⇄ domain,
// and errors to status codes with usererr.Status.
package transport

import (
	"context"
	"log/slog"

	"google.golang.org/protobuf/proto"

	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/usererr"
	"github.com/vigil-dev/vigil/services/reservations/internal/app"
	"github.com/vigil-dev/vigil/services/reservations/internal/domain"
)

// Server implements vigil.reservations.v1.ReservationService.
type Server struct {
	reservationsv1.UnimplementedReservationServiceServer
	app *app.App
	log *slog.Logger
}

// NewServer serves a over gRPC.
func NewServer(a *app.App, log *slog.Logger) *Server { return &Server{app: a, log: log} }

// CreateReservation implements the RPC.
func (s *Server) CreateReservation(ctx context.Context, req *reservationsv1.CreateReservationRequest) (*reservationsv1.CreateReservationResponse, error) {
	r, err := s.app.Create(ctx, req.GetReservationId(), int64(req.GetTtlSeconds()))
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &reservationsv1.CreateReservationResponse{Reservation: toProto(r)}, nil
}

// GetReservation implements the RPC.
func (s *Server) GetReservation(ctx context.Context, req *reservationsv1.GetReservationRequest) (*reservationsv1.GetReservationResponse, error) {
	r, err := s.app.Get(ctx, req.GetReservationId())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &reservationsv1.GetReservationResponse{Reservation: toProto(r)}, nil
}

// ReplayAlarm implements the RPC.
func (s *Server) ReplayAlarm(ctx context.Context, req *reservationsv1.ReplayAlarmRequest) (*reservationsv1.ReplayAlarmResponse, error) {
	r, changed, err := s.app.Replay(ctx, req.GetReservationId(), req.GetNow())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	p := toProto(r)
	return &reservationsv1.ReplayAlarmResponse{
		ReservationId:   p.ReservationId,
		Status:          p.Status,
		CreatedAt:       p.CreatedAt,
		ExpiresAt:       p.ExpiresAt,
		ExpiredAt:       p.ExpiredAt,
		ExpirationCount: p.ExpirationCount,
		AlarmAt:         p.AlarmAt,
		Changed:         changed,
	}, nil
}

// ConfirmReservation implements the RPC.
func (s *Server) ConfirmReservation(ctx context.Context, req *reservationsv1.ConfirmReservationRequest) (*reservationsv1.ConfirmReservationResponse, error) {
	r, err := s.app.Settle(ctx, req.GetReservationId(), domain.Confirmed)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &reservationsv1.ConfirmReservationResponse{Reservation: toProto(r)}, nil
}

// ReleaseReservation implements the RPC.
func (s *Server) ReleaseReservation(ctx context.Context, req *reservationsv1.ReleaseReservationRequest) (*reservationsv1.ReleaseReservationResponse, error) {
	r, err := s.app.Settle(ctx, req.GetReservationId(), domain.Released)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &reservationsv1.ReleaseReservationResponse{Reservation: toProto(r)}, nil
}

// toStatus maps an error to the client's status: the one mapping every service shares.
func (s *Server) toStatus(ctx context.Context, err error) error {
	return usererr.Status(ctx, s.log, "reservations store", err)
}

func toProto(r domain.Reservation) *reservationsv1.Reservation {
	p := &reservationsv1.Reservation{
		ReservationId:   r.ID,
		Status:          string(r.Status),
		ExpirationCount: r.ExpirationCount,
	}
	opt := func(v int64) *int64 {
		if v == 0 {
			return nil
		}
		return &v
	}
	p.CreatedAt, p.ExpiresAt, p.ExpiredAt, p.AlarmAt = opt(r.CreatedAt), opt(r.ExpiresAt), opt(r.ExpiredAt), opt(r.AlarmAt)
	return p
}

// Lookup is the admin service's view of reservation id: what GetReservation returns, or nil
// when it was never created.
func (s *Server) Lookup(ctx context.Context, id string) (proto.Message, error) {
	res, err := s.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: id})
	if err != nil || res.GetReservation().GetStatus() == string(domain.Missing) {
		return nil, err
	}
	return res.GetReservation(), nil
}
