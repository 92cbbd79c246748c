// Package transport serves the room over gRPC: the Join stream and EndRoom, proto ⇄ use cases,
// and the one place domain errors become gRPC status codes.
package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/usererr"
	"github.com/vigil-dev/vigil/services/room/internal/app"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
	"github.com/vigil-dev/vigil/services/room/internal/workers"
)

// Server implements vigil.room.v1.RoomService.
type Server struct {
	roomv1.UnimplementedRoomServiceServer
	app      *app.App
	log      *slog.Logger
	stopping context.Context
	// work runs each Attach stream's hellos and detaches (a join or a leave each).
	work *workers.Pool
}

// NewServer serves a over gRPC. When stopping ends, open Join streams end with
// UNAVAILABLE (clients reconnect to another replica) instead of holding up the drain.
func NewServer(a *app.App, log *slog.Logger, stopping context.Context) *Server {
	return &Server{app: a, log: log, stopping: stopping, work: workers.New(workerIdle)}
}

// workerIdle is how long a kept goroutine of the server's pool waits for its next task.
const workerIdle = 5 * time.Second

// DecodeFrame decodes a relayed frame as the store's scripts publish it.
func DecodeFrame(b []byte) (any, error) {
	var m roomv1.JoinResponse
	if err := proto.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Join implements the RPC: a Hello, then the state, then events both ways.
//
// How the stream ends decides the session's fate: the client ending it (CloseSend or a cancel)
// closes the session; this replica stopping detaches it (UNAVAILABLE: it stays open under its
// lease for the caller to re-attach elsewhere). Every control frame received is applied or
// refused before the stream ends, and one with a ref is always answered (Ack or Error).
func (s *Server) Join(stream roomv1.RoomService_JoinServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return streamEnd(ctx, err)
	}
	h := first.GetHello()
	if h == nil {
		return s.status(ctx, usererr.Invalid("Send a hello frame first."))
	}
	sess, joined, err := s.app.Open(ctx, appHello(h, false))
	if err != nil {
		return s.status(ctx, err)
	}
	detach := false
	defer func() {
		if detach {
			s.app.Detach(sess)
		} else {
			// Closing the session first takes it out of the count.
			s.app.Close(sess)
		}
	}()
	state := stateProto(joined.State)
	state.Resumed = joined.Resumed
	if err := stream.Send(&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_State{State: state}}); err != nil {
		return streamEnd(ctx, err)
	}

	// The reader applies the client's frames; their answers come back to the writer (this
	// goroutine), the only one that sends. A stopping replica applies no frame after it stops
	// reading, and answers every frame it applied before its stream ends.
	answers := make(chan *roomv1.JoinResponse, 16)
	readDone := make(chan error, 1)
	quit := make(chan struct{})
	defer close(quit)
	var (
		mu       sync.Mutex
		stopped  bool
		inflight sync.WaitGroup
	)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				readDone <- err
				return
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				return
			}
			inflight.Add(1)
			mu.Unlock()
			if ans := s.apply(ctx, sess, req); ans != nil {
				select {
				case answers <- ans:
				case <-quit:
				}
			}
			inflight.Done()
		}
	}()
	// flush sends the answers already queued.
	flush := func() error {
		for {
			select {
			case ans := <-answers:
				if err := stream.Send(ans); err != nil {
					return err
				}
			default:
				return nil
			}
		}
	}
	for {
		select {
		case ev := <-sess.Events:
			if ev.Version <= joined.State.Version {
				continue // the state the joiner got already includes it
			}
			if ev.Kind == hub.Frame && sess.Role != domain.Viewer {
				continue // leader frames are relayed to the viewers
			}
			out := eventFrame(ev)
			if out == nil {
				continue
			}
			if err := stream.Send(out); err != nil {
				return streamEnd(ctx, err)
			}
		case ans := <-answers:
			if err := stream.Send(ans); err != nil {
				return streamEnd(ctx, err)
			}
		case <-sess.Done():
			reason := sess.Reason()
			if reason == hub.Replaced {
				detach = true // the session lives on in its new stream
				return status.Error(codes.Aborted, reason)
			}
			if reason != domain.ReasonExpired && reason != domain.ReasonEnded {
				return status.Error(codes.Aborted, reason)
			}
			_ = flush()
			_ = stream.Send(&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Ended{Ended: &roomv1.Ended{Reason: reason}}})
			return nil
		case err := <-readDone:
			// The client ended its side: the session ends with it.
			if ferr := flush(); ferr != nil {
				return streamEnd(ctx, ferr)
			}
			return streamEnd(ctx, err)
		case <-ctx.Done():
			return streamEnd(ctx, ctx.Err())
		case <-s.stopping.Done():
			mu.Lock()
			stopped = true
			mu.Unlock()
			idle := make(chan struct{})
			go func() { inflight.Wait(); close(idle) }()
		drain:
			for {
				select {
				case ans := <-answers:
					if err := stream.Send(ans); err != nil {
						return streamEnd(ctx, err)
					}
				case <-idle:
					break drain
				}
			}
			if err := flush(); err != nil {
				return streamEnd(ctx, err)
			}
			detach = true
			return status.Error(codes.Unavailable, "The room service is restarting; reconnect.")
		}
	}
}

// appHello is the use cases' Hello for a client's hello frame; shared marks a session of an
// Attach stream.
func appHello(h *roomv1.Hello, shared bool) app.Hello {
	role := domain.Role("")
	switch h.GetRole() {
	case roomv1.Role_ROLE_LEADER:
		role = domain.Leader
	case roomv1.Role_ROLE_VIEWER:
		role = domain.Viewer
	}
	return app.Hello{
		Code: h.GetCode(), Role: role, ClientID: h.GetClientId(), LeaderToken: h.GetLeaderToken(), SessionID: h.GetSessionId(),
		Shared: shared, Name: h.GetName(),
	}
}

// apply applies one client frame and returns its answer: an Ack for a control with a ref, an
// Error for a refused one, nothing for an applied control without a ref.
func (s *Server) apply(ctx context.Context, sess *hub.Session, req *roomv1.JoinRequest) *roomv1.JoinResponse {
	c, err := control(req)
	var (
		at     time.Time
		repeat bool
	)
	if err == nil {
		at, repeat, err = s.app.Act(ctx, sess, c)
	}
	if err != nil {
		msg := status.Convert(s.status(ctx, err)).Message()
		return &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Error{Error: &roomv1.Error{Message: msg, Ref: req.GetRef()}}}
	}
	if req.GetRef() == 0 {
		return nil
	}
	ack := &roomv1.Ack{Ref: req.GetRef(), Repeat: repeat}
	if !repeat {
		ack.At = at.UnixMilli()
	}
	return &roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Ack{Ack: ack}}
}

// control maps a client frame to the domain's control.
func control(req *roomv1.JoinRequest) (domain.Control, error) {
	c := domain.Control{Ref: req.GetRef()}
	switch f := req.GetFrame().(type) {
	case *roomv1.JoinRequest_Sync:
		c.Kind, c.Playing, c.PositionMs, c.Rate = domain.KindSync, f.Sync.GetPlaying(), f.Sync.GetPositionMs(), f.Sync.GetRate()
		if ci := f.Sync.GetCountIn(); ci != nil {
			c.CountIn = &domain.CountIn{Beats: int64(ci.GetBeats()), BPM: int64(ci.GetBpm())}
		}
	case *roomv1.JoinRequest_Formation:
		c.Kind = domain.KindFormation
		js, err := formationJSON(f.Formation.GetFormation())
		if err != nil {
			return c, err
		}
		c.Formation = js
	case *roomv1.JoinRequest_Loop:
		c.Kind, c.Loop = domain.KindLoop, domain.Loop{StartMs: f.Loop.GetStartMs(), EndMs: f.Loop.GetEndMs()}
	case *roomv1.JoinRequest_MarkFormation:
		c.Kind, c.PositionMs = domain.KindMarkFormation, f.MarkFormation.GetPositionMs()
		js, err := formationJSON(f.MarkFormation.GetFormation())
		if err != nil {
			return c, err
		}
		c.Formation = js
	case *roomv1.JoinRequest_Mark:
		c.Kind, c.PositionMs, c.Label = domain.KindMark, f.Mark.GetPositionMs(), f.Mark.GetLabel()
	case *roomv1.JoinRequest_Reload:
		c.Kind = domain.KindReload
		if v := f.Reload.Video; v != nil {
			c.Video = &domain.Video{Title: v.GetTitle(), DurationMs: v.GetDurationMs()}
		}
	}
	return c, nil
}

// formationJSON is a formation's JSON ("null" when unset).
func formationJSON(v *structpb.Value) ([]byte, error) {
	if v == nil {
		return []byte("null"), nil
	}
	js, err := protojson.Marshal(v)
	if err != nil {
		return nil, domain.Invalid("A formation must be a JSON value.")
	}
	return js, nil
}

// formationValue parses a formation's JSON back into a Value.
func formationValue(js []byte) (*structpb.Value, error) {
	var v structpb.Value
	if err := protojson.Unmarshal(js, &v); err != nil {
		return nil, domain.Invalid("A formation must be a JSON value.")
	}
	return &v, nil
}

// Codec encodes stamped controls as the frames sessions receive (app.Codec).
type Codec struct{}

// Encode implements app.Codec: the relayed JoinResponse and, for a mark, the mark's wire form
// that the room's marks list keeps.
func (Codec) Encode(c domain.Control, at time.Time) (frame, stored []byte, err error) {
	ms := at.UnixMilli()
	var out roomv1.JoinResponse
	switch c.Kind {
	case domain.KindSync:
		sync := &roomv1.Sync{Playing: c.Playing, PositionMs: c.PositionMs, At: ms, Rate: rate(c.RateCenti)}
		if ci := c.CountIn; ci != nil {
			sync.CountIn = &roomv1.CountIn{Beats: int32(ci.Beats), Bpm: int32(ci.BPM)}
		}
		out.Frame = &roomv1.JoinResponse_Sync{Sync: sync}
	case domain.KindFormation:
		v, err := formationValue(c.Formation)
		if err != nil {
			return nil, nil, err
		}
		out.Frame = &roomv1.JoinResponse_Formation{Formation: &roomv1.Formation{Formation: v, At: ms}}
	case domain.KindLoop:
		out.Frame = &roomv1.JoinResponse_Loop{Loop: &roomv1.Loop{StartMs: c.Loop.StartMs, EndMs: c.Loop.EndMs, At: ms}}
	case domain.KindMarkFormation:
		v, err := formationValue(c.Formation)
		if err != nil {
			return nil, nil, err
		}
		out.Frame = &roomv1.JoinResponse_MarkFormation{MarkFormation: &roomv1.MarkFormation{PositionMs: c.PositionMs, Formation: v, At: ms}}
	case domain.KindMark:
		m := &roomv1.Mark{PositionMs: c.PositionMs, Label: c.Label, At: ms}
		if stored, err = proto.Marshal(m); err != nil {
			return nil, nil, err
		}
		out.Frame = &roomv1.JoinResponse_Mark{Mark: m}
	case domain.KindReload:
		r := &roomv1.Reload{At: ms}
		if c.Video != nil {
			r.Video = &roomv1.Video{Title: c.Video.Title, DurationMs: c.Video.DurationMs}
		}
		out.Frame = &roomv1.JoinResponse_Reload{Reload: r}
	default:
		return nil, nil, domain.Invalid(domain.ControlKinds)
	}
	frame, err = proto.Marshal(&out)
	return frame, stored, err
}

// streamEnd is the status a Join stream ends with after err from its client: none when the
// client closed its side, CANCELED (logged at debug) when it went away, and the error's own
// status otherwise — never UNKNOWN for a client leaving.
func streamEnd(ctx context.Context, err error) error {
	switch {
	case err == nil || errors.Is(err, io.EOF):
		return nil
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	return status.Error(codes.Unavailable, "The room stream broke; reconnect.")
}

// EndRoom implements the RPC. The token comes in the request or as bearer metadata.
func (s *Server) EndRoom(ctx context.Context, req *roomv1.EndRoomRequest) (*roomv1.EndRoomResponse, error) {
	token := req.GetLeaderToken()
	if token == "" {
		token = bearer(ctx)
	}
	if err := s.app.End(ctx, req.GetCode(), token); err != nil {
		return nil, s.status(ctx, err)
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

// status maps an error to the client's status with usererr.Status, the one mapping every
// service shares.
func (s *Server) status(ctx context.Context, err error) error {
	return usererr.Status(ctx, s.log, "room service", err)
}

// rate is a rate in hundredths as the wire's double.
func rate(centi int64) float64 { return float64(centi) / 100 }

func stateProto(st domain.State) *roomv1.State {
	p := &roomv1.State{
		Playback:      &roomv1.Playback{Playing: st.Playing, PositionMs: st.PositionMs, At: st.At, Rate: rate(st.RateCenti)},
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
	if st.CountIn.Beats > 0 {
		p.Playback.CountIn = &roomv1.CountIn{Beats: int32(st.CountIn.Beats), Bpm: int32(st.CountIn.BPM)}
	}
	if st.Loop.Set() {
		p.Loop = &roomv1.Loop{StartMs: st.Loop.StartMs, EndMs: st.Loop.EndMs}
	}
	for _, raw := range st.Marks {
		var m roomv1.Mark
		if proto.Unmarshal([]byte(raw), &m) == nil {
			if js, ok := st.MarkFormations[m.GetPositionMs()]; ok {
				m.Formation, _ = formationValue([]byte(js))
			}
			p.Marks = append(p.Marks, &m)
		}
	}
	p.People = peopleProto(st.People)
	return p
}
