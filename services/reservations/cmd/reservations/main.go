// Command reservations runs the reservations service.
package main

import (
	"context"
	"flag"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/reservations/service"
)

func main() {
	fs := flag.NewFlagSet("reservations", flag.ExitOnError)
	shards := config.Int(fs, "shards", "VIGIL_SHARDS", 16, "alarm queue shards (fixed per deployment)")
	replay := config.Bool(fs, "replay", "VIGIL_REPLAY", false, "enable the replay-alarm RPC")

	config.Serve(fs, ":7001", ":9001", func(ctx context.Context, core server.Core) (*service.Service, error) {
		return service.New(ctx, service.Options{
			Core:   core,
			Shards: *shards,
			Replay: *replay,
		})
	})
}
