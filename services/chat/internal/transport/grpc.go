// Package transport serves the chat use cases over gRPC: proto ⇄ domain, the Connect stream's
// plumbing, and the one place domain errors become gRPC status codes.
package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/pkg/usererr"
	"github.com/vigil-dev/vigil/services/chat/internal/app"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

// Server implements vigil.chat.v1.ChatService.
type Server struct {
	chatv1.UnimplementedChatServiceServer
	app      *app.App
	log      *slog.Logger
	stopping context.Context
}

// NewServer serves a over gRPC. When stopping ends (the replica shuts down), open Connect
// streams end with UNAVAILABLE at once, so the drain does not wait on them and clients resume
// on another replica.
func NewServer(a *app.App, log *slog.Logger, stopping context.Context) *Server {
	return &Server{app: a, log: log, stopping: stopping}
}

// errStopping ends streams when the replica shuts down.
var errStopping = usererr.New(usererr.ErrUnavailable, "this chat replica is shutting down; join again from the last id received")

// Connect implements the RPC.
func (s *Server) Connect(stream chatv1.ChatService_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	join := first.GetJoin()
	if join == nil {
		return status.Error(codes.InvalidArgument, "Send a join as the first message.")
	}
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.stopping, func() { cancel(errStopping) })
	defer stop()

	at, hist, err := s.app.Attach(ctx, join.GetRoom(), join.Since, join.GetPresence())
	if err != nil {
		return s.toStatus(ctx, err)
	}
	defer at.Close()
	// The client closing the stream (CloseSend) closes the sessions it holds; any other end (a
	// broken connection, this replica stopping) leaves them open under their leases, for the
	// client to enter again on its next stream.
	defer func() {
		if !errors.Is(context.Cause(ctx), io.EOF) {
			return
		}
		ectx, ecancel := context.WithTimeout(context.WithoutCancel(ctx), exitAllTimeout)
		defer ecancel()
		if err := at.ExitAll(ectx); err != nil {
			s.log.Warn("chat sessions not closed with their stream; their leases will end them", "event", "presence_exit_failed", "room", join.GetRoom(), "err", err)
		}
	}()

	var sendMu sync.Mutex
	send := func(r *chatv1.ConnectResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return stream.Send(r)
	}
	if err := send(&chatv1.ConnectResponse{Kind: &chatv1.ConnectResponse_History{History: &chatv1.History{
		Messages: toProtos(hist.Messages), LastId: hist.LastID, Truncated: hist.Truncated, JoinLimit: int32(s.app.JoinLimit()),
		Presence: presenceProto(hist.Presence),
	}}}); err != nil {
		return err
	}
	go s.renew(ctx, at, join.GetRoom())

	// Posts are read on their own goroutine and stored concurrently (up to maxPostsInFlight):
	// a stream carries the posts of many members, and a member waits for one post's result
	// before sending its next, so each member's order holds. Results share the stream.
	//
	// When the stream's context ends no post starts any more, and the handler closes the gate
	// and waits for every post it let in before it returns: none is stored after the stream
	// ended, and every stored one is answered. The reader itself can only be unblocked by the
	// stream's end; it then finds the gate closed and returns.
	var (
		gate   sync.Mutex
		closed bool
		posts  sync.WaitGroup
	)
	defer func() {
		cancel(nil) // in-flight posts end before the wait
		gate.Lock()
		closed = true
		gate.Unlock()
		posts.Wait()
	}()
	startPost := func(p *chatv1.Post, release func()) bool {
		gate.Lock()
		defer gate.Unlock()
		if closed || ctx.Err() != nil {
			return false
		}
		posts.Add(1)
		go func() {
			defer posts.Done()
			defer release()
			s.post(ctx, cancel, send, join.GetRoom(), p)
		}()
		return true
	}
	go func() {
		inFlight := make(chan struct{}, maxPostsInFlight)
		for {
			req, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					cancel(io.EOF)
				} else {
					cancel(err)
				}
				return
			}
			switch k := req.GetKind().(type) {
			case *chatv1.ConnectRequest_Ping:
				// The gateway's heartbeat: answered behind what is already being sent, so a
				// pong also says the stream's answers are flowing.
				if err := send(&chatv1.ConnectResponse{Kind: &chatv1.ConnectResponse_Pong{Pong: k.Ping}}); err != nil {
					cancel(err)
					return
				}
				continue
			case *chatv1.ConnectRequest_Enter, *chatv1.ConnectRequest_Exit:
				// Enters and exits are applied in the order they come, each before the next
				// request is read: a session's exit never overtakes its enter.
				if !s.presenceRequest(ctx, cancel, send, at, req) {
					return
				}
				continue
			}
			p := req.GetPost()
			if p == nil {
				cancel(status.Error(codes.InvalidArgument, "Send only posts, enters, exits and pings after the join."))
				return
			}
			select {
			case inFlight <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if !startPost(p, func() { <-inFlight }) {
				return
			}
		}
	}()

	for {
		updates, err := at.Next(ctx)
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				err = cause
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return s.toStatus(ctx, err)
		}
		for _, u := range updates {
			if err := send(updateProto(u)); err != nil {
				return err
			}
		}
	}
}

// maxPostsInFlight bounds the posts of one Connect stream being stored at once.
const maxPostsInFlight = 64

// post stores one post of a Connect stream and sends its result; a failure other than a
// refused post ends the stream.
func (s *Server) post(ctx context.Context, cancel context.CancelCauseFunc, send func(*chatv1.ConnectResponse) error, room string, p *chatv1.Post) {
	res := &chatv1.PostResult{Ref: p.GetRef()}
	// A post that started is finished even when the stream is ending, and its result sent
	// before the handler returns: a stored post is always answered.
	m, err := s.app.Post(context.WithoutCancel(ctx), domain.Post{Room: room, UserID: p.GetUserId(), User: p.GetUser(), Body: p.GetBody(), PostID: p.GetPostId()})
	if err != nil {
		st := s.toStatus(ctx, err)
		if status.Code(st) != codes.InvalidArgument {
			cancel(st)
			return
		}
		res.Error = status.Convert(st).Message()
	} else {
		res.Id = m.ID
	}
	if err := send(&chatv1.ConnectResponse{Kind: &chatv1.ConnectResponse_PostResult{PostResult: res}}); err != nil {
		cancel(err)
	}
}

// PostMessage implements the RPC.
func (s *Server) PostMessage(ctx context.Context, req *chatv1.PostMessageRequest) (*chatv1.PostMessageResponse, error) {
	m, err := s.app.Post(ctx, domain.Post{Room: req.GetRoom(), UserID: req.GetUserId(), User: req.GetUsername(), Body: req.GetBody(), PostID: req.GetPostId()})
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &chatv1.PostMessageResponse{Message: toProto(m)}, nil
}

// ListMessages implements the RPC.
func (s *Server) ListMessages(ctx context.Context, req *chatv1.ListMessagesRequest) (*chatv1.ListMessagesResponse, error) {
	msgs, last, err := s.app.List(ctx, req.GetRoom(), int(req.GetLimit()), req.Before, req.Since)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &chatv1.ListMessagesResponse{Messages: toProtos(msgs), LastId: last}, nil
}

// toStatus maps errors to gRPC codes with the one shared mapping; anything unexpected is
// logged and hidden.
func (s *Server) toStatus(ctx context.Context, err error) error {
	return usererr.Status(ctx, s.log, "chat store", err)
}

func toProto(m domain.Message) *chatv1.ChatMessage {
	return &chatv1.ChatMessage{Id: m.ID, User: m.User, UserId: m.UserID, Body: m.Body, Ts: m.TS}
}

func toProtos(msgs []domain.Message) []*chatv1.ChatMessage {
	out := make([]*chatv1.ChatMessage, len(msgs))
	for i, m := range msgs {
		out[i] = toProto(m)
	}
	return out
}
