// Command room runs the room service.
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
	"github.com/vigil-dev/vigil/services/room/service"
)

func main() {
	fs := flag.NewFlagSet("room", flag.ExitOnError)
	grpcAddr := config.String(fs, "grpc-addr", "VIGIL_GRPC_ADDR", ":7005", "gRPC listen address")
	metricsAddr := config.String(fs, "metrics-addr", "VIGIL_METRICS_ADDR", ":9005", "Prometheus metrics address; empty for none")
	redisURL := config.String(fs, "redis-url", "REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL (redis:// or rediss://)")
	cluster := config.String(fs, "redis-cluster", "REDIS_CLUSTER", "", "comma-separated Redis Cluster seed addresses; overrides -redis-url")
	prefix := config.String(fs, "prefix", "VIGIL_PREFIX", "vigil", "key prefix")
	shards := config.Int(fs, "shards", "VIGIL_SHARDS", 16, "alarm queue shards (fixed per deployment)")
	lobbyAddr := config.String(fs, "lobby-addr", "VIGIL_LOBBY_ADDR", "127.0.0.1:7004", "the lobby service's gRPC address")
	idleTTL := config.Duration(fs, "idle-ttl", "VIGIL_ROOM_IDLE_TTL", time.Hour, "a room with no leader action for this long expires (same as the lobby's)")
	lease := config.Duration(fs, "session-lease", "VIGIL_ROOM_SESSION_LEASE", 15*time.Second, "a session not renewed for this long stops counting")
	logFormat := config.String(fs, "log-format", "VIGIL_LOG_FORMAT", "json", "log format: json or text")
	logLevel := config.String(fs, "log-level", "VIGIL_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := service.Run(ctx, service.Options{
		GRPCAddr:     *grpcAddr,
		MetricsAddr:  *metricsAddr,
		Redis:        redisx.Config{URL: *redisURL, ClusterAddrs: redisx.ParseClusterAddrs(*cluster)},
		Prefix:       *prefix,
		Shards:       *shards,
		LobbyAddr:    *lobbyAddr,
		IdleTTL:      *idleTTL,
		SessionLease: *lease,
		Logger:       config.Logger(*logFormat, *logLevel),
	}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "room:", err)
		os.Exit(1)
	}
}
