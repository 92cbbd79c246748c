// Command chat runs the chat service.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/chat/service"
)

func main() {
	fs := flag.NewFlagSet("chat", flag.ExitOnError)
	grpcAddr := config.String(fs, "grpc-addr", "VIGIL_GRPC_ADDR", ":7003", "gRPC listen address")
	metricsAddr := config.String(fs, "metrics-addr", "VIGIL_METRICS_ADDR", ":9003", "Prometheus metrics address; empty for none")
	redisURL := config.String(fs, "redis-url", "REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL (redis:// or rediss://)")
	cluster := config.String(fs, "redis-cluster", "REDIS_CLUSTER", "", "comma-separated Redis Cluster seed addresses; overrides -redis-url")
	prefix := config.String(fs, "prefix", "VIGIL_PREFIX", "vigil", "key prefix")
	keep := config.Int(fs, "history-keep", "VIGIL_CHAT_HISTORY_KEEP", 1000, "messages kept per room")
	onJoin := config.Int(fs, "history-on-join", "VIGIL_CHAT_HISTORY_ON_JOIN", 50, "messages a new member gets")
	logFormat := config.String(fs, "log-format", "VIGIL_LOG_FORMAT", "json", "log format: json or text")
	logLevel := config.String(fs, "log-level", "VIGIL_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := service.Run(ctx, service.Options{
		GRPCAddr:      *grpcAddr,
		MetricsAddr:   *metricsAddr,
		Redis:         redisx.Config{URL: *redisURL, ClusterAddrs: redisx.ParseClusterAddrs(*cluster)},
		Prefix:        *prefix,
		HistoryKeep:   *keep,
		HistoryOnJoin: *onJoin,
		Logger:        config.Logger(*logFormat, *logLevel),
	}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}
