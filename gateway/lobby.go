package gateway

import (
	"context"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
)

// The lobby domain: POST /lobby/rooms, GET /lobby/rooms, GET /lobby/rooms/{code}. The lobby's
// other RPCs (occupancy deltas, snapshots, touches, token checks, removal) are for the Room
// service only and have no HTTP route. DELETE /lobby/rooms/{code} belongs to the room domain:
// the Room service checks the leader token, closes the sockets and removes the room from the
// Lobby (see gateway/room.go).
func lobbyDomain(addr string) domain {
	return domain{
		name: "lobby",
		addr: addr,
		rest: func(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
			return lobbyv1.RegisterLobbyServiceHandler(ctx, mux, conn)
		},
		created: map[string]int{
			"/vigil.lobby.v1.LobbyService/CreateRoom": http.StatusCreated,
		},
		fieldErrors: map[protoreflect.FullName]string{
			"vigil.lobby.v1.CreateRoomRequest.name":  "Give the room a name of 1-80 printable characters.",
			"vigil.lobby.v1.CreateRoomRequest.video": "Describe the video: {\"title\", \"durationMs\"}.",
			"vigil.lobby.v1.Video.title":             "Give the video a title of 1-200 printable characters.",
			"vigil.lobby.v1.Video.duration_ms":       "video.durationMs must be an integer from 1 through 86400000.",
		},
	}
}
