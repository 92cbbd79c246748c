package server

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

const (
	// DefaultReadinessInterval is Options.ReadinessInterval's default: a store that stops
	// answering shows as NOT_SERVING within about two seconds, and one that is back as SERVING
	// within one.
	DefaultReadinessInterval = time.Second
	// readinessFailures is how many pings in a row must fail before health turns NOT_SERVING,
	// so that one slow answer on a busy machine does not take a replica out of rotation.
	readinessFailures = 2
)

// PingStore is the readiness check of a service's Redis: PING on the one server, or on every
// master of a cluster (a master that is down means part of the keyspace is unreachable).
func PingStore(rdb redis.UniversalClient) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if c, ok := rdb.(*redis.ClusterClient); ok {
			return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				return m.Ping(ctx).Err()
			})
		}
		return rdb.Ping(ctx).Err()
	}
}

// watchReadiness runs check every interval until ctx ends and keeps the health status honest:
// NOT_SERVING after readinessFailures failed checks in a row, SERVING at the first check that
// passes. Each change is logged once. After the drain starts the health server ignores the
// updates (Shutdown wins), so a watcher never turns a draining server SERVING again.
func (s *Server) watchReadiness(ctx context.Context, check func(context.Context) error) error {
	tick := time.NewTicker(s.o.ReadinessInterval)
	defer tick.Stop()
	failures := 0
	ready := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(ctx, s.o.ReadinessInterval)
		err := check(cctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case err == nil && !ready:
			ready, failures = true, 0
			s.setServing(healthpb.HealthCheckResponse_SERVING)
			s.o.Logger.Info("store reachable again; serving", "event", "store_ready", "service", s.o.Name)
		case err == nil:
			failures = 0
		case ready:
			failures++
			if failures >= readinessFailures {
				ready = false
				s.setServing(healthpb.HealthCheckResponse_NOT_SERVING)
				s.o.Logger.Warn("store unreachable; health is NOT_SERVING until it answers", "event", "store_unready",
					"service", s.o.Name, "err", err.Error())
			}
		}
	}
}

// setServing sets the overall status and the service's own.
func (s *Server) setServing(st healthpb.HealthCheckResponse_ServingStatus) {
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(s.o.Name, st)
}
