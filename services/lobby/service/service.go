// Package service assembles the lobby service: Redis store, use cases, gRPC server. main and
// tests start it the same way: New, then Serve.
package service

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/lobby/internal/app"
	"github.com/vigil-dev/vigil/services/lobby/internal/store"
	"github.com/vigil-dev/vigil/services/lobby/internal/transport"
)

// Options configure the service. Every zero value has the default given in its comment.
type Options struct {
	// Core is what every service shares: addresses, Redis (to keep the lobby in; required),
	// prefix (the lobby's keys are "<Prefix>:{lobby}:..."), logger, Registerer (the Lobby's,
	// Redis's and gRPC metrics), TLS, limits and clock.
	server.Core
	// IdleTTL is the rooms' inactivity TTL; it must match the Room service's IdleTTL.
	// Default 1h.
	IdleTTL time.Duration
	// PruneGrace is how long past IdleTTL an untouched room stays listed, so the Room service's
	// own expiry (alarm lateness, retries of a failed removal) always goes first and listing
	// only clears ghosts. Default 5m.
	PruneGrace time.Duration
}

func (o Options) withDefaults() (Options, error) {
	var err error
	if o.Core, err = o.Core.WithDefaults("lobby"); err != nil {
		return o, err
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = time.Hour
	}
	if o.PruneGrace <= 0 {
		o.PruneGrace = 5 * time.Minute
	}
	return o, nil
}

// Service is a Lobby replica listening on its gRPC address, ready to Serve.
type Service struct {
	rdb redis.UniversalClient
	srv *server.Server
}

// New connects to Redis, builds the service and listens; calls are answered once Serve runs.
func New(ctx context.Context, o Options) (*Service, error) {
	return server.Build(ctx, o, Options.withDefaults, func(o Options, rdb redis.UniversalClient) (*Service, error) {
		st, err := store.New(rdb, store.Options{Prefix: o.Prefix})
		if err != nil {
			return nil, fmt.Errorf("lobby: %w", err)
		}
		a := app.New(st, app.Options{Now: o.Now, IdleTTL: o.IdleTTL, PruneGrace: o.PruneGrace, Logger: o.Logger})
		updates, err := occupancyMetric(o.Registerer)
		if err != nil {
			return nil, fmt.Errorf("lobby: metrics: %w", err)
		}
		srv, err := o.Listen("vigil.lobby.v1.LobbyService", rdb)
		if err != nil {
			return nil, err
		}
		lobbyv1.RegisterLobbyServiceServer(srv.GRPC(), countOccupancy(transport.NewServer(a, o.Logger), updates))
		return &Service{rdb: rdb, srv: srv}, nil
	})
}

// Addr is the gRPC address the service listens on.
func (s *Service) Addr() net.Addr { return s.srv.Addr() }

// Serve answers calls until ctx ends, then drains and closes the Redis connection.
func (s *Service) Serve(ctx context.Context) error {
	defer s.rdb.Close()
	return s.srv.Serve(ctx)
}
