// Command lobby runs the lobby service.
package main

import (
	"context"
	"flag"
	"time"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/lobby/service"
)

func main() {
	fs := flag.NewFlagSet("lobby", flag.ExitOnError)
	idleTTL := config.Duration(fs, "idle-ttl", "VIGIL_ROOM_IDLE_TTL", time.Hour, "rooms' inactivity TTL (same as the room service's)")
	grace := config.Duration(fs, "prune-grace", "VIGIL_LOBBY_PRUNE_GRACE", 5*time.Minute, "how long past the idle TTL an untouched room stays listed")

	config.Serve(fs, ":7004", ":9004", func(ctx context.Context, core server.Core) (*service.Service, error) {
		return service.New(ctx, service.Options{
			Core:       core,
			IdleTTL:    *idleTTL,
			PruneGrace: *grace,
		})
	})
}
