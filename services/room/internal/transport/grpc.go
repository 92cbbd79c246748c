// Package transport serves the room over gRPC: the Join stream and EndRoom, proto ⇄ use cases,
// and the one place domain errors become gRPC status codes.
package transport

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/services/room/internal/app"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
	"github.com/vigil-dev/vigil/services/room/internal/store"
)

// Server implements vigil.room.v1.RoomService.
type Server struct {
	roomv1.UnimplementedRoomServiceServer
	app      *app.App
	log      *slog.Logger
	stopping <-chan struct{}
}

// NewServer serves a over gRPC. When stopping is closed, open Join streams end with
// UNAVAILABLE (clients reconnect to another replica) instead of holding up the drain.
func NewServer(a *app.App, stopping <-chan struct{}, log *slog.Logger) *Server {
	return &Server{app: a, log: log, stopping: stopping}
}

// DecodeFrame decodes a relayed frame as the store's scripts publish it.
func DecodeFrame(b []byte) (any, error) {
	var m roomv1.JoinResponse
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Join implements the RPC: a Hello, then the state, then events both ways.
func (s *Server) Join(stream roomv1.RoomService_JoinServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	h := first.GetHello()
	if h == nil {
		return status.Error(codes.InvalidArgument, "Send a hello frame first.")
	}
	role := domain.Role("")
	switch h.GetRole() {
	case roomv1.Role_ROLE_LEADER:
		role = domain.Leader
	case roomv1.Role_ROLE_VIEWER:
		role = domain.Viewer
	}
	sess, st, err := s.app.Open(ctx, app.Hello{Code: h.GetCode(), Role: role, ClientID: h.GetClientId(), LeaderToken: h.GetLeaderToken()})
	if err != nil {
		return s.toStatus(ctx, err)
	}
	// Closing the session first takes it out of the count, whatever ends the stream.
	defer s.app.Close(sess)
	if err := stream.Send(&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_State{State: stateProto(st)}}); err != nil {
		return err
	}

	// The reader applies the client's frames; refusals come back to the writer (this
	// goroutine), the only one that sends.
	refusals := make(chan string, 8)
	readDone := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				readDone <- err
				return
			}
			if err := s.app.Act(ctx, sess, req); err != nil {
				select {
				case refusals <- s.message(ctx, err):
				default: // a client flooding refused frames does not block its own reader
				}
			}
		}
	}()
	for {
		select {
		case ev := <-sess.Events:
			if ev.Version <= st.Version {
				continue // the state the joiner got already includes it
			}
			var out *roomv1.JoinResponse
			switch ev.Kind {
			case hub.Frame:
				if sess.Role != domain.Viewer {
					continue // leader frames are relayed to the viewers
				}
				out, _ = ev.Msg.(*roomv1.JoinResponse)
			case hub.Occupancy:
				out = &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Occupancy{Occupancy: &roomv1.Occupancy{Viewers: ev.Viewers, LeaderPresent: ev.Leaders > 0}}}
			}
			if out == nil {
				continue
			}
			if err := stream.Send(out); err != nil {
				return err
			}
		case msg := <-refusals:
			if err := stream.Send(&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Error{Error: &roomv1.Error{Message: msg}}}); err != nil {
				return err
			}
		case <-sess.Done():
			reason := sess.Reason()
			if reason != domain.ReasonExpired && reason != domain.ReasonEnded {
				return status.Error(codes.Aborted, reason)
			}
			_ = stream.Send(&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Ended{Ended: &roomv1.Ended{Reason: reason}}})
			return nil
		case <-readDone:
			return nil // the client closed its side (or went away): the session ends
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stopping:
			return status.Error(codes.Unavailable, "The room service is restarting; reconnect.")
		}
	}
}

// EndRoom implements the RPC. The token comes in the request or as bearer metadata.
func (s *Server) EndRoom(ctx context.Context, req *roomv1.EndRoomRequest) (*roomv1.EndRoomResponse, error) {
	token := req.GetLeaderToken()
	if token == "" {
		token = bearer(ctx)
	}
	if err := s.app.End(ctx, req.GetCode(), token); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &roomv1.EndRoomResponse{}, nil
}

func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}

// toStatus maps domain errors to gRPC codes; anything else is logged and hidden.
func (s *Server) toStatus(ctx context.Context, err error) error {
	msg := s.message(ctx, err)
	switch {
	case errors.Is(err, domain.ErrInvalid):
		return status.Error(codes.InvalidArgument, msg)
	case errors.Is(err, domain.ErrNotFound):
		return status.Error(codes.NotFound, msg)
	case errors.Is(err, domain.ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, msg)
	case errors.Is(err, domain.ErrForbidden):
		return status.Error(codes.PermissionDenied, msg)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "request timed out")
	}
	return status.Error(codes.Unavailable, msg)
}

// message is the sentence for err: the domain's for a user error, a generic one (with the
// cause logged) for anything else.
func (s *Server) message(ctx context.Context, err error) string {
	var ue *domain.UserError
	if errors.As(err, &ue) {
		return ue.Msg
	}
	if !errors.Is(err, context.Canceled) {
		s.log.ErrorContext(ctx, "room operation failed", "event", "room_error", "err", err)
	}
	return "The room service is unavailable; try again."
}

func stateProto(st store.State) *roomv1.State {
	p := &roomv1.State{
		Playback:      &roomv1.Playback{Playing: st.Playing, PositionMs: st.PositionMs, At: st.At},
		Video:         &roomv1.Video{Title: st.Title, DurationMs: st.DurationMs},
		Viewers:       st.Viewers,
		LeaderPresent: st.Leaders > 0,
		Formation:     structpb.NewNullValue(),
		Marks:         make([]*roomv1.Mark, 0, len(st.Marks)),
	}
	if st.FormationJSON != "" {
		var v structpb.Value
		if protojson.Unmarshal([]byte(st.FormationJSON), &v) == nil {
			p.Formation = &v
		}
	}
	for _, raw := range st.Marks {
		var m roomv1.Mark
		if proto.Unmarshal([]byte(raw), &m) == nil {
			p.Marks = append(p.Marks, &m)
		}
	}
	return p
}
