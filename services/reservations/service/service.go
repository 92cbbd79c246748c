// Package service assembles the reservations service: Redis store, alarm queue and scheduler,
// gRPC server. main and tests start it the same way, through Run.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/reservations/internal/app"
	"github.com/vigil-dev/vigil/services/reservations/internal/store"
	"github.com/vigil-dev/vigil/services/reservations/internal/transport"
)

// Options configure the service. Every zero value has the default given in its comment.
type Options struct {
	// GRPCAddr to listen on. Default "127.0.0.1:0" (a free port; see Run's ready callback).
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
	// Logger for everything. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// DrainTimeout bounds the graceful stop. Default 10s.
	DrainTimeout time.Duration

	// wrapHandler, set only by this package's tests, stands between the scheduler and the
	// alarm handler (to crash a replica at a chosen point).
	wrapHandler func(alarm.Handler) alarm.Handler
}

// Run serves the reservations service until ctx ends. ready, when not nil, receives the gRPC
// address once the server listens.
func Run(ctx context.Context, o Options, ready func(net.Addr)) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	rdb, err := redisx.Open(ctx, o.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	q, err := alarm.New(rdb, alarm.Options{
		Prefix: o.Prefix, Namespace: "reservations", Shards: o.Shards, Lease: o.Lease,
		Now: o.Now, Logger: o.Logger,
	})
	if err != nil {
		return err
	}
	a := app.New(store.New(rdb, q), o.Now, o.Replay, o.Logger)
	srv, err := server.New(server.Options{
		Name: "vigil.reservations.v1.ReservationService", GRPCAddr: o.GRPCAddr,
		MetricsAddr: o.MetricsAddr, Logger: o.Logger, DrainTimeout: o.DrainTimeout,
		Store: rdb, // health is NOT_SERVING while Redis does not answer
	})
	if err != nil {
		return fmt.Errorf("reservations: %w", err)
	}
	rs := transport.NewServer(a, o.Logger)
	reservationsv1.RegisterReservationServiceServer(srv.GRPC(), rs)
	alarmadmin.Register(srv.GRPC(), q, rs.Lookup, o.Logger)
	if ready != nil {
		ready(srv.Addr())
	}
	var handler alarm.Handler = a
	if o.wrapHandler != nil {
		handler = o.wrapHandler(handler)
	}
	return srv.Serve(ctx, func(ctx context.Context) error { return q.Run(ctx, handler) })
}
