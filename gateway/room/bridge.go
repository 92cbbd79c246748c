// Package room is the practice-room WebSocket route: one upstream Attach stream per room with
// sockets on this gateway, carrying every socket's session, re-attached when it breaks.
package room

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/gateway/bridge"
	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"github.com/vigil-dev/vigil/gateway/socket"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/input"
)

// The room domain: the practice-room WebSocket GET /rooms/{code}/websocket?role=&clientId=
// [&name=][&token=], and DELETE /lobby/rooms/{code} (RoomService.EndRoom, through grpc-gateway, with
// the leader token as "Authorization: Bearer"). Ending a room is the Room service's job: it
// checks the token with the Lobby, closes every socket (4000 "ended"), removes the room from
// the Lobby and deletes its state, the same clean-up its inactivity alarm runs.
//
// Each socket is a session the Room service counts (viewers are distinct client ids) and
// leases, opened under a session id the gateway picks on the room's one Attach stream. The hello is answered
// before the upgrade, so a wrong or missing leader token is a plain 401 and a missing room a
// 404, never an upgraded socket that closes at once. The session outlives its stream: when a
// Room replica restarts or dies, the socket stays open and the session re-attaches to a live
// replica under the same session and client ids (stream.go), so the Lobby's count never
// moves.

// MaxNameBytes bounds a socket's display name (name=), as the Room service does.
const MaxNameBytes = 80

// roomCloseCode closes a socket whose room ended ("ended") or expired ("expired").
const roomCloseCode = 4000

// MaxFrameBytes is the largest frame a practice-room client sends by nature (a formation),
// used unless the gateway's limits set one.
const MaxFrameBytes = 24 << 10

// NewBridge serves practice-room sockets from sockets, each with lim, over conn's room service.
func NewBridge(conn *grpc.ClientConn, log *slog.Logger, sockets *socket.Registry, lim socket.Limits) *Bridge {
	b := &Bridge{client: roomv1.NewRoomServiceClient(conn), sockets: sockets, lim: lim, log: log}
	b.rooms = bridge.NewHub(conn, bridge.Heartbeat{}, func(string) *practiceRoom { return newPracticeRoom(b) })
	return b
}

// Bridge bridges practice-room sockets to sessions on one RoomService.Attach stream per
// room (stream.go).
type Bridge struct {
	client  roomv1.RoomServiceClient
	sockets *socket.Registry
	lim     socket.Limits
	log     *slog.Logger

	// rooms are the practice rooms with sockets on this gateway, each with its one Attach stream.
	rooms *bridge.Hub[*practiceRoom]
}

// ServeSocket upgrades GET /rooms/{code}/websocket.
func (b *Bridge) ServeSocket(w http.ResponseWriter, r *http.Request) {
	if !socket.IsUpgrade(r) {
		socket.RefuseNonWebSocket(w)
		return
	}
	q := r.URL.Query()
	var role roomv1.Role
	switch q.Get("role") {
	case "", "viewer":
		role = roomv1.Role_ROLE_VIEWER
	case "leader":
		role = roomv1.Role_ROLE_LEADER
	default:
		jsonapi.WriteError(w, http.StatusBadRequest, "role must be leader or viewer.")
		return
	}
	clientID := q.Get("clientId")
	if clientID == "" {
		clientID = "c-" + randomHex(8)
	}
	// name= is the person's display name in the room's people list ("": the service's
	// "Dancer N"); a bad one is a 400 with the service's sentence, before anything is opened.
	name := q.Get("name")
	if q.Has("name") {
		if err := input.Name("name", name, MaxNameBytes); err != nil {
			jsonapi.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	token := q.Get("token")
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && token == "" {
		token = strings.TrimSpace(t)
	}
	code := r.PathValue("code")
	ticket, ok := b.sockets.Admit(w, r, socket.Key{Route: "room", Name: code})
	if !ok {
		return
	}
	m, err := b.join(&roomv1.Hello{
		Code: code, Role: role, ClientId: clientID, LeaderToken: token, SessionId: randomHex(12), Name: name,
	})
	if err != nil {
		ticket.Release()
		refuseRoomSocket(w, err)
		return
	}
	sock, err := ticket.Accept(w, r, b.lim)
	if err != nil {
		b.leave(m)
		b.log.Info("websocket upgrade failed", "event", "ws_refused", "route", "room", "err", err)
		return
	}
	m.upgraded(sock)
	// The handler returns, so net/http frees the connection's state; the reader goroutine is
	// the socket's only goroutine.
	go m.readSocket(sock)
}

// refuseRoomSocket answers a refused hello before any upgrade.
func refuseRoomSocket(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	code, msg := runtime.HTTPStatusFromCode(st.Code()), st.Message()
	switch st.Code() {
	case codes.InvalidArgument, codes.NotFound, codes.Unauthenticated, codes.PermissionDenied:
	case codes.DeadlineExceeded:
		msg = "The room service did not answer in time; try again."
	default:
		code, msg = http.StatusServiceUnavailable, "The room service is unavailable; try again shortly."
	}
	jsonapi.WriteError(w, code, msg)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
