// Package service assembles the lobby service: Redis store, use cases, gRPC server. main and
// tests start it the same way: New, then Serve.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/lobby/internal/app"
	"github.com/vigil-dev/vigil/services/lobby/internal/store"
	"github.com/vigil-dev/vigil/services/lobby/internal/transport"
)

// Options configure the service. Every zero value has the default given in its comment.
type Options struct {
	// GRPCAddr to listen on. Default "127.0.0.1:0" (a free port; Addr tells which).
	GRPCAddr string
	// MetricsAddr serves Prometheus metrics when set. Default "": none.
	MetricsAddr string
	// Redis to keep the lobby in. Required.
	Redis redisx.Config
	// Prefix starts every key (the lobby's keys are "<Prefix>:{lobby}:..."). Default "vigil".
	Prefix string
	// IdleTTL is the rooms' inactivity TTL; it must match the Room service's IdleTTL.
	// Default 1h.
	IdleTTL time.Duration
	// PruneGrace is how long past IdleTTL an untouched room stays listed, so the Room service's
	// own expiry (alarm lateness, retries of a failed removal) always goes first and listing
	// only clears ghosts. Default 5m.
	PruneGrace time.Duration
	// Logger for everything. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// DrainTimeout bounds the graceful stop. Default 10s.
	DrainTimeout time.Duration
	// Registerer takes the Lobby's metrics. Default prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// TLS secures the gRPC listener (mutual TLS when TLS.CAFile is set); main fills it from the
	// -tls-* flags (VIGIL_TLS_*). Default: plaintext.
	TLS server.TLS
	// MaxInFlight bounds the unary calls running at once (server.Options.MaxInFlight).
	// Default 1024; negative: no limit.
	MaxInFlight int
}

func (o Options) withDefaults() (Options, error) {
	if o.Redis.URL == "" && len(o.Redis.ClusterAddrs) == 0 {
		return o, errors.New("lobby: Options.Redis needs a URL or cluster addresses")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Prefix == "" {
		o.Prefix = "vigil"
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = time.Hour
	}
	if o.PruneGrace <= 0 {
		o.PruneGrace = 5 * time.Minute
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.DefaultRegisterer
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
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Redis.Metrics == nil {
		o.Redis.Metrics = o.Registerer
	}
	rdb, err := redisx.Open(ctx, o.Redis)
	if err != nil {
		return nil, fmt.Errorf("lobby: %w", err)
	}
	st, err := store.New(rdb, store.Options{Prefix: o.Prefix})
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("lobby: %w", err)
	}
	a := app.New(st, app.Options{Now: o.Now, IdleTTL: o.IdleTTL, PruneGrace: o.PruneGrace, Logger: o.Logger})
	updates, err := occupancyMetric(o.Registerer)
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("lobby: metrics: %w", err)
	}
	srv, err := server.New(server.Options{
		Name: "vigil.lobby.v1.LobbyService", GRPCAddr: o.GRPCAddr,
		MetricsAddr: o.MetricsAddr, Logger: o.Logger, DrainTimeout: o.DrainTimeout,
		ServerOptions: []grpc.ServerOption{grpc.ForceServerCodecV2(transport.Codec())},
		Store:         rdb, // health is NOT_SERVING while Redis does not answer
		Registerer:    o.Registerer,
		TLS:           o.TLS, MaxInFlight: o.MaxInFlight,
	})
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("lobby: %w", err)
	}
	lobbyv1.RegisterLobbyServiceServer(srv.GRPC(), countOccupancy(transport.NewServer(a, o.Logger), updates))
	return &Service{rdb: rdb, srv: srv}, nil
}

// Addr is the gRPC address the service listens on.
func (s *Service) Addr() net.Addr { return s.srv.Addr() }

// Serve answers calls until ctx ends, then drains and closes the Redis connection.
func (s *Service) Serve(ctx context.Context) error {
	defer s.rdb.Close()
	return s.srv.Serve(ctx)
}
