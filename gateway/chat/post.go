package chat

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
)

// Posts from sockets go over the room's stream with a ref and a post id unique to this
// gateway; a post still waiting when the stream breaks is re-sent on the next one, and its
// post id makes the repeat harmless.

// pendingPost is a post waiting for its result.
type pendingPost struct {
	seq  uint64
	post *chatv1.Post
	done chan *chatv1.PostResult
}

// setStream makes s the stream posts go to (nil while detached), and re-sends the posts that
// were waiting; their post ids make a repeat harmless.
func (r *chatRoom) setStream(s chatv1.ChatService_ConnectClient) {
	// The send lock is held from before the stream is set until the sessions are sent, so a
	// socket's own Enter or Exit (sent once it sees the stream) comes after them.
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	r.stream = s
	var resend []*pendingPost
	var sessions []*chatv1.ConnectRequest
	if s != nil {
		for _, p := range r.pending {
			resend = append(resend, p)
		}
		// Sessions closed while detached, then every socket's session again (a re-attach).
		for id := range r.exits {
			sessions = append(sessions, exitRequest(id))
		}
		for m := range r.members {
			sessions = append(sessions, enterRequest(m))
		}
	}
	r.mu.Unlock()
	for _, req := range sessions {
		if err := s.Send(req); err != nil {
			return
		}
	}
	if len(resend) == 0 {
		return
	}
	// In the order they were posted.
	slices.SortFunc(resend, func(a, b *pendingPost) int { return cmp.Compare(a.seq, b.seq) })
	for _, p := range resend {
		if err := s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Post{Post: p.post}}); err != nil {
			return
		}
	}
}

// post stores a member's message and waits for the service's answer. It returns "" when the
// message was stored (the member receives it like everyone else), or the sentence of an error
// frame.
func (r *chatRoom) post(m *chatMember, body string) string {
	r.mu.Lock()
	r.postRefs++
	ref := strconv.FormatUint(r.postRefs, 10)
	p := &pendingPost{
		seq: r.postRefs,
		post: &chatv1.Post{
			Ref: ref, PostId: r.b.postPrefix + strconv.FormatUint(r.b.postSeq.Add(1), 36),
			UserId: m.userID, User: m.username, Body: body,
		},
		done: make(chan *chatv1.PostResult, 1),
	}
	r.pending[ref] = p
	s := r.stream
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, ref)
		r.mu.Unlock()
	}()
	if s != nil {
		r.sendMu.Lock()
		// A failed send is retried by the next stream's setStream.
		_ = s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Post{Post: p.post}})
		r.sendMu.Unlock()
	}
	t := time.NewTimer(r.b.postTimeout)
	defer t.Stop()
	select {
	case res := <-p.done:
		return res.GetError()
	case <-t.C:
		return "Chat is unavailable right now; send the message again shortly."
	}
}

// resolve hands a post's result to the waiting member.
func (r *chatRoom) resolve(res *chatv1.PostResult) {
	r.mu.Lock()
	p := r.pending[res.GetRef()]
	r.mu.Unlock()
	if p == nil {
		return // a repeat's answer, or a post that gave up waiting
	}
	select {
	case p.done <- res:
	default:
	}
}
