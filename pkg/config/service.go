package config

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-dev/vigil/pkg/clock"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
)

// ServiceFlags are the settings every Vigil service shares, each a flag with an environment
// variable (a container runs one service, so the names carry no service prefix).
type ServiceFlags struct {
	// GRPCAddr to listen on (-grpc-addr, VIGIL_GRPC_ADDR).
	GRPCAddr *string
	// MetricsAddr serves Prometheus metrics; empty for none (-metrics-addr, VIGIL_METRICS_ADDR).
	MetricsAddr *string
	// RedisURL is one Redis (-redis-url, REDIS_URL).
	RedisURL *string
	// RedisCluster is a comma-separated seed list; when set it wins (-redis-cluster, REDIS_CLUSTER).
	RedisCluster *string
	// Prefix starts every key (-prefix, VIGIL_PREFIX). Default "vigil".
	Prefix *string
	// LogFormat is json or text (-log-format, VIGIL_LOG_FORMAT). Default json.
	LogFormat *string
	// LogLevel is debug, info, warn or error (-log-level, VIGIL_LOG_LEVEL). Default info.
	LogLevel *string
	// TLSCert, TLSKey and TLSCA secure the gRPC listener, mutual TLS with the CA
	// (-tls-cert, -tls-key, -tls-ca; VIGIL_TLS_CERT, VIGIL_TLS_KEY, VIGIL_TLS_CA); TLSServerName
	// is the name expected of the services this one calls (-tls-server-name,
	// VIGIL_TLS_SERVER_NAME). Default: none, plaintext.
	TLSCert, TLSKey, TLSCA, TLSServerName *string
	// MaxInFlight bounds the unary calls running at once (-max-inflight, VIGIL_MAX_INFLIGHT).
	// Default 1024; negative: no limit.
	MaxInFlight *int
	// RedisPassword and RedisPasswordFile give the Redis password when the URL has none
	// (-redis-password, VIGIL_REDIS_PASSWORD; -redis-password-file, VIGIL_REDIS_PASSWORD_FILE,
	// a container secret). Default: none.
	RedisPassword, RedisPasswordFile *string
	// RedisTLS turns TLS on for cluster seeds, which have no URL scheme to say so
	// (-redis-tls, VIGIL_REDIS_TLS). Default false; a rediss:// URL turns it on by itself.
	RedisTLS *bool
	// RedisTLSCA verifies Redis's certificate; RedisTLSCert and RedisTLSKey are a client
	// certificate for tls-auth-clients (-redis-tls-ca, -redis-tls-cert, -redis-tls-key;
	// VIGIL_REDIS_TLS_CA, VIGIL_REDIS_TLS_CERT, VIGIL_REDIS_TLS_KEY). Default: none.
	RedisTLSCA, RedisTLSCert, RedisTLSKey *string
	// RedisTimeout bounds each Redis call (-redis-timeout, VIGIL_REDIS_TIMEOUT).
	// Default redisx.DefaultTimeout.
	RedisTimeout *time.Duration
	// RedisDurability is when a write counts as done: async, replica or fsync
	// (-redis-durability, VIGIL_REDIS_DURABILITY; redisx.Durability). Default async.
	RedisDurability *string
	// RedisSentinels is a comma-separated list of Sentinel addresses watching the primary named
	// RedisMaster; when set it wins over -redis-url (-redis-sentinels, VIGIL_REDIS_SENTINELS;
	// -redis-master, VIGIL_REDIS_MASTER). A redis+sentinel:// URL says the same. Default: none.
	RedisSentinels, RedisMaster *string
	// RedisSentinelPassword authenticates to the Sentinels themselves
	// (-redis-sentinel-password, VIGIL_REDIS_SENTINEL_PASSWORD). Default: none.
	RedisSentinelPassword *string
	// ClockWarnAbove: a replica whose clock is further than this from Redis's TIME says so
	// (-clock-warn-above, VIGIL_CLOCK_WARN_ABOVE). Default 1s (clock.DefaultWarnAbove).
	ClockWarnAbove *time.Duration
}

// Service defines the shared flags on fs with the service's default listen addresses.
func Service(fs *flag.FlagSet, grpcAddr, metricsAddr string) ServiceFlags {
	f := ServiceFlags{
		GRPCAddr:      String(fs, "grpc-addr", "VIGIL_GRPC_ADDR", grpcAddr, "gRPC listen address"),
		MetricsAddr:   String(fs, "metrics-addr", "VIGIL_METRICS_ADDR", metricsAddr, "Prometheus metrics address; empty for none"),
		RedisURL:      String(fs, "redis-url", "REDIS_URL", "redis://127.0.0.1:6379/0", "Redis URL (redis:// or rediss://)"),
		RedisCluster:  String(fs, "redis-cluster", "REDIS_CLUSTER", "", "comma-separated Redis Cluster seed addresses; overrides -redis-url"),
		Prefix:        String(fs, "prefix", "VIGIL_PREFIX", "vigil", "key prefix"),
		LogFormat:     String(fs, "log-format", "VIGIL_LOG_FORMAT", "json", "log format: json or text"),
		LogLevel:      String(fs, "log-level", "VIGIL_LOG_LEVEL", "info", "log level: debug, info, warn, error"),
		TLSCert:       String(fs, "tls-cert", server.EnvTLSCert, "", "certificate (PEM) the gRPC listener serves and presents to other services; empty: plaintext"),
		TLSKey:        String(fs, "tls-key", server.EnvTLSKey, "", "key (PEM) of -tls-cert"),
		TLSCA:         String(fs, "tls-ca", server.EnvTLSCA, "", "CA (PEM) every caller's certificate must be signed by (mutual TLS); it also verifies the services this one calls"),
		TLSServerName: String(fs, "tls-server-name", server.EnvTLSServerName, "", "name expected in the certificates of the services this one calls; default the dialled host"),
		MaxInFlight:   Int(fs, "max-inflight", server.EnvMaxInFlight, server.DefaultMaxInFlight, "unary calls running at once; the rest get RESOURCE_EXHAUSTED; negative: no limit"),

		RedisPassword:     String(fs, "redis-password", "VIGIL_REDIS_PASSWORD", "", "Redis password when the URL has none"),
		RedisPasswordFile: String(fs, "redis-password-file", "VIGIL_REDIS_PASSWORD_FILE", "", "file holding the Redis password (read when -redis-password is empty)"),
		RedisTLS:          Bool(fs, "redis-tls", "VIGIL_REDIS_TLS", false, "speak TLS to Redis (for cluster seeds; rediss:// URLs turn it on themselves)"),
		RedisTLSCA:        String(fs, "redis-tls-ca", "VIGIL_REDIS_TLS_CA", "", "CA (PEM) that signs Redis's certificate; turns TLS on"),
		RedisTLSCert:      String(fs, "redis-tls-cert", "VIGIL_REDIS_TLS_CERT", "", "client certificate (PEM) for a Redis that requires one"),
		RedisTLSKey:       String(fs, "redis-tls-key", "VIGIL_REDIS_TLS_KEY", "", "key (PEM) of -redis-tls-cert"),
		RedisTimeout:      Duration(fs, "redis-timeout", "VIGIL_REDIS_TIMEOUT", redisx.DefaultTimeout, "bound on each Redis call (a Go duration)"),
		RedisDurability: String(fs, "redis-durability", "VIGIL_REDIS_DURABILITY", string(redisx.Async),
			"when a write counts as done: async (the primary has it), replica (a replica has it too) or fsync (and on disk); docs/OPERATIONS.md, Durability"),
		RedisSentinels:        String(fs, "redis-sentinels", "VIGIL_REDIS_SENTINELS", "", "comma-separated Redis Sentinel addresses watching -redis-master; overrides -redis-url"),
		RedisMaster:           String(fs, "redis-master", "VIGIL_REDIS_MASTER", "", "name the Sentinels know the primary by"),
		RedisSentinelPassword: String(fs, "redis-sentinel-password", "VIGIL_REDIS_SENTINEL_PASSWORD", "", "password of the Sentinels themselves (the nodes' is -redis-password)"),
		ClockWarnAbove:        Duration(fs, "clock-warn-above", "VIGIL_CLOCK_WARN_ABOVE", clock.DefaultWarnAbove, "a clock further than this from Redis's TIME is reported (log, vigil_clock_offset_seconds, /healthz on the metrics address)"),
	}
	Validate(fs, func() error { return LogSettings(*f.LogFormat, *f.LogLevel) })
	Validate(fs, func() error { return RedisSettings(*f.RedisDurability, *f.RedisSentinels, *f.RedisMaster) })
	return f
}

// RedisSettings checks a durability setting and a Sentinel list with its master name as
// redisx.Open reads them, so that a bad value stops the start before anything connects.
func RedisSettings(durability, sentinels, master string) error {
	var errs []error
	if _, err := redisx.ParseDurability(durability); err != nil {
		errs = append(errs, fmt.Errorf("%w (VIGIL_REDIS_DURABILITY, -redis-durability)", err))
	}
	if addrs := redisx.ParseClusterAddrs(sentinels); len(addrs) > 0 && strings.TrimSpace(master) == "" {
		errs = append(errs, fmt.Errorf("redis sentinels %s are given without the name of the primary they watch: "+
			"set VIGIL_REDIS_MASTER (-redis-master) to it", strings.Join(addrs, ",")))
	}
	return errors.Join(errs...)
}

// Redis is the Redis the flags name: the cluster when a seed list is given, else the
// Sentinels when given, else the URL, with the password, TLS, timeout and durability the flags
// give.
func (f ServiceFlags) Redis() redisx.Config {
	c := redisx.Config{
		Password: *f.RedisPassword, PasswordFile: *f.RedisPasswordFile, Timeout: *f.RedisTimeout,
		TLS:        redisx.TLS{Enabled: *f.RedisTLS, CAFile: *f.RedisTLSCA, CertFile: *f.RedisTLSCert, KeyFile: *f.RedisTLSKey},
		Durability: redisx.Durability(*f.RedisDurability), SentinelPassword: *f.RedisSentinelPassword,
	}
	if addrs := redisx.ParseClusterAddrs(*f.RedisCluster); len(addrs) > 0 {
		c.ClusterAddrs = addrs
	} else if sentinels := redisx.ParseClusterAddrs(*f.RedisSentinels); len(sentinels) > 0 {
		c.SentinelAddrs, c.MasterName = sentinels, strings.TrimSpace(*f.RedisMaster)
	} else {
		c.URL = *f.RedisURL
	}
	return c
}

// TLS is the TLS the flags ask for.
func (f ServiceFlags) TLS() server.TLS {
	return server.TLS{CertFile: *f.TLSCert, KeyFile: *f.TLSKey, CAFile: *f.TLSCA, ServerName: *f.TLSServerName}
}

// Core is the service Options core the flags ask for: addresses, Redis, prefix, logger, TLS,
// the in-flight limit and the clock's warning bound (the rest keep their defaults: the clock is
// disciplined to Redis's TIME).
func (f ServiceFlags) Core() server.Core {
	return server.Core{
		GRPCAddr: *f.GRPCAddr, MetricsAddr: *f.MetricsAddr, Redis: f.Redis(), Prefix: *f.Prefix,
		Logger: f.Logger(), TLS: f.TLS(), MaxInFlight: *f.MaxInFlight, ClockWarnAbove: *f.ClockWarnAbove,
	}
}

// Logger is the process logger the flags ask for.
func (f ServiceFlags) Logger() *slog.Logger { return Logger(*f.LogFormat, *f.LogLevel) }

// Main runs a command until SIGINT or SIGTERM, then exits: 0 after a clean stop, 1 with the
// error on stderr otherwise. It is the whole tail of every service's main. Before running, it
// checks every parsed flag set (Check): a value that does not parse stops the start with exit
// code 2 and a sentence per value.
func Main(name string, run func(ctx context.Context) error) {
	if err := checkAll(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, strings.ReplaceAll(err.Error(), "\n", "\n"+name+": "))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Serve is the whole of a service's main once its own flags are defined on fs: it defines the
// flags every service shares (Service, with the service's default listen addresses), parses the
// command line, and runs (Main, named after fs) the service build makes with the Core those
// flags ask for until SIGINT or SIGTERM.
func Serve[S interface{ Serve(context.Context) error }](fs *flag.FlagSet, grpcAddr, metricsAddr string, build func(ctx context.Context, core server.Core) (S, error)) {
	common := Service(fs, grpcAddr, metricsAddr)
	_ = fs.Parse(os.Args[1:])
	Main(fs.Name(), func(ctx context.Context) error {
		svc, err := build(ctx, common.Core())
		if err != nil {
			return err
		}
		return svc.Serve(ctx)
	})
}
