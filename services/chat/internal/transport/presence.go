package transport

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/services/chat/internal/app"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

// exitAllTimeout bounds closing a stream's sessions after its client closed it.
const exitAllTimeout = 5 * time.Second

// presenceRequest applies one Enter or Exit of a Connect stream and sends its answer. A refused
// one (bad input) is answered with a sentence; any other failure ends the stream, whose client
// enters its sessions again on the next one. false: the stream is ending.
func (s *Server) presenceRequest(ctx context.Context, cancel context.CancelCauseFunc, send func(*chatv1.ConnectResponse) error, at *app.Attachment, req *chatv1.ConnectRequest) bool {
	var resp *chatv1.ConnectResponse
	if e := req.GetEnter(); e != nil {
		res := &chatv1.Entered{SessionId: e.GetSessionId()}
		resumed, err := at.Enter(ctx, domain.Session{ID: e.GetSessionId(), UserID: e.GetUserId(), Username: e.GetUsername()})
		if err != nil {
			st := s.toStatus(ctx, err)
			if status.Code(st) != codes.InvalidArgument {
				cancel(st)
				return false
			}
			res.Error = status.Convert(st).Message()
		}
		res.Resumed = resumed
		resp = &chatv1.ConnectResponse{Kind: &chatv1.ConnectResponse_Entered{Entered: res}}
	} else {
		res := &chatv1.Exited{SessionId: req.GetExit()}
		if err := at.Exit(ctx, res.SessionId); err != nil {
			st := s.toStatus(ctx, err)
			if status.Code(st) != codes.InvalidArgument {
				cancel(st)
				return false
			}
			res.Error = status.Convert(st).Message()
		}
		resp = &chatv1.ConnectResponse{Kind: &chatv1.ConnectResponse_Exited{Exited: res}}
	}
	if err := send(resp); err != nil {
		cancel(err)
		return false
	}
	return true
}

// renew renews the leases of the stream's sessions and sweeps its room every third of the
// lease, until the stream ends. A failed renewal is tried again at the next tick; a session
// that lapsed meanwhile is entered again then.
func (s *Server) renew(ctx context.Context, at *app.Attachment, room string) {
	t := time.NewTicker(s.app.Lease() / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !at.Holds() {
			continue
		}
		if err := at.Renew(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("chat presence renewal failed; trying again", "event", "presence_renew_failed", "room", room, "err", err)
		}
	}
}

// ListPresence implements the RPC.
func (s *Server) ListPresence(ctx context.Context, req *chatv1.ListPresenceRequest) (*chatv1.ListPresenceResponse, error) {
	p, err := s.app.ListPresence(ctx, req.GetRoom())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &chatv1.ListPresenceResponse{Members: membersProto(p.Members), Version: p.Version}, nil
}

func memberProto(m domain.Member) *chatv1.Member {
	return &chatv1.Member{UserId: m.UserID, Username: m.Username, Since: m.Since}
}

func membersProto(ms []domain.Member) []*chatv1.Member {
	out := make([]*chatv1.Member, len(ms))
	for i, m := range ms {
		out[i] = memberProto(m)
	}
	return out
}

func presenceProto(p *domain.Presence) *chatv1.Presence {
	if p == nil {
		return nil
	}
	return &chatv1.Presence{Members: membersProto(p.Members), Version: p.Version}
}

// updateProto is the stream frame of one update of an attachment.
func updateProto(u app.Update) *chatv1.ConnectResponse {
	switch {
	case u.Message != nil:
		return &chatv1.ConnectResponse{Kind: &chatv1.ConnectResponse_Message{Message: toProto(*u.Message)}}
	case u.Change != nil && u.Change.Joined != nil:
		return &chatv1.ConnectResponse{Kind: &chatv1.ConnectResponse_Joined{Joined: &chatv1.MemberJoined{Member: memberProto(*u.Change.Joined), Version: u.Change.Version}}}
	case u.Change != nil:
		return &chatv1.ConnectResponse{Kind: &chatv1.ConnectResponse_Left{Left: &chatv1.MemberLeft{UserId: u.Change.Left, Version: u.Change.Version}}}
	default:
		return &chatv1.ConnectResponse{Kind: &chatv1.ConnectResponse_Presence{Presence: presenceProto(u.Presence)}}
	}
}
