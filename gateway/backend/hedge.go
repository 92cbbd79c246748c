package backend

import (
	"context"
	"time"

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

// hedge runs a call; if it is in hedged and has no answer after HedgeAfter, it sends it once
// more and returns the first answer from a replica (anything but "no answer": UNAVAILABLE,
// DEADLINE_EXCEEDED, CANCELED), or the last error when neither attempt got one.
func hedge(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	safe := hedged[method]
	out, ok := reply.(proto.Message)
	if safe == nil || !ok || !safe(req) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, cancel := context.WithCancel(grpcdial.WithAttempts(ctx)) // cancel ends the attempt that lost
	defer cancel()
	type answer struct {
		reply proto.Message
		err   error
	}
	answers := make(chan answer, 2)
	attempt := func() {
		r := out.ProtoReflect().New().Interface()
		answers <- answer{r, invoker(ctx, method, req, r, cc, opts...)}
	}
	go attempt()
	pending := 1
	timer := time.NewTimer(HedgeAfter)
	defer timer.Stop()
	var last error
	for pending > 0 {
		select {
		case <-timer.C:
			go attempt()
			pending++
			continue
		case a := <-answers:
			pending--
			if answered(a.err) {
				if a.err == nil {
					proto.Reset(out)
					proto.Merge(out, a.reply)
				}
				return a.err
			}
			last = a.err
			if pending == 0 && ctx.Err() == nil && timer.Stop() {
				return last // failed at once (no replica ready): not a stall to hedge
			}
		}
	}
	return last
}

// answered reports whether err (nil included) is a replica's answer rather than none.
func answered(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return true
}
