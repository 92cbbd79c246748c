// Command reservations runs the reservations service.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/services/reservations/service"
)

func main() {
	fs := flag.NewFlagSet("reservations", flag.ExitOnError)
	common := config.Service(fs, ":7001", ":9001")
	shards := config.Int(fs, "shards", "VIGIL_SHARDS", 16, "alarm queue shards (fixed per deployment)")
	replay := config.Bool(fs, "replay", "VIGIL_REPLAY", false, "enable the replay-alarm RPC")
	_ = fs.Parse(os.Args[1:])

	config.Main("reservations", func(ctx context.Context) error {
		svc, err := service.New(ctx, service.Options{
			Core:   common.Core(),
			Shards: *shards,
			Replay: *replay,
		})
		if err != nil {
			return err
		}
		return svc.Serve(ctx)
	})
}
