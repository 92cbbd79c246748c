// Package service assembles the reservations service: Redis store, alarm queue and scheduler,
// gRPC server. main and tests start it the same way: New, then Serve.
package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/reservations/internal/app"
	"github.com/vigil-dev/vigil/services/reservations/internal/store"
	"github.com/vigil-dev/vigil/services/reservations/internal/transport"
)

// Options configure the service. Every zero value has the default given in its comment; the
// defaults are applied in one place, New.
type Options struct {
	// GRPCAddr to listen on. Default "127.0.0.1:0" (a free port; see Addr).
	GRPCAddr string
	// MetricsAddr serves Prometheus metrics when set. Default "": none.
	MetricsAddr string
	// Redis to store reservations in. Required.
	Redis redisx.Config
	// Prefix starts every key. Default "vigil".
	Prefix string
	// Shards of the alarm queue; fixed per deployment. Default 16.
	Shards int
	// Lease of a claimed alarm before it fires again. Default 15s.
	Lease time.Duration
	// Replay enables the ReplayAlarm RPC. Default false (on in the dev runner).
	Replay bool
	// Logger for everything but the alarm lines. Default slog.Default().
	Logger *slog.Logger
	// AlarmLog receives one reservation-alarm JSON line per firing and phase (start, done,
	// failed), whatever Logger's level: the record of every firing the seed lab reads.
	// Default os.Stderr; io.Discard turns them off.
	AlarmLog io.Writer
	// Metrics is where the Redis, alarm and gRPC metrics are registered; MetricsAddr serves it
	// when it is also a Gatherer. Default prometheus.DefaultRegisterer.
	Metrics prometheus.Registerer
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// DrainTimeout bounds the graceful stop. Default 10s.
	DrainTimeout time.Duration
	// TLS secures the gRPC listener (mutual TLS when TLS.CAFile is set); main fills it from the
	// -tls-* flags (VIGIL_TLS_*). Default: plaintext.
	TLS server.TLS
	// MaxInFlight bounds the unary calls running at once (server.Options.MaxInFlight).
	// Default 1024; negative: no limit.
	MaxInFlight int

	// wrapHandler, set only by this package's tests, stands between the scheduler and the
	// alarm handler (to crash a replica at a chosen point).
	wrapHandler func(alarm.Handler) alarm.Handler
}

// Service is the reservations service, listening and ready to Serve.
type Service struct {
	rdb     redis.UniversalClient
	q       *alarm.Queue
	srv     *server.Server
	handler alarm.Handler
}

// New connects to Redis, builds the store, the use cases and the gRPC server, and listens on
// o.GRPCAddr. Serve runs it; a Service that is never served still needs its context ended
// (or Serve called) to close its Redis connection, so callers Serve what they create.
func New(ctx context.Context, o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = prometheus.DefaultRegisterer
	}
	if o.Redis.Metrics == nil {
		o.Redis.Metrics = o.Metrics
	}
	rdb, err := redisx.Open(ctx, o.Redis)
	if err != nil {
		return nil, err
	}
	q, err := alarm.New(rdb, alarm.Options{
		Prefix: o.Prefix, Namespace: "reservations", Shards: o.Shards, Lease: o.Lease,
		Now: o.Now, Logger: o.Logger, Metrics: o.Metrics,
	})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	st, err := store.New(rdb, store.Options{Queue: q})
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	a := app.New(st, app.Options{Now: o.Now, Replay: o.Replay, Logger: o.Logger, AlarmLog: o.AlarmLog})
	srv, err := server.New(server.Options{
		Name: "vigil.reservations.v1.ReservationService", GRPCAddr: o.GRPCAddr,
		MetricsAddr: o.MetricsAddr, Logger: o.Logger, DrainTimeout: o.DrainTimeout,
		Registerer: o.Metrics,
		Store:      rdb, // health is NOT_SERVING while Redis does not answer
		TLS:        o.TLS, MaxInFlight: o.MaxInFlight,
	})
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("reservations: %w", err)
	}
	rs := transport.NewServer(a, o.Logger)
	reservationsv1.RegisterReservationServiceServer(srv.GRPC(), rs)
	alarmadmin.Register(srv.GRPC(), q, rs.Lookup, o.Logger)
	var handler alarm.Handler = a
	if o.wrapHandler != nil {
		handler = o.wrapHandler(handler)
	}
	return &Service{rdb: rdb, q: q, srv: srv, handler: handler}, nil
}

// Addr is where the gRPC server listens.
func (s *Service) Addr() net.Addr { return s.srv.Addr() }

// Serve serves gRPC and runs the alarm scheduler until ctx ends, then drains and closes the
// Redis connection.
func (s *Service) Serve(ctx context.Context) error {
	defer s.rdb.Close()
	return s.srv.Serve(ctx, func(ctx context.Context) error { return s.q.Run(ctx, s.handler) })
}
