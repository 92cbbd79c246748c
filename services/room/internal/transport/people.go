package transport

import (
	"context"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
)

// ListPeople implements the RPC.
func (s *Server) ListPeople(ctx context.Context, req *roomv1.ListPeopleRequest) (*roomv1.ListPeopleResponse, error) {
	people, err := s.app.People(ctx, req.GetCode())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &roomv1.ListPeopleResponse{People: peopleProto(people)}, nil
}

func roleProto(r domain.Role) roomv1.Role {
	switch r {
	case domain.Leader:
		return roomv1.Role_ROLE_LEADER
	case domain.Viewer:
		return roomv1.Role_ROLE_VIEWER
	}
	return roomv1.Role_ROLE_UNSPECIFIED
}

func personProto(p domain.Person) *roomv1.Person {
	return &roomv1.Person{ClientId: p.ClientID, Name: p.Name, Role: roleProto(p.Role), Since: p.Since}
}

func peopleProto(people []domain.Person) []*roomv1.Person {
	out := make([]*roomv1.Person, 0, len(people))
	for _, p := range people {
		out = append(out, personProto(p))
	}
	return out
}

// eventFrame is the frame a hub event sends a session's client: a relayed leader frame, the
// room's occupancy, or a person who came or left; nil for an event that sends none.
func eventFrame(ev hub.Event) *roomv1.JoinResponse {
	switch ev.Kind {
	case hub.Frame:
		frame, _ := ev.Msg.(*roomv1.JoinResponse)
		return frame
	case hub.Occupancy:
		return &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Occupancy{Occupancy: &roomv1.Occupancy{Viewers: ev.Viewers, LeaderPresent: ev.Leaders > 0}}}
	case hub.Join, hub.Leave:
		return peopleFrame(ev)
	}
	return nil
}

// peopleFrame is a Join or Leave event's frame for every session, leader and viewers alike.
func peopleFrame(ev hub.Event) *roomv1.JoinResponse {
	if ev.Kind == hub.Join {
		return &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Join{Join: personProto(ev.Person)}}
	}
	return &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Leave{Leave: &roomv1.PersonLeft{ClientId: ev.Person.ClientID, Role: roleProto(ev.Person.Role)}}}
}
