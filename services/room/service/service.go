// Package service assembles the room service: Redis store, alarm queue and scheduler, the
// replica's session hub, the link to the Lobby, and the gRPC server. main and tests start it
// the same way, through Run.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/room/internal/app"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
	"github.com/vigil-dev/vigil/services/room/internal/lobbylink"
	"github.com/vigil-dev/vigil/services/room/internal/store"
	"github.com/vigil-dev/vigil/services/room/internal/transport"
)

// Options configure the service. Every zero value has the default given in its comment.
type Options struct {
	// GRPCAddr to listen on. Default "127.0.0.1:0" (a free port; see Run's ready callback).
	GRPCAddr string
	// MetricsAddr serves Prometheus metrics when set. Default "": none.
	MetricsAddr string
	// Redis to keep rooms in. Required.
	Redis redisx.Config
	// Prefix starts every key and pub/sub channel. Default "vigil".
	Prefix string
	// Shards of the rooms' alarm queue; fixed per deployment. Default 16.
	Shards int
	// LobbyAddr is the Lobby service's gRPC address. Required.
	LobbyAddr string
	// LobbyDialOptions for the Lobby connection. Default: TLS from the VIGIL_TLS_* environment
	// (server.TLSFromEnv: mutual TLS with the deployment's certificate), else plaintext.
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
	// Logger for everything. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// DrainTimeout bounds the graceful stop. Default 10s.
	DrainTimeout time.Duration
}

// Run serves the room service until ctx ends. ready, when not nil, receives the gRPC address
// once the server listens.
func Run(ctx context.Context, o Options, ready func(net.Addr)) error {
	if o.LobbyAddr == "" {
		return errors.New("room: LobbyAddr is required")
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
	if o.SessionLease <= 0 {
		o.SessionLease = 15 * time.Second
	}
	if o.SessionBuffer <= 0 {
		o.SessionBuffer = 256
	}
	if len(o.LobbyDialOptions) == 0 {
		cred, err := server.TLSFromEnv().DialOption()
		if err != nil {
			return fmt.Errorf("room: lobby TLS: %w", err)
		}
		o.LobbyDialOptions = []grpc.DialOption{cred}
	}
	rdb, err := redisx.Open(ctx, o.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	q, err := alarm.New(rdb, alarm.Options{
		Prefix: o.Prefix, Namespace: "room", Shards: o.Shards, Lease: o.AlarmLease,
		RetryBase: o.AlarmRetryBase, MaxRetries: o.AlarmMaxRetries, Now: o.Now, Logger: o.Logger,
	})
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(o.LobbyAddr, o.LobbyDialOptions...)
	if err != nil {
		return fmt.Errorf("room: dial lobby: %w", err)
	}
	defer conn.Close()
	lobby := lobbyv1.NewLobbyServiceClient(conn)

	st := store.New(rdb, q, o.Prefix, o.IdleTTL)
	// The hub and the link outlive the server's drain: sessions closing during it still
	// leave the count and tell the Lobby.
	bg, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	h := hub.New(bg, rdb, st.Channel, o.SessionBuffer, transport.DecodeFrame, o.Logger)
	link := lobbylink.New(bg, lobby, st.Occupancy, o.Logger)
	a := app.New(st, h, link, lobby, rdb, app.Config{IdleTTL: o.IdleTTL, SessionLease: o.SessionLease, Now: o.Now, Log: o.Logger})

	srv, err := server.New(server.Options{
		Name: "vigil.room.v1.RoomService", GRPCAddr: o.GRPCAddr,
		MetricsAddr: o.MetricsAddr, Logger: o.Logger, DrainTimeout: o.DrainTimeout,
		Store: rdb, // health is NOT_SERVING while Redis does not answer
	})
	if err != nil {
		return fmt.Errorf("room: %w", err)
	}
	roomv1.RegisterRoomServiceServer(srv.GRPC(), transport.NewServer(a, ctx.Done(), o.Logger))
	alarmadmin.Register(srv.GRPC(), q, roomLookup(lobby), o.Logger)
	var g errgroup.Group
	g.Go(func() error { return h.Run(bg) })
	if ready != nil {
		ready(srv.Addr())
	}
	err = srv.Serve(ctx,
		func(ctx context.Context) error { return q.Run(ctx, alarm.HandlerFunc(a.HandleAlarm)) },
		a.RenewLeases,
	)
	link.Wait()
	stopBg()
	_ = g.Wait()
	return err
}
