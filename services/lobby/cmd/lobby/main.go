// Command lobby runs the lobby service.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/lobby/service"
)

func main() {
	fs := flag.NewFlagSet("lobby", flag.ExitOnError)
	grpcAddr := config.String(fs, "grpc-addr", "VIGIL_GRPC_ADDR", ":7004", "gRPC listen address")
	metricsAddr := config.String(fs, "metrics-addr", "VIGIL_METRICS_ADDR", ":9004", "Prometheus metrics address; empty for none")
	redisURL := config.String(fs, "redis-url", "REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL (redis:// or rediss://)")
	cluster := config.String(fs, "redis-cluster", "REDIS_CLUSTER", "", "comma-separated Redis Cluster seed addresses; overrides -redis-url")
	prefix := config.String(fs, "prefix", "VIGIL_PREFIX", "vigil", "key prefix")
	idleTTL := config.Duration(fs, "idle-ttl", "VIGIL_ROOM_IDLE_TTL", time.Hour, "rooms' inactivity TTL (same as the room service's)")
	grace := config.Duration(fs, "prune-grace", "VIGIL_LOBBY_PRUNE_GRACE", 5*time.Minute, "how long past the idle TTL an untouched room stays listed")
	logFormat := config.String(fs, "log-format", "VIGIL_LOG_FORMAT", "json", "log format: json or text")
	logLevel := config.String(fs, "log-level", "VIGIL_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := service.Run(ctx, service.Options{
		GRPCAddr:    *grpcAddr,
		MetricsAddr: *metricsAddr,
		Redis:       redisx.Config{URL: *redisURL, ClusterAddrs: redisx.ParseClusterAddrs(*cluster)},
		Prefix:      *prefix,
		IdleTTL:     *idleTTL,
		PruneGrace:  *grace,
		Logger:      config.Logger(*logFormat, *logLevel),
	}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lobby:", err)
		os.Exit(1)
	}
}
