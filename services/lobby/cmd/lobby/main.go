// Command lobby runs the lobby service.
package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/services/lobby/service"
)

func main() {
	fs := flag.NewFlagSet("lobby", flag.ExitOnError)
	common := config.Service(fs, ":7004", ":9004")
	idleTTL := config.Duration(fs, "idle-ttl", "VIGIL_ROOM_IDLE_TTL", time.Hour, "rooms' inactivity TTL (same as the room service's)")
	grace := config.Duration(fs, "prune-grace", "VIGIL_LOBBY_PRUNE_GRACE", 5*time.Minute, "how long past the idle TTL an untouched room stays listed")
	_ = fs.Parse(os.Args[1:])

	config.Main("lobby", func(ctx context.Context) error {
		svc, err := service.New(ctx, service.Options{
			Core:       common.Core(),
			IdleTTL:    *idleTTL,
			PruneGrace: *grace,
		})
		if err != nil {
			return err
		}
		return svc.Serve(ctx)
	})
}
