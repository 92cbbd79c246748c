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
}

// domains is the list of domains, one row each: its name, backend address, grpc-gateway
// handlers and the routes it answers itself (the serve* methods below).
func (o *Options) domains() []domain {
	b := o.Backends
	return []domain{
		{name: "reservations", addr: b.Reservations, rest: reservationsv1.RegisterReservationServiceHandler, own: (*Gateway).serveReservationWrites},
		{name: "locks", addr: b.Locks, rest: locksv1.RegisterLockServiceHandler, own: (*Gateway).serveLockWrites},
		{name: "chat", addr: b.Chat, rest: chatv1.RegisterChatServiceHandler, own: (*Gateway).serveChatSockets},
		{name: "lobby", addr: b.Lobby, rest: lobbyv1.RegisterLobbyServiceHandler, own: (*Gateway).serveRoomList},
		{name: "room", addr: b.Room, rest: roomv1.RegisterRoomServiceHandler, own: (*Gateway).serveRoomSockets},
	}
}

// successCodes maps full RPC method names to the HTTP status of their success when it is not
// 200 OK. Method names are unique across the domains, so one table serves them all.
var successCodes = map[string]int{
	"/vigil.reservations.v1.ReservationService/CreateReservation": http.StatusCreated,
	"/vigil.chat.v1.ChatService/PostMessage":                      http.StatusCreated,
	"/vigil.lobby.v1.LobbyService/CreateRoom":                     http.StatusCreated,
	"/vigil.room.v1.RoomService/EndRoom":                          http.StatusNoContent,
}

// querySentences are the sentences of integer query parameters, which no body carries.
var querySentences = jsonapi.Sentences{FieldErrors: map[protoreflect.FullName]string{
	"vigil.chat.v1.ListMessagesRequest.limit":  input.Int("limit", 0, 1, 1000).Error(),
	"vigil.chat.v1.ListMessagesRequest.before": input.PositiveSafeInt("before", 0).Error(),
	"vigil.chat.v1.ListMessagesRequest.since":  input.Int("since", -1, 0, input.MaxSafeInt).Error(),
}}

// dialect is the JSON dialect's sentences for every domain's request messages, served or not,
// by full message and field name (unique across the domains, so one table serves them all).
var dialect = jsonapi.Sentences{
	AllowEmpty: []protoreflect.FullName{
		"vigil.reservations.v1.ConfirmReservationRequest",
		"vigil.reservations.v1.ReleaseReservationRequest",
		"vigil.room.v1.EndRoomRequest",
	},
	FieldErrors: map[protoreflect.FullName]string{
		"vigil.reservations.v1.CreateReservationRequest.ttl_seconds": "ttlSeconds must be an integer from 5 through 3600.",
		"vigil.reservations.v1.ReplayAlarmRequest.now":               input.PositiveSafeInt("now", 0).Error(),

		"vigil.locks.v1.AcquireRequest.owner":   nameSentence("owner", 256),
		"vigil.locks.v1.AcquireRequest.ttl_ms":  "ttlMs must be an integer from 100 through 3600000.",
		"vigil.locks.v1.AcquireRequest.wait_ms": "waitMs must be an integer from 0 through 60000.",
		"vigil.locks.v1.ReleaseRequest.owner":   nameSentence("owner", 256),
		"vigil.locks.v1.RenewRequest.owner":     nameSentence("owner", 256),
		"vigil.locks.v1.RenewRequest.ttl_ms":    "ttlMs must be an integer from 100 through 3600000.",

		"vigil.chat.v1.PostMessageRequest.user_id":  "userId must be 1 to 128 printable characters.",
		"vigil.chat.v1.PostMessageRequest.username": "username must be 1 to 64 printable characters.",
		"vigil.chat.v1.PostMessageRequest.body":     "body must be 1 to 4096 characters.",

		"vigil.lobby.v1.CreateRoomRequest.name":     "name must be 1 to 80 characters.",
		"vigil.lobby.v1.CreateRoomRequest.video":    "Describe the video: {\"title\", \"durationMs\"}.",
		"vigil.lobby.v1.Video.title":                "video.title must be 1 to 200 characters.",
		"vigil.lobby.v1.Video.duration_ms":          "video.durationMs must be an integer from 1 through 86400000.",
		"vigil.lobby.v1.ListRoomsRequest.page_size": "limit must be an integer from 1 through 200.",
	},
}

// nameSentence is the sentence of input.Name for field, so the gateway and the services say
// the same thing for the same mistake.
func nameSentence(field string, maxBytes int) string { return input.Name(field, "", maxBytes).Error() }

// serveReservationWrites serves the reservation writes as unary routes, skipping the
// grpc-gateway runtime (gateway/rest/unary.go); reads stay on it.
func (g *Gateway) serveReservationWrites(mux *router, conn *grpc.ClientConn) {
	c := reservationsv1.NewReservationServiceClient(conn)
	mux.fail(rest.HandleUnary(g.rest, mux, "POST /reservations/{reservationId}", http.StatusCreated, reservationOf(c.CreateReservation)))
	mux.fail(rest.HandleUnary(g.rest, mux, "POST /reservations/{reservationId}/confirm", http.StatusOK, reservationOf(c.ConfirmReservation)))
	mux.fail(rest.HandleUnary(g.rest, mux, "POST /reservations/{reservationId}/release", http.StatusOK, reservationOf(c.ReleaseReservation)))
}

// reservationOf is a reservation write as a unary route's call: its answer is the reservation
// (the rules' response_body).
func reservationOf[Req any, Res interface {
	GetReservation() *reservationsv1.Reservation
}](
	write func(context.Context, Req, ...grpc.CallOption) (Res, error),
) func(context.Context, Req) (proto.Message, error) {
	return func(ctx context.Context, req Req) (proto.Message, error) {
		res, err := write(ctx, req)
		return res.GetReservation(), err
	}
}

// serveLockWrites serves the LockService façade's writes (/locks/{resource}/acquire, /release,
// /renew) on lock sessions, skipping the grpc-gateway runtime (gateway/rest/lockrelay.go);
// GET /locks/{resource} stays on the runtime. Every answer is 200; not getting a lock is
// acquired:false.
func (g *Gateway) serveLockWrites(mux *router, conn *grpc.ClientConn) {
	r := rest.NewLockRelay(conn)
	g.closers = append(g.closers, r.Close)
	mux.fail(g.rest.HandleLockWrites(mux, r))
}

// serveChatSockets serves the chat WebSocket bridge GET /websocket (gateway/chat); REST history
// and posts go through grpc-gateway.
func (g *Gateway) serveChatSockets(mux *router, conn *grpc.ClientConn) {
	b := chat.NewBridge(conn, g.log, g.sockets, g.socketLimits(0))
	mux.HandleFunc("GET /websocket", b.ServeSocket)
}

// serveRoomList serves GET /lobby/rooms directly (rest.Relay.ServeRoomList); the grpc-gateway
// rule stays for the OpenAPI document and is shadowed by this route. The lobby's REST routes
// are POST /lobby/rooms, GET /lobby/rooms and GET /lobby/rooms/{code}; its other RPCs
// (occupancy deltas, snapshots, touches, token checks, removal) are for the Room service only
// and have no HTTP route. DELETE /lobby/rooms/{code} belongs to the room domain: the Room
// service checks the leader token, closes the sockets and removes the room from the Lobby.
func (g *Gateway) serveRoomList(mux *router, conn *grpc.ClientConn) {
	mux.HandleFunc("GET /lobby/rooms", g.rest.ServeRoomList(lobbyv1.NewLobbyServiceClient(conn)))
}

// serveRoomSockets serves the practice-room WebSocket GET /rooms/{code}/websocket
// (gateway/room). The room domain's REST routes, through grpc-gateway, are
// GET /lobby/rooms/{code}/people (RoomService.ListPeople: who is here) and
// DELETE /lobby/rooms/{code} (RoomService.EndRoom, with the leader token as
// "Authorization: Bearer"). Ending a room is the Room service's job: it checks the token with
// the Lobby, closes every socket (4000 "ended"), removes the room from the Lobby and deletes
// its state, the same clean-up its inactivity alarm runs.
func (g *Gateway) serveRoomSockets(mux *router, conn *grpc.ClientConn) {
	b := room.NewBridge(conn, g.log, g.sockets, g.socketLimits(room.MaxFrameBytes))
	mux.HandleFunc("GET /rooms/{code}/websocket", b.ServeSocket)
}
