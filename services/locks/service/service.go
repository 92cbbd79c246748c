// Package service composes the lock service: Redis, the alarm queue of the "locks"
// namespace, the store, and the gRPC server. main and tests start it the same way, with Run.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/locks/internal/store"
	"github.com/vigil-dev/vigil/services/locks/internal/transport"
)

// Namespace is the alarm namespace (and hash tag prefix) of the lock service's keys.
const Namespace = "locks"

// Options configure the lock service. Every zero value has the default given in its comment.
type Options struct {
	// GRPCAddr to listen on. Default "127.0.0.1:0" (any free port; ready gets the address).
	GRPCAddr string
	// MetricsAddr serves Prometheus /metrics when set. Default "": none.
	MetricsAddr string
	// Redis says which Redis holds the locks. Required.
	Redis redisx.Config
	// Prefix starts every key; distinct services sharing one Redis need distinct prefixes.
	// Default "vigil".
	Prefix string
	// Shards of the lock keyspace; fixed per deployment (fencing counters are per shard).
	// Default 16.
	Shards int
	// Logger for lifecycle, request and alarm events. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for lease ends, waiter deadlines and alarms. Default time.Now.
	Now func() time.Time
	// AlarmLease is how long a claimed expiry alarm stays invisible before it fires again.
	// Default 15s.
	AlarmLease time.Duration
	// AlarmMaxSleep caps a scheduler's sleep when no alarm is due sooner. Default 2s.
	AlarmMaxSleep time.Duration
	// Replica names this process's grant channel for waiting calls. Default: random.
	Replica string
	// DrainTimeout bounds the graceful stop. Default 10s.
	DrainTimeout time.Duration
	// MaxWaiting bounds the acquires waiting at once in this replica; beyond it a waiting
	// acquire of a held lock gets RESOURCE_EXHAUSTED. Waiting calls count against the server's
	// in-flight limit (1024 by default), so this keeps room for releases. Default 512.
	MaxWaiting int
	// MaxWaitersPerLock is how many calls may queue for one lock, across replicas; one more
	// gets acquired false at once. Default 1000; negative: no limit.
	MaxWaitersPerLock int
}

// Run serves LockService until ctx ends, then drains. ready, when not nil, gets the gRPC
// address once the server accepts calls.
func Run(ctx context.Context, o Options, ready func(net.Addr)) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Prefix == "" {
		o.Prefix = "vigil"
	}
	if o.AlarmMaxSleep <= 0 {
		o.AlarmMaxSleep = 2 * time.Second
	}
	if o.Redis.URL == "" && len(o.Redis.ClusterAddrs) == 0 {
		return errors.New("locks: Options.Redis needs a URL or cluster addresses")
	}
	rdb, err := redisx.Open(ctx, o.Redis)
	if err != nil {
		return fmt.Errorf("locks: %w", err)
	}
	defer rdb.Close()

	q, err := alarm.New(rdb, alarm.Options{
		Prefix:    o.Prefix,
		Namespace: Namespace,
		Shards:    o.Shards,
		Lease:     o.AlarmLease,
		MaxSleep:  o.AlarmMaxSleep,
		Now:       o.Now,
		Logger:    o.Logger,
	})
	if err != nil {
		return fmt.Errorf("locks: %w", err)
	}
	st := store.New(rdb, q, store.Options{
		Prefix:            o.Prefix,
		Replica:           o.Replica,
		Now:               o.Now,
		WakeWithin:        o.AlarmMaxSleep,
		Logger:            o.Logger,
		MaxWaiting:        o.MaxWaiting,
		MaxWaitersPerLock: o.MaxWaitersPerLock,
	})
	if err := st.Subscribe(ctx); err != nil {
		return fmt.Errorf("locks: %w", err)
	}

	srv, err := server.New(server.Options{
		Name:         "vigil.locks.v1.LockService",
		GRPCAddr:     o.GRPCAddr,
		MetricsAddr:  o.MetricsAddr,
		Logger:       o.Logger,
		DrainTimeout: o.DrainTimeout,
	})
	if err != nil {
		return fmt.Errorf("locks: %w", err)
	}
	ls := transport.New(observeLocks(st), o.Logger)
	locksv1.RegisterLockServiceServer(srv.GRPC(), ls)
	alarmadmin.Register(srv.GRPC(), q, lockLookup(ls), o.Logger)
	if ready != nil {
		ready(srv.Addr())
	}
	return srv.Serve(ctx,
		st.Listen,
		func(ctx context.Context) error { return q.Run(ctx, st) },
	)
}
