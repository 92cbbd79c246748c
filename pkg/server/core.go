package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/clock"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

// Core is the part of Options every Vigil service shares; each service's Options embeds it, so
// the five services are configured, defaulted and started the same way. Every zero value has
// the default given in its comment, applied by WithDefaults.
type Core struct {
	// GRPCAddr to listen on. Default "127.0.0.1:0" (a free port; the service's Addr tells which).
	GRPCAddr string
	// MetricsAddr serves Prometheus /metrics when set. Default "": none.
	MetricsAddr string
	// Redis holds the service's data, as durably as Redis.Durability asks (Build refuses to
	// start on a Redis that cannot keep that promise). Required: a URL, Sentinel addresses or
	// cluster addresses.
	Redis redisx.Config
	// Prefix starts every key and pub/sub channel; distinct deployments sharing one Redis need
	// distinct prefixes. Default "vigil".
	Prefix string
	// Logger for everything. Default slog.Default().
	Logger *slog.Logger
	// Registerer takes every metric of the service: the gRPC server's, Redis's, the alarm
	// queue's and the domain's own. When it is also a prometheus.Gatherer (a
	// *prometheus.Registry), MetricsAddr serves it. Default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// TLS secures the gRPC listener (mutual TLS when TLS.CAFile is set); main fills it from the
	// -tls-* flags (VIGIL_TLS_*). Default: plaintext.
	TLS TLS
	// MaxInFlight bounds the unary calls running at once (Options.MaxInFlight).
	// Default DefaultMaxInFlight (1024); negative: no limit.
	MaxInFlight int
	// DrainTimeout bounds the graceful stop. Default 10s.
	DrainTimeout time.Duration
	// Now is the clock every time decision of the service reads. When it is nil, or
	// DisciplineClock is set, it is the local clock (Now, or time.Now) disciplined to the
	// service's Redis's TIME (pkg/clock), so that every replica sharing that Redis decides
	// against one clock; the first sample is taken before the service serves. An injected Now
	// without DisciplineClock is used as it is (a test's fake clock drives time by itself).
	// Default: time.Now disciplined to Redis's TIME.
	Now func() time.Time
	// DisciplineClock disciplines an injected Now to Redis's TIME too (a test's skewed clock,
	// corrected as production's is). Default false: on only when Now is nil.
	DisciplineClock bool
	// ClockWarnAbove: a replica whose own clock is further than this from Redis's TIME says
	// so (vigil_clock_offset_seconds, a warning in its log, its /healthz). Its decisions stay
	// right through the measured offset. Default clock.DefaultWarnAbove (1s).
	ClockWarnAbove time.Duration

	// clock is the disciplined clock behind Now, nil when Now is used as injected.
	clock *clock.Clock
	// name is the service's short name WithDefaults was given, starting Listen's errors.
	name string
}

// WithDefaults is c with every zero value replaced by its default; name (the service's short
// name, "locks") starts its error.
func (c Core) WithDefaults(name string) (Core, error) {
	if c.Redis.URL == "" && len(c.Redis.ClusterAddrs) == 0 && len(c.Redis.SentinelAddrs) == 0 {
		return c, errors.New(name + ": Options.Redis needs a URL, Sentinel addresses or cluster addresses")
	}
	c.name = name
	if c.GRPCAddr == "" {
		c.GRPCAddr = "127.0.0.1:0"
	}
	if c.Prefix == "" {
		c.Prefix = "vigil"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.DefaultRegisterer
	}
	if c.Redis.Metrics == nil {
		c.Redis.Metrics = c.Registerer
	}
	if c.Redis.Logger == nil {
		// Open says, once, what the durability setting promises.
		c.Redis.Logger = c.Logger
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	if c.clock == nil && (c.Now == nil || c.DisciplineClock) {
		clk, err := clock.New(clock.Options{
			Base: c.Now, WarnAbove: c.ClockWarnAbove, Service: name, Logger: c.Logger, Registerer: c.Registerer,
		})
		if err != nil {
			return c, fmt.Errorf("%s: %w", name, err)
		}
		c.clock, c.Now = clk, clk.Now
	}
	return c, nil
}

// Server is the bootstrap's Options for the service called name (its gRPC service name) on
// store: listener, metrics, logger, TLS, limits and the disciplined clock from c. The clock
// samples store's TIME from server.New on.
func (c Core) Server(name string, store redis.UniversalClient) Options {
	return Options{
		Name: name, GRPCAddr: c.GRPCAddr, MetricsAddr: c.MetricsAddr, Logger: c.Logger,
		DrainTimeout: c.DrainTimeout, TLS: c.TLS, MaxInFlight: c.MaxInFlight,
		Registerer: c.Registerer, Store: store, Clock: c.clock,
	}
}

// Listen makes the service's gRPC server on the options c.Server gives (its health is
// NOT_SERVING while store does not answer) and listens; the service registers its handlers on
// GRPC before it serves. An error starts with the name c's WithDefaults was given.
func (c Core) Listen(name string, store redis.UniversalClient) (*Server, error) {
	srv, err := New(c.Server(name, store))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.name, err)
	}
	return srv, nil
}

// ServiceOptions is what Build needs of a service's Options: the Core it embeds.
type ServiceOptions interface{ core() Core }

func (c Core) core() Core { return c }

// Build is the start every service's New shares: it applies the service's defaults to o,
// connects to o's Redis, makes the service on that connection with build, and closes the
// connection again when build fails, so that no failed start leaks it. The connection's error
// starts with the service's short name (WithDefaults's); defaults' and build's errors are
// returned as they are.
func Build[O ServiceOptions, S any](ctx context.Context, o O, defaults func(O) (O, error), build func(o O, rdb redis.UniversalClient) (S, error)) (S, error) {
	var none S
	o, err := defaults(o)
	if err != nil {
		return none, err
	}
	c := o.core()
	rdb, err := redisx.Open(ctx, c.Redis)
	if err != nil {
		return none, fmt.Errorf("%s: %w", c.name, err)
	}
	s, err := build(o, rdb)
	if err != nil {
		_ = rdb.Close()
	}
	return s, err
}
