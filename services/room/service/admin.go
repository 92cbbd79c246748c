package service

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
)

// roomLookup shows a room to the admin service as the Lobby lists it (name, video, viewers,
// leader, last activity); a room the Lobby no longer lists is not found, though its alarm,
// if any, is still shown.
func roomLookup(lobby lobbyv1.LobbyServiceClient) alarmadmin.Lookup {
	return func(ctx context.Context, code string) (proto.Message, error) {
		res, err := lobby.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: code})
		if status.Code(err) == codes.NotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return res.GetRoom(), nil
	}
}
