// Command room runs the room service.
package main

import (
	"context"
	"flag"
	"time"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/room/service"
)

func main() {
	fs := flag.NewFlagSet("room", flag.ExitOnError)
	shards := config.Int(fs, "shards", "VIGIL_SHARDS", 16, "alarm queue shards (fixed per deployment)")
	lobbyAddr := config.String(fs, "lobby-addr", "VIGIL_LOBBY_ADDR", "127.0.0.1:7004", "the lobby service's gRPC address")
	idleTTL := config.Duration(fs, "idle-ttl", "VIGIL_ROOM_IDLE_TTL", time.Hour, "a room with no leader action for this long expires (same as the lobby's)")
	lease := config.Duration(fs, "session-lease", "VIGIL_ROOM_SESSION_LEASE", 15*time.Second, "a session not renewed for this long stops counting")

	config.Serve(fs, ":7005", ":9005", func(ctx context.Context, core server.Core) (*service.Service, error) {
		return service.New(ctx, service.Options{
			Core:         core,
			Shards:       *shards,
			LobbyAddr:    *lobbyAddr,
			IdleTTL:      *idleTTL,
			SessionLease: *lease,
		})
	})
}
