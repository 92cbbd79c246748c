package backend

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/prom"
)

// HedgeAfter is how long a call that is safe to send twice waits for its answer before the
// gateway sends it again, to another replica (grpcdial.WithAttempts): a replica that stops
// answering keeps its connection until keepalive notices, up to 15 s. The first answer wins.
const HedgeAfter = grpcdial.StallAfter

// hedged are the calls that may be sent twice: reads, and a chat post that carries its
// idempotency key (stored once; a second attempt answers with the first's message).
var hedged = map[string]func(req any) bool{
	chatv1.ChatService_ListMessages_FullMethodName:                  always,
	chatv1.ChatService_ListPresence_FullMethodName:                  always,
	chatv1.ChatService_PostMessage_FullMethodName:                   withPostID,
	lobbyv1.LobbyService_ListRooms_FullMethodName:                   always,
	lobbyv1.LobbyService_GetRoom_FullMethodName:                     always,
	locksv1.LockService_Get_FullMethodName:                          always,
	reservationsv1.ReservationService_GetReservation_FullMethodName: always,
	roomv1.RoomService_ListPeople_FullMethodName:                    always,
	adminv1.AlarmAdminService_ListPending_FullMethodName:            always,
	adminv1.AlarmAdminService_ListDeadLetters_FullMethodName:        always,
	adminv1.AlarmAdminService_LookupObject_FullMethodName:           always,
}

func always(any) bool { return true }

func withPostID(req any) bool {
	p, ok := req.(*chatv1.PostMessageRequest)
	return ok && p.GetPostId() != ""
}

// Hedges counts the calls sent a second time, by method and by the attempt whose answer the
// caller got: vigil_gateway_hedged_calls_total{method, answered_by} with answered_by "first"
// (the first attempt answered after all), "second" (the other replica answered first) or
// "neither". A nil *Hedges counts nothing.
type Hedges struct {
	calls *prometheus.CounterVec
}

// NewHedges creates the counter and registers it on reg (or reuses the one registered there:
// gateways on one registry count into the same series).
func NewHedges(reg prometheus.Registerer) (*Hedges, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_gateway_hedged_calls_total",
		Help: "Backend calls sent a second time because a replica left them unanswered for a second, by gRPC method and by which attempt answered (first, second, neither).",
	}, []string{"method", "answered_by"})
	c, err := prom.Register(reg, c)
	if err != nil {
		return nil, err
	}
	return &Hedges{calls: c}, nil
}

func (h *Hedges) count(method, answeredBy string) {
	if h != nil {
		h.calls.WithLabelValues(method, answeredBy).Inc()
	}
}

// hedge runs a call; if it is in hedged and has no answer after HedgeAfter, it sends it once
// more and returns the first answer from a replica (anything but "no answer": UNAVAILABLE,
// DEADLINE_EXCEEDED, CANCELED), or the first attempt's error when neither got one. The first
// attempt runs on the caller's goroutine into reply: an answered call costs a timer, no more.
// A call sent twice is counted in h.
func (h *Hedges) hedge(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	safe := hedged[method]
	out, ok := reply.(proto.Message)
	if safe == nil || !ok || !safe(req) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, cancel := context.WithCancel(grpcdial.WithAttempts(ctx))
	defer cancel() // ends the attempt that lost
	var second struct {
		reply proto.Message
		err   error
	}
	done := make(chan struct{})
	timer := time.AfterFunc(HedgeAfter, func() {
		defer close(done)
		r := out.ProtoReflect().New().Interface()
		err := invoker(ctx, method, req, r, cc, opts...)
		second.reply, second.err = r, err
		if answered(err) {
			cancel() // the first attempt gives up: this answer wins
		}
	})
	err := invoker(ctx, method, req, reply, cc, opts...)
	if timer.Stop() {
		return err // answered before the second attempt began
	}
	if answered(err) {
		h.count(method, "first")
		return err
	}
	<-done
	if !answered(second.err) {
		h.count(method, "neither")
		return err
	}
	h.count(method, "second")
	if second.err == nil {
		proto.Reset(out)
		proto.Merge(out, second.reply)
	}
	return second.err
}

// answered reports whether err (nil included) is a replica's answer rather than none.
func answered(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return true
}
