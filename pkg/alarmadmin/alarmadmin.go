// Package alarmadmin serves vigil.admin.v1.AlarmAdminService over one domain's alarm queue, so
// an operator can see what is scheduled, late or dead, and replay or discard dead letters.
// Every domain service registers it with one call:
//
//	alarmadmin.Register(srv.GRPC(), q, lookup)
package alarmadmin

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/vigil-dev/vigil/pkg/alarm"
	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
)

// Lookup reads one object of the domain as its own API returns it; nil means there is no such
// object. An error that is a gRPC status (an invalid id, say) reaches the caller unchanged.
type Lookup func(ctx context.Context, id string) (proto.Message, error)

// Server implements AlarmAdminService over one queue.
type Server struct {
	adminv1.UnimplementedAlarmAdminServiceServer
	q      *alarm.Queue
	lookup Lookup
	log    *slog.Logger
}

// New serves q's admin calls; lookup, when not nil, finds the objects LookupObject shows. It
// also adds q's state to the process's Prometheus metrics (see metrics.go).
func New(q *alarm.Queue, lookup Lookup, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	watch(q)
	return &Server{q: q, lookup: lookup, log: log}
}

// Register serves q's admin calls on s.
func Register(s *grpc.Server, q *alarm.Queue, lookup Lookup, log *slog.Logger) {
	adminv1.RegisterAlarmAdminServiceServer(s, New(q, lookup, log))
}

// maxNext bounds ListPending's next_per_shard.
const maxNext = 100

// Errors the callers can act on; toStatus maps them to gRPC codes.
var (
	errBadID   = errors.New("Give the object's id: 1-256 characters.")
	errBadNext = fmt.Errorf("nextPerShard must be from 0 through %d.", maxNext)
	errNoDead  = errors.New("That object has no dead letter.")
)

// ListPending implements the RPC.
func (s *Server) ListPending(ctx context.Context, req *adminv1.ListPendingRequest) (*adminv1.ListPendingResponse, error) {
	next := int(req.GetNextPerShard())
	if next < 0 || next > maxNext {
		return nil, s.toStatus(ctx, errBadNext)
	}
	if next == 0 {
		next = 3
	}
	now, shards, err := s.q.Inspect(ctx, next)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	res := &adminv1.ListPendingResponse{Namespace: s.q.Namespace(), Now: now.UnixMilli()}
	for _, sh := range shards {
		p := &adminv1.ShardPending{
			Shard: int32(sh.Shard), Pending: sh.Pending, Overdue: sh.Overdue, InFlight: sh.InFlight, Dead: sh.Dead,
		}
		for _, a := range sh.Next {
			pa := alarmProto(a, now)
			p.Next = append(p.Next, pa)
			if pa.LateMs > 0 && (res.OldestOverdue == nil || pa.DueAt < res.OldestOverdue.DueAt) {
				res.OldestOverdue = pa
			}
		}
		res.Pending += sh.Pending
		res.Overdue += sh.Overdue
		res.InFlight += sh.InFlight
		res.Dead += sh.Dead
		res.Shards = append(res.Shards, p)
	}
	return res, nil
}

// ListDeadLetters implements the RPC.
func (s *Server) ListDeadLetters(ctx context.Context, _ *adminv1.ListDeadLettersRequest) (*adminv1.ListDeadLettersResponse, error) {
	dead, err := s.q.DeadLetters(ctx)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	res := &adminv1.ListDeadLettersResponse{Namespace: s.q.Namespace(), DeadLetters: make([]*adminv1.DeadLetter, 0, len(dead))}
	for _, d := range dead {
		res.DeadLetters = append(res.DeadLetters, deadProto(d))
	}
	return res, nil
}

// ReplayDeadLetter implements the RPC.
func (s *Server) ReplayDeadLetter(ctx context.Context, req *adminv1.ReplayDeadLetterRequest) (*adminv1.ReplayDeadLetterResponse, error) {
	id := req.GetId()
	if err := s.onDeadLetter(ctx, id, s.q.ReplayDead, "dead letter replayed", "alarm_replayed"); err != nil {
		return nil, err
	}
	res := &adminv1.ReplayDeadLetterResponse{}
	// The alarm may already be claimed (or even done) by the time we read it back.
	if a, ok, err := s.q.Alarm(ctx, id); err == nil && ok {
		res.Alarm = alarmProto(a, s.q.Now())
	}
	return res, nil
}

// DiscardDeadLetter implements the RPC.
func (s *Server) DiscardDeadLetter(ctx context.Context, req *adminv1.DiscardDeadLetterRequest) (*adminv1.DiscardDeadLetterResponse, error) {
	if err := s.onDeadLetter(ctx, req.GetId(), s.q.DiscardDead, "dead letter discarded", "alarm_discarded"); err != nil {
		return nil, err
	}
	return &adminv1.DiscardDeadLetterResponse{}, nil
}

// onDeadLetter applies op (the queue's ReplayDead or DiscardDead) to object id's dead letter and
// logs msg with event when it did. It returns the status for the client: a bad id, no dead
// letter (NotFound), or the queue's failure.
func (s *Server) onDeadLetter(ctx context.Context, id string, op func(context.Context, string) (bool, error), msg, event string) error {
	if err := validateID(id); err != nil {
		return s.toStatus(ctx, err)
	}
	ok, err := op(ctx, id)
	if err == nil && !ok {
		err = errNoDead
	}
	if err != nil {
		return s.toStatus(ctx, err)
	}
	s.log.InfoContext(ctx, msg, "event", event, "ns", s.q.Namespace(), "id", id)
	return nil
}

// LookupObject implements the RPC.
func (s *Server) LookupObject(ctx context.Context, req *adminv1.LookupObjectRequest) (*adminv1.LookupObjectResponse, error) {
	id := req.GetId()
	if err := validateID(id); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	res := &adminv1.LookupObjectResponse{Namespace: s.q.Namespace(), Id: id, Shard: int32(s.q.ShardOf(id))}
	if s.lookup != nil {
		obj, err := s.lookup(ctx, id)
		if err != nil {
			return nil, s.toStatus(ctx, err)
		}
		if obj != nil {
			res.Found = true
			res.Object = Struct(obj)
		}
	}
	a, ok, err := s.q.Alarm(ctx, id)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if ok {
		res.Alarm = alarmProto(a, s.q.Now())
	}
	d, ok, err := s.q.DeadLetter(ctx, id)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if ok {
		res.DeadLetter = deadProto(d)
	}
	return res, nil
}

func validateID(id string) error {
	if n := utf8.RuneCountInString(id); n < 1 || n > 256 || !utf8.ValidString(id) {
		return errBadID
	}
	return nil
}

// toStatus is the one place errors become gRPC codes. Statuses from a domain's lookup pass
// through; Redis failures are Unavailable, logged, and not shown to the caller.
func (s *Server) toStatus(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, errBadID), errors.Is(err, errBadNext):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errNoDead):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "The call was cancelled.")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "The call timed out.")
	}
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	s.log.ErrorContext(ctx, "admin call failed", "event", "admin_error", "ns", s.q.Namespace(), "err", err)
	return status.Error(codes.Unavailable, "The alarm store is unavailable; try again shortly.")
}

func alarmProto(a alarm.AlarmState, now time.Time) *adminv1.Alarm {
	p := &adminv1.Alarm{Id: a.ID, Shard: int32(a.Shard), DueAt: a.Due.UnixMilli(), InFlight: a.InFlight, Attempts: int32(a.Attempts)}
	if late := now.UnixMilli() - p.DueAt; late > 0 {
		p.LateMs = late
	}
	return p
}

func deadProto(d alarm.DeadLetter) *adminv1.DeadLetter {
	return &adminv1.DeadLetter{Id: d.ID, Shard: int32(d.Shard), Attempts: int32(d.Attempts), Error: d.Error, DeadAt: d.At.UnixMilli()}
}

// Struct renders a message with its JSON field names, numbers as numbers (ms timestamps fit a
// double exactly) and unset optional fields as null: the JSON the gateway shows.
func Struct(msg proto.Message) *structpb.Struct { return objectStruct(msg.ProtoReflect()) }

func objectStruct(m protoreflect.Message) *structpb.Struct {
	fields := map[string]*structpb.Value{}
	fds := m.Descriptor().Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		if fd.HasPresence() && !m.Has(fd) {
			fields[fd.JSONName()] = structpb.NewNullValue()
			continue
		}
		fields[fd.JSONName()] = fieldValue(fd, m.Get(fd))
	}
	return &structpb.Struct{Fields: fields}
}

func fieldValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) *structpb.Value {
	switch {
	case fd.IsList():
		l := v.List()
		vals := make([]*structpb.Value, l.Len())
		for i := range l.Len() {
			vals[i] = scalarValue(fd, l.Get(i))
		}
		return structpb.NewListValue(&structpb.ListValue{Values: vals})
	case fd.IsMap():
		fields := map[string]*structpb.Value{}
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			fields[k.String()] = scalarValue(fd.MapValue(), mv)
			return true
		})
		return structpb.NewStructValue(&structpb.Struct{Fields: fields})
	}
	return scalarValue(fd, v)
}

func scalarValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) *structpb.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return structpb.NewBoolValue(v.Bool())
	case protoreflect.StringKind:
		return structpb.NewStringValue(v.String())
	case protoreflect.BytesKind:
		return structpb.NewStringValue(base64.StdEncoding.EncodeToString(v.Bytes()))
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return structpb.NewStringValue(string(ev.Name()))
		}
		return structpb.NewNumberValue(float64(v.Enum()))
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return structpb.NewStructValue(objectStruct(v.Message()))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return structpb.NewNumberValue(float64(v.Int()))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return structpb.NewNumberValue(float64(v.Uint()))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return structpb.NewNumberValue(v.Float())
	}
	return structpb.NewNullValue()
}
