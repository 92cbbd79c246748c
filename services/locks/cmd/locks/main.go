// Command locks runs Vigil's lock service.
package main

import (
	"context"
	"flag"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/locks/service"
)

func main() {
	fs := flag.NewFlagSet("locks", flag.ExitOnError)
	shards := config.Int(fs, "shards", "VIGIL_SHARDS", 16, "shards of the lock keyspace (fixed per deployment)")
	maxWaiting := config.Int(fs, "max-waiting", "VIGIL_LOCKS_MAX_WAITING", 512, "most acquires waiting at once in this replica")

	config.Serve(fs, ":7002", ":9002", func(ctx context.Context, core server.Core) (*service.Service, error) {
		return service.New(ctx, service.Options{
			Core:       core,
			Shards:     *shards,
			MaxWaiting: *maxWaiting,
		})
	})
}
