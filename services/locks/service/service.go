// Package service composes the lock service: Redis, the alarm queue of the "locks" namespace,
// the store, the use cases (internal/app) and the gRPC transport. main, tests and benchmarks
// start it the same way: New, then Serve.
package service

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/locks/internal/app"
	"github.com/vigil-dev/vigil/services/locks/internal/store"
	"github.com/vigil-dev/vigil/services/locks/internal/transport"
)

// Namespace is the alarm namespace (and hash tag prefix) of the lock service's keys.
const Namespace = "locks"

// Options configure the lock service. Every zero value has the default given in its comment;
// defaults are applied in one place, Options.withDefaults.
type Options struct {
	// Core is what every service shares: addresses, Redis (which holds the locks; required),
	// prefix, logger, Registerer (every lock, alarm, Redis and gRPC metric), TLS, limits and
	// the clock of lease ends, waiter deadlines and alarms.
	server.Core
	// Shards of the lock keyspace; fixed per deployment (fencing counters are per shard).
	// Default 16.
	Shards int
	// AlarmLease is how long a claimed expiry alarm stays invisible before it fires again.
	// Default 15s.
	AlarmLease time.Duration
	// AlarmMaxSleep caps a scheduler's sleep when no alarm is due sooner. Default 2s.
	AlarmMaxSleep time.Duration
	// Replica names this process's grant channel for waiting calls. Default: random.
	Replica string
	// MaxWaiting bounds the acquires waiting at once in this replica; beyond it a waiting
	// acquire of a held lock gets RESOURCE_EXHAUSTED. Waiting unary calls count against the
	// server's in-flight limit (1024 by default), so this keeps room for releases. Default 512.
	MaxWaiting int
	// MaxWaitersPerLock is how many calls may queue for one lock, across replicas; one more
	// gets acquired false at once. Default 1000; negative: no limit.
	MaxWaitersPerLock int
}

func (o Options) withDefaults() (Options, error) {
	var err error
	if o.Core, err = o.Core.WithDefaults("locks"); err != nil {
		return o, err
	}
	if o.AlarmMaxSleep <= 0 {
		o.AlarmMaxSleep = 2 * time.Second
	}
	return o, nil
}

// Service is a lock service listening on its gRPC address, ready to Serve.
type Service struct {
	rdb redis.UniversalClient
	q   *alarm.Queue
	st  *store.Store
	app *app.App
	srv *server.Server
}

// New connects to Redis, builds the service and listens; calls are answered once Serve runs.
func New(ctx context.Context, o Options) (*Service, error) {
	return server.Build(ctx, o, Options.withDefaults, func(o Options, rdb redis.UniversalClient) (*Service, error) {
		return build(ctx, rdb, o)
	})
}

func build(ctx context.Context, rdb redis.UniversalClient, o Options) (*Service, error) {
	q, err := alarm.New(rdb, alarm.Options{
		Prefix:    o.Prefix,
		Namespace: Namespace,
		Shards:    o.Shards,
		Lease:     o.AlarmLease,
		MaxSleep:  o.AlarmMaxSleep,
		Now:       o.Now,
		Logger:    o.Logger,
		Metrics:   o.Registerer,
	})
	if err != nil {
		return nil, fmt.Errorf("locks: %w", err)
	}
	st, err := store.New(rdb, store.Options{
		Alarms:            q,
		Prefix:            o.Prefix,
		Replica:           o.Replica,
		Now:               o.Now,
		WakeWithin:        o.AlarmMaxSleep,
		Logger:            o.Logger,
		MaxWaiting:        o.MaxWaiting,
		MaxWaitersPerLock: o.MaxWaitersPerLock,
	})
	if err != nil {
		return nil, fmt.Errorf("locks: %w", err)
	}
	if err := st.Subscribe(ctx); err != nil {
		return nil, fmt.Errorf("locks: %w", err)
	}
	srv, err := o.Listen("vigil.locks.v1.LockService", rdb)
	if err != nil {
		return nil, err
	}
	m := app.NewMetrics(o.Registerer)
	a := app.New(st, app.Options{Logger: o.Logger, Now: o.Now, Metrics: m})
	ls := transport.NewServer(a, o.Logger, srv.Stopping(), m)
	locksv1.RegisterLockServiceServer(srv.GRPC(), ls)
	alarmadmin.Register(srv.GRPC(), q, lockLookup(ls), o.Logger)
	return &Service{rdb: rdb, q: q, st: st, app: a, srv: srv}, nil
}

// Addr is the gRPC address the service listens on.
func (s *Service) Addr() net.Addr { return s.srv.Addr() }

// Serve answers calls and runs the expiry scheduler until ctx ends, then drains: open
// sessions end, waiting calls leave their queues, and the Redis connection closes.
func (s *Service) Serve(ctx context.Context) error {
	defer s.rdb.Close()
	return s.srv.Serve(ctx, s.st.Listen, func(ctx context.Context) error { return s.q.Run(ctx, s.app) })
}
