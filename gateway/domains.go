package gateway

import (
	"context"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vigil-dev/vigil/gateway/chat"
	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"github.com/vigil-dev/vigil/gateway/rest"
	"github.com/vigil-dev/vigil/gateway/room"
	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/input"
)

// domain is one backend the gateway serves: its REST routes (registered on the grpc-gateway
// mux) and the routes its parts answer themselves, served beside them. The list of domains
// is the wiring: each part (gateway/rest, gateway/chat, gateway/room) gets what it needs from
// here and knows nothing of the others.
type domain struct {
	name string
	addr string
	// rest registers the domain's grpc-gateway handlers on the domain's one backend
	// connection: the generated Register<Service>Handler. One connection, not a pool: concurrent calls share its writes (the HTTP/2
	// frames of many calls go out in one syscall), which on a small machine beats spreading
	// them over several connections (measured in vigilbench: REST creates 0.56× gRPC on one
	// connection, 0.51× on four).
	rest func(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error
	// own adds the routes the domain answers itself (WebSockets, hand-written answers, the
	// busiest REST rules as unary routes) to mux, each under a pattern of the route table.
	own func(g *Gateway, mux *router, conn *grpc.ClientConn)
	// created maps full RPC method names to the HTTP status of their success (201, 204).
	created map[string]int
	// sentences tune the JSON dialect for the domain's request messages.
	sentences jsonapi.Sentences
}

func (o *Options) domains() []domain {
	return []domain{
		reservationsDomain(o.Backends.Reservations),
		locksDomain(o.Backends.Locks),
		chatDomain(o.Backends.Chat),
		lobbyDomain(o.Backends.Lobby),
		roomDomain(o.Backends.Room),
	}
}

// querySentences are the sentences of integer query parameters, which no body carries.
var querySentences = jsonapi.Sentences{FieldErrors: map[protoreflect.FullName]string{
	"vigil.chat.v1.ListMessagesRequest.limit":  input.Int("limit", 0, 1, 1000).Error(),
	"vigil.chat.v1.ListMessagesRequest.before": input.PositiveSafeInt("before", 0).Error(),
	"vigil.chat.v1.ListMessagesRequest.since":  input.Int("since", -1, 0, input.MaxSafeInt).Error(),
}}

// sentences are the JSON dialect's sentences of every domain, served or not.
func sentences() []jsonapi.Sentences {
	all := []jsonapi.Sentences{querySentences}
	for _, d := range (&Options{}).domains() {
		all = append(all, d.sentences)
	}
	return all
}

func reservationsDomain(addr string) domain {
	return domain{
		name: "reservations",
		addr: addr,
		rest: reservationsv1.RegisterReservationServiceHandler,
		// The writes skip the grpc-gateway runtime (gateway/rest/unary.go); reads stay on it.
		own: func(g *Gateway, mux *router, conn *grpc.ClientConn) {
			c := reservationsv1.NewReservationServiceClient(conn)
			mux.fail(rest.HandleUnary(g.rest, mux, "POST /reservations/{reservationId}", http.StatusCreated,
				func(ctx context.Context, req *reservationsv1.CreateReservationRequest) (proto.Message, error) {
					res, err := c.CreateReservation(ctx, req)
					return res.GetReservation(), err
				}))
			mux.fail(rest.HandleUnary(g.rest, mux, "POST /reservations/{reservationId}/confirm", http.StatusOK,
				func(ctx context.Context, req *reservationsv1.ConfirmReservationRequest) (proto.Message, error) {
					res, err := c.ConfirmReservation(ctx, req)
					return res.GetReservation(), err
				}))
			mux.fail(rest.HandleUnary(g.rest, mux, "POST /reservations/{reservationId}/release", http.StatusOK,
				func(ctx context.Context, req *reservationsv1.ReleaseReservationRequest) (proto.Message, error) {
					res, err := c.ReleaseReservation(ctx, req)
					return res.GetReservation(), err
				}))
		},
		created: map[string]int{
			"/vigil.reservations.v1.ReservationService/CreateReservation": http.StatusCreated,
		},
		sentences: jsonapi.Sentences{
			AllowEmpty: []protoreflect.FullName{
				"vigil.reservations.v1.ConfirmReservationRequest",
				"vigil.reservations.v1.ReleaseReservationRequest",
			},
			FieldErrors: map[protoreflect.FullName]string{
				"vigil.reservations.v1.CreateReservationRequest.ttl_seconds": "ttlSeconds must be an integer from 5 through 3600.",
				"vigil.reservations.v1.ReplayAlarmRequest.now":               input.PositiveSafeInt("now", 0).Error(),
			},
		},
	}
}

// locksDomain serves the LockService façade: /locks/{resource}/acquire, /release, /renew and
// GET /locks/{resource}. Every answer is 200; not getting a lock is acquired:false.
func locksDomain(addr string) domain {
	return domain{
		name: "locks",
		addr: addr,
		rest: locksv1.RegisterLockServiceHandler,
		// The writes skip the grpc-gateway runtime and ride lock sessions (gateway/rest/lockrelay.go);
		// GET stays on the runtime.
		own: func(g *Gateway, mux *router, conn *grpc.ClientConn) {
			r := rest.NewLockRelay(conn)
			g.closers = append(g.closers, r.Close)
			mux.fail(g.rest.HandleLockWrites(mux, r))
		},
		sentences: jsonapi.Sentences{FieldErrors: map[protoreflect.FullName]string{
			"vigil.locks.v1.AcquireRequest.owner":   nameSentence("owner", 256),
			"vigil.locks.v1.AcquireRequest.ttl_ms":  "ttlMs must be an integer from 100 through 3600000.",
			"vigil.locks.v1.AcquireRequest.wait_ms": "waitMs must be an integer from 0 through 60000.",
			"vigil.locks.v1.ReleaseRequest.owner":   nameSentence("owner", 256),
			"vigil.locks.v1.RenewRequest.owner":     nameSentence("owner", 256),
			"vigil.locks.v1.RenewRequest.ttl_ms":    "ttlMs must be an integer from 100 through 3600000.",
		}},
	}
}

// nameSentence is the sentence of input.Name for field, so the gateway and the services say
// the same thing for the same mistake.
func nameSentence(field string, maxBytes int) string { return input.Name(field, "", maxBytes).Error() }

// chatDomain serves REST history and posts through grpc-gateway, and the WebSocket bridge
// GET /websocket (gateway/chat).
func chatDomain(addr string) domain {
	return domain{
		name: "chat",
		addr: addr,
		rest: chatv1.RegisterChatServiceHandler,
		own: func(g *Gateway, mux *router, conn *grpc.ClientConn) {
			b := chat.NewBridge(conn, g.log, g.sockets, g.socketLimits(0))
			mux.HandleFunc("GET /websocket", b.ServeSocket)
		},
		created: map[string]int{
			"/vigil.chat.v1.ChatService/PostMessage": http.StatusCreated,
		},
		sentences: jsonapi.Sentences{FieldErrors: map[protoreflect.FullName]string{
			"vigil.chat.v1.PostMessageRequest.user_id":  "userId must be 1 to 128 printable characters.",
			"vigil.chat.v1.PostMessageRequest.username": "username must be 1 to 64 printable characters.",
			"vigil.chat.v1.PostMessageRequest.body":     "body must be 1 to 4096 characters.",
		}},
	}
}

// lobbyDomain serves POST /lobby/rooms, GET /lobby/rooms, GET /lobby/rooms/{code}. The lobby's
// other RPCs (occupancy deltas, snapshots, touches, token checks, removal) are for the Room
// service only and have no HTTP route. DELETE /lobby/rooms/{code} belongs to the room domain:
// the Room service checks the leader token, closes the sockets and removes the room from the
// Lobby.
func lobbyDomain(addr string) domain {
	return domain{
		name: "lobby",
		addr: addr,
		rest: lobbyv1.RegisterLobbyServiceHandler,
		// GET /lobby/rooms is served directly (rest.Relay.ServeRoomList); the grpc-gateway rule
		// stays for the OpenAPI document and is shadowed by this route.
		own: func(g *Gateway, mux *router, conn *grpc.ClientConn) {
			mux.HandleFunc("GET /lobby/rooms", g.rest.ServeRoomList(lobbyv1.NewLobbyServiceClient(conn)))
		},
		created: map[string]int{
			"/vigil.lobby.v1.LobbyService/CreateRoom": http.StatusCreated,
		},
		sentences: jsonapi.Sentences{FieldErrors: map[protoreflect.FullName]string{
			"vigil.lobby.v1.CreateRoomRequest.name":     "name must be 1 to 80 characters.",
			"vigil.lobby.v1.CreateRoomRequest.video":    "Describe the video: {\"title\", \"durationMs\"}.",
			"vigil.lobby.v1.Video.title":                "video.title must be 1 to 200 characters.",
			"vigil.lobby.v1.Video.duration_ms":          "video.durationMs must be an integer from 1 through 86400000.",
			"vigil.lobby.v1.ListRoomsRequest.page_size": "limit must be an integer from 1 through 200.",
		}},
	}
}

// roomDomain serves the practice-room WebSocket GET /rooms/{code}/websocket (gateway/room),
// GET /lobby/rooms/{code}/people (RoomService.ListPeople: who is here), and
// DELETE /lobby/rooms/{code} (RoomService.EndRoom, through grpc-gateway, with the leader token
// as "Authorization: Bearer"). Ending a room is the Room service's job: it checks the token
// with the Lobby, closes every socket (4000 "ended"), removes the room from the Lobby and
// deletes its state, the same clean-up its inactivity alarm runs.
func roomDomain(addr string) domain {
	return domain{
		name: "room",
		addr: addr,
		rest: roomv1.RegisterRoomServiceHandler,
		own: func(g *Gateway, mux *router, conn *grpc.ClientConn) {
			b := room.NewBridge(conn, g.log, g.sockets, g.socketLimits(room.MaxFrameBytes))
			mux.HandleFunc("GET /rooms/{code}/websocket", b.ServeSocket)
		},
		created: map[string]int{
			"/vigil.room.v1.RoomService/EndRoom": http.StatusNoContent,
		},
		sentences: jsonapi.Sentences{AllowEmpty: []protoreflect.FullName{"vigil.room.v1.EndRoomRequest"}},
	}
}
