// Package service assembles the reservations service: Redis store, alarm queue and scheduler,
// gRPC server. main and tests start it the same way: New, then Serve.
package service

import (
	"context"
	"io"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/reservations/internal/app"
	"github.com/vigil-dev/vigil/services/reservations/internal/store"
	"github.com/vigil-dev/vigil/services/reservations/internal/transport"
)

// Options configure the service. Every zero value has the default given in its comment; the
// defaults are applied in one place, withDefaults.
type Options struct {
	// Core is what every service shares: addresses, Redis (to store reservations in;
	// required), prefix, logger, Registerer (Redis, alarm and gRPC metrics), TLS, limits and
	// clock.
	server.Core
	// Shards of the alarm queue; fixed per deployment. Default 16.
	Shards int
	// Lease of a claimed alarm before it fires again. Default 15s.
	Lease time.Duration
	// Replay enables the ReplayAlarm RPC. Default false (on in the dev runner).
	Replay bool
	// AlarmLog receives one reservation-alarm JSON line per firing and phase (start, done,
	// failed), whatever Logger's level: the record of every firing the seed lab reads.
	// Default os.Stderr; io.Discard turns them off.
	AlarmLog io.Writer

	// wrapHandler, set only by this package's tests, stands between the scheduler and the
	// alarm handler (to crash a replica at a chosen point).
	wrapHandler func(alarm.Handler) alarm.Handler
}

func (o Options) withDefaults() (Options, error) {
	var err error
	o.Core, err = o.Core.WithDefaults("reservations")
	return o, err
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
	return server.Build(ctx, o, Options.withDefaults, func(o Options, rdb redis.UniversalClient) (*Service, error) {
		q, err := alarm.New(rdb, alarm.Options{
			Prefix: o.Prefix, Namespace: "reservations", Shards: o.Shards, Lease: o.Lease,
			Now: o.Now, Logger: o.Logger, Metrics: o.Registerer,
		})
		if err != nil {
			return nil, err
		}
		st, err := store.New(rdb, store.Options{Queue: q})
		if err != nil {
			return nil, err
		}
		a := app.New(st, app.Options{Now: o.Now, Replay: o.Replay, Logger: o.Logger, AlarmLog: o.AlarmLog})
		srv, err := o.Listen("vigil.reservations.v1.ReservationService", rdb)
		if err != nil {
			return nil, err
		}
		rs := transport.NewServer(a, o.Logger)
		reservationsv1.RegisterReservationServiceServer(srv.GRPC(), rs)
		alarmadmin.Register(srv.GRPC(), q, rs.Lookup, o.Logger)
		var handler alarm.Handler = a
		if o.wrapHandler != nil {
			handler = o.wrapHandler(handler)
		}
		return &Service{rdb: rdb, q: q, srv: srv, handler: handler}, nil
	})
}

// Addr is where the gRPC server listens.
func (s *Service) Addr() net.Addr { return s.srv.Addr() }

// Serve serves gRPC and runs the alarm scheduler until ctx ends, then drains and closes the
// Redis connection.
func (s *Service) Serve(ctx context.Context) error {
	defer s.rdb.Close()
	return s.srv.Serve(ctx, func(ctx context.Context) error { return s.q.Run(ctx, s.handler) })
}
