// Command locks runs Vigil's lock service.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/services/locks/service"
)

func main() {
	fs := flag.NewFlagSet("locks", flag.ExitOnError)
	common := config.Service(fs, ":7002", ":9002")
	shards := config.Int(fs, "shards", "VIGIL_SHARDS", 16, "shards of the lock keyspace (fixed per deployment)")
	maxWaiting := config.Int(fs, "max-waiting", "VIGIL_LOCKS_MAX_WAITING", 512, "most acquires waiting at once in this replica")
	_ = fs.Parse(os.Args[1:])

	config.Main("locks", func(ctx context.Context) error {
		svc, err := service.New(ctx, service.Options{
			Core:       common.Core(),
			Shards:     *shards,
			MaxWaiting: *maxWaiting,
		})
		if err != nil {
			return err
		}
		return svc.Serve(ctx)
	})
}
