package chat

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/vigil-dev/vigil/gateway/socket"
	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
)

// Who is here. Every socket is a session of the room's presence: the room announces it on its
// stream (Enter when it joins, Exit when it leaves) and enters every socket again on each new
// stream, which the service takes as a re-attach, not an arrival. The room's stream asks for
// presence, keeps the room's member list at its version, and copies each change to the sockets
// opened with presence=1, as join and leave frames; a whole list (after a re-attach, or events
// the service lost) is turned into the joins and leaves that differ from the room's list.

// presentMember is a member of the room's presence.
type presentMember struct {
	UserID   string `json:"userId"`
	Username string `json:"username"`
	Since    int64  `json:"since"`
}

// exitWait bounds how long a room's last socket waits for its session's exit before the room's
// stream ends.
const exitWait = 2 * time.Second

func memberOf(m *chatv1.Member) presentMember {
	return presentMember{UserID: m.GetUserId(), Username: m.GetUsername(), Since: m.GetSince()}
}

func presenceFrame(members []presentMember) []byte {
	if members == nil {
		members = []presentMember{}
	}
	b, _ := json.Marshal(struct {
		Type    string          `json:"type"`
		Members []presentMember `json:"members"`
	}{"presence", members})
	return b
}

func joinFrame(m presentMember) []byte {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		presentMember
	}{"join", m})
	return b
}

func leaveFrame(userID string) []byte { return stringFrame("leave", "userId", userID) }

// presentLocked is the room's members in order of arrival. Called with r.mu.
func (r *chatRoom) presentLocked() []presentMember {
	return slices.Clone(r.present)
}

// tellPresence queues a presence frame on every socket that asked for them. Called with r.mu.
func (r *chatRoom) tellPresence(frame []byte) {
	f := socket.TextFrame(frame)
	for m := range r.members {
		if m.presence {
			m.sock.SendFrames([]socket.Frame{f})
		}
	}
}

// applyPresenceLocked replaces the room's list with a whole one: the first (no frames), or
// after a re-attach or lost events, telling the sockets what differs. Called with r.mu.
func (r *chatRoom) applyPresenceLocked(p *chatv1.Presence) {
	next := make([]presentMember, 0, len(p.GetMembers()))
	for _, m := range p.GetMembers() {
		next = append(next, memberOf(m))
	}
	if r.presenceKnown {
		in := func(list []presentMember, id string) bool {
			return slices.ContainsFunc(list, func(m presentMember) bool { return m.UserID == id })
		}
		for _, old := range r.present {
			if !in(next, old.UserID) {
				r.tellPresence(leaveFrame(old.UserID))
			}
		}
		for _, m := range next {
			if !in(r.present, m.UserID) {
				r.tellPresence(joinFrame(m))
			}
		}
	}
	r.present, r.pversion, r.presenceKnown = next, p.GetVersion(), true
}

// presenceChange applies one response of the stream about presence; false when it is not one.
func (r *chatRoom) presenceChange(resp *chatv1.ConnectResponse) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch k := resp.Kind.(type) {
	case *chatv1.ConnectResponse_Joined:
		if v := k.Joined.GetVersion(); v > r.pversion {
			r.pversion = v
			m := memberOf(k.Joined.GetMember())
			r.present = append(slices.DeleteFunc(r.present, func(p presentMember) bool { return p.UserID == m.UserID }), m)
			r.tellPresence(joinFrame(m))
		}
	case *chatv1.ConnectResponse_Left:
		if v := k.Left.GetVersion(); v > r.pversion {
			r.pversion = v
			id := k.Left.GetUserId()
			r.present = slices.DeleteFunc(r.present, func(p presentMember) bool { return p.UserID == id })
			r.tellPresence(leaveFrame(id))
		}
	case *chatv1.ConnectResponse_Presence:
		r.applyPresenceLocked(k.Presence)
	case *chatv1.ConnectResponse_Entered:
		if e := k.Entered.GetError(); e != "" {
			r.b.log.Warn("chat session refused by the service", "event", "presence_enter_refused", "room", r.Name(), "err", e)
		}
	case *chatv1.ConnectResponse_Exited:
		id := k.Exited.GetSessionId()
		delete(r.exits, id)
		if w := r.exitWaiters[id]; w != nil {
			close(w)
			delete(r.exitWaiters, id)
		}
	default:
		return false
	}
	return true
}

func enterRequest(m *chatMember) *chatv1.ConnectRequest {
	return &chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Enter{Enter: &chatv1.Enter{SessionId: m.session, UserId: m.userID, Username: m.username}}}
}

func exitRequest(session string) *chatv1.ConnectRequest {
	return &chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Exit{Exit: session}}
}

// sendOn sends req on stream under the room's send lock; a failed send shows as the stream's
// end, and the next stream repairs what it lost.
func (r *chatRoom) sendOn(stream chatv1.ChatService_ConnectClient, req *chatv1.ConnectRequest) {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	_ = stream.Send(req)
}

// exitMember removes m from the room and closes its session: at once when the room is
// attached, else on the next stream. The room's last socket waits (up to exitWait) for the
// service to confirm, so the stream's end cannot overtake the exit.
func (r *chatRoom) exitMember(m *chatMember) {
	r.mu.Lock()
	_, was := r.members[m]
	delete(r.members, m)
	if !was {
		r.mu.Unlock()
		return
	}
	r.exits[m.session] = struct{}{}
	stream := r.stream
	var done chan struct{}
	if len(r.members) == 0 && stream != nil {
		done = make(chan struct{})
		r.exitWaiters[m.session] = done
	}
	r.mu.Unlock()
	if stream == nil {
		return
	}
	r.sendOn(stream, exitRequest(m.session))
	if done != nil {
		t := time.NewTimer(exitWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		r.mu.Lock()
		delete(r.exitWaiters, m.session)
		r.mu.Unlock()
	}
}
