// Package service assembles the room service: Redis store, alarm queue and scheduler, the
// replica's session hub, the link to the Lobby, and the gRPC server. main and tests start it
// the same way: New, then Serve.
package service

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/room/internal/app"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
	"github.com/vigil-dev/vigil/services/room/internal/lobbylink"
	"github.com/vigil-dev/vigil/services/room/internal/store"
	"github.com/vigil-dev/vigil/services/room/internal/transport"
)

// Options configure the service. Every zero value has the default given in its comment.
type Options struct {
	// Core is what every service shares: addresses, Redis (to keep rooms in; required), prefix
	// (of every key and pub/sub channel), logger, Registerer (gRPC server, alarm queue, Redis
	// scripts), TLS, limits and clock.
	server.Core
	// Shards of the rooms' alarm queue; fixed per deployment. Default 16.
	Shards int
	// LobbyAddr is the Lobby service's gRPC address. Required.
	LobbyAddr string
	// LobbyDialOptions for the Lobby connection. Default: mutual TLS with TLS (this service's
	// certificate, verifying the Lobby with its CA) when it is set, else plaintext.
	LobbyDialOptions []grpc.DialOption
	// IdleTTL: a room with no leader action for this long expires. It must match the Lobby's
	// IdleTTL. Default 1h.
	IdleTTL time.Duration
	// SessionLease: a session not renewed for this long (its replica died) stops counting.
	// Replicas renew every third of it. Default 15s.
	SessionLease time.Duration
	// AlarmLease of a claimed alarm before it fires again. Default 15s.
	AlarmLease time.Duration
	// AlarmRetryBase is the first backoff of a failed alarm (a Lobby removal that failed, say);
	// each retry doubles it. Default 2s.
	AlarmRetryBase time.Duration
	// AlarmMaxRetries before an alarm is dead-lettered. Default 6.
	AlarmMaxRetries int
	// SessionBuffer is how many events a session may fall behind before it is closed.
	// Default 256.
	SessionBuffer int
}

func (o Options) withDefaults() (Options, error) {
	if o.LobbyAddr == "" {
		return o, errors.New("room: Options.LobbyAddr is required")
	}
	var err error
	if o.Core, err = o.Core.WithDefaults("room"); err != nil {
		return o, err
	}
	if o.IdleTTL <= 0 {
		o.IdleTTL = time.Hour
	}
	if o.SessionLease <= 0 {
		o.SessionLease = 15 * time.Second
	}
	if o.SessionBuffer <= 0 {
		o.SessionBuffer = 256
	}
	if len(o.LobbyDialOptions) == 0 {
		cred, err := o.TLS.DialOption()
		if err != nil {
			return o, fmt.Errorf("room: lobby TLS: %w", err)
		}
		o.LobbyDialOptions = []grpc.DialOption{cred}
	}
	return o, nil
}

// Service is a room replica listening on its gRPC address, ready to Serve.
type Service struct {
	rdb    redis.UniversalClient
	conn   *grpc.ClientConn
	q      *alarm.Queue
	hub    *hub.Hub
	link   *lobbylink.Link
	app    *app.App
	srv    *server.Server
	bg     context.Context
	stopBg context.CancelFunc
}

// New connects to Redis and the Lobby, builds the replica and listens; calls are answered
// once Serve runs.
func New(ctx context.Context, o Options) (*Service, error) {
	return server.Build(ctx, o, Options.withDefaults, func(o Options, rdb redis.UniversalClient) (*Service, error) {
		q, err := alarm.New(rdb, alarm.Options{
			Prefix: o.Prefix, Namespace: "room", Shards: o.Shards, Lease: o.AlarmLease,
			RetryBase: o.AlarmRetryBase, MaxRetries: o.AlarmMaxRetries, Now: o.Now, Logger: o.Logger, Metrics: o.Registerer,
		})
		if err != nil {
			return nil, fmt.Errorf("room: %w", err)
		}
		conn, err := grpcdial.New(o.LobbyAddr, o.LobbyDialOptions...) // keepalive, round robin over the Lobby's replicas
		if err != nil {
			return nil, fmt.Errorf("room: dial lobby: %w", err)
		}
		lobby := lobbyv1.NewLobbyServiceClient(conn)
		st, err := store.New(rdb, store.Options{Alarms: q, Prefix: o.Prefix, IdleTTL: o.IdleTTL})
		if err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("room: %w", err)
		}
		// The hub and the link outlive the server's drain: sessions closing during it still
		// leave the count and tell the Lobby.
		bg, stopBg := context.WithCancel(context.Background())
		h := hub.New(st.Feed(bg, o.Logger), o.SessionBuffer, transport.DecodeFrame, o.Logger)
		link := lobbylink.New(bg, lobby, st.Occupancy, o.Logger)
		a := app.New(st, h, link, lobbylink.NewClient(lobby), transport.Codec{}, app.Options{IdleTTL: o.IdleTTL, SessionLease: o.SessionLease, Now: o.Now, Logger: o.Logger})
		srv, err := o.Listen("vigil.room.v1.RoomService", rdb)
		if err != nil {
			stopBg()
			_ = conn.Close()
			return nil, err
		}
		roomv1.RegisterRoomServiceServer(srv.GRPC(), transport.NewServer(a, o.Logger, srv.Stopping()))
		alarmadmin.Register(srv.GRPC(), q, roomLookup(lobby), o.Logger)
		return &Service{rdb: rdb, conn: conn, q: q, hub: h, link: link, app: a, srv: srv, bg: bg, stopBg: stopBg}, nil
	})
}

// Addr is the gRPC address the service listens on.
func (s *Service) Addr() net.Addr { return s.srv.Addr() }

// Serve answers calls, runs the rooms' alarms and renews this replica's session leases until
// ctx ends, then drains: open Join streams end with UNAVAILABLE and their sessions stay open
// under their leases (their callers re-attach on another replica), and the connections close.
func (s *Service) Serve(ctx context.Context) error {
	defer s.rdb.Close()
	defer s.conn.Close()
	defer s.stopBg()
	var g errgroup.Group
	g.Go(func() error { return s.hub.Run(s.bg) })
	err := s.srv.Serve(ctx,
		func(ctx context.Context) error { return s.q.Run(ctx, alarm.HandlerFunc(s.app.HandleAlarm)) },
		s.app.RenewLeases,
	)
	s.link.Wait()
	s.stopBg()
	_ = g.Wait()
	return err
}
