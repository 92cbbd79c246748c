// Command locks runs Vigil's lock service.
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
	"github.com/vigil-dev/vigil/services/locks/service"
)

func main() {
	fs := flag.NewFlagSet("locks", flag.ExitOnError)
	grpcAddr := config.String(fs, "grpc-addr", "VIGIL_LOCKS_GRPC_ADDR", ":7002", "gRPC listen address")
	metricsAddr := config.String(fs, "metrics-addr", "VIGIL_LOCKS_METRICS_ADDR", ":9002", "Prometheus /metrics listen address (empty: none)")
	redisURL := config.String(fs, "redis-url", "VIGIL_LOCKS_REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL")
	cluster := config.String(fs, "redis-cluster", "VIGIL_LOCKS_REDIS_CLUSTER", "", "comma-separated Redis Cluster seed addresses (instead of -redis-url)")
	prefix := config.String(fs, "prefix", "VIGIL_LOCKS_PREFIX", "vigil", "key prefix")
	shards := config.Int(fs, "shards", "VIGIL_LOCKS_SHARDS", 16, "shards of the lock keyspace (fixed per deployment)")
	maxWaiting := config.Int(fs, "max-waiting", "VIGIL_LOCKS_MAX_WAITING", 512, "most acquires waiting at once in this replica")
	logFormat := config.String(fs, "log-format", "VIGIL_LOG_FORMAT", "json", "log format: json or text")
	logLevel := config.String(fs, "log-level", "VIGIL_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	_ = fs.Parse(os.Args[1:])

	redisCfg := redisx.Config{URL: *redisURL}
	if addrs := redisx.ParseClusterAddrs(*cluster); len(addrs) > 0 {
		redisCfg = redisx.Config{ClusterAddrs: addrs}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := service.Run(ctx, service.Options{
		GRPCAddr:    *grpcAddr,
		MetricsAddr: *metricsAddr,
		Redis:       redisCfg,
		Prefix:      *prefix,
		Shards:      *shards,
		MaxWaiting:  *maxWaiting,
		Logger:      config.Logger(*logFormat, *logLevel),
	}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
