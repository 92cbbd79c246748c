package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/devstore"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	chat "github.com/vigil-dev/vigil/services/chat/service"
	lobby "github.com/vigil-dev/vigil/services/lobby/service"
	locks "github.com/vigil-dev/vigil/services/locks/service"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
	room "github.com/vigil-dev/vigil/services/room/service"
)

// devService is one service the dev runner starts: run it, and where its address goes.
type devService struct {
	name string
	run  server.Run
	addr *string
}

// devOptions configure the dev runner; runDev fills them from flags, tests directly.
type devOptions struct {
	HTTPAddr string
	Store    devstore.Options
	// PortBase is the first gRPC port; 0 for any free ports.
	PortBase int
	Logger   *slog.Logger
	// Durability is every service's redisx.Config.Durability. Default async.
	Durability redisx.Durability
	// Now is every service's clock. Default time.Now.
	Now func() time.Time
	// Ready, when set, gets the gateway's address once it serves; default: print the banner.
	Ready func(gateway net.Addr)
}

// runDev runs every service and the gateway in this process, on the store devstore picks.
func runDev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("vigil dev", flag.ContinueOnError)
	httpAddr := config.String(fs, "addr", "VIGIL_HTTP_ADDR", "127.0.0.1:8080", "gateway HTTP listen address (loopback only)")
	redisURL := config.String(fs, "redis-url", "REDIS_URL", "", "Redis URL (redis://, rediss:// or redis+sentinel://); empty: a local redis-server child, else the embedded store")
	durability := config.String(fs, "redis-durability", "VIGIL_REDIS_DURABILITY", string(redisx.Async),
		"when a write counts as done: async, replica or fsync (docs/OPERATIONS.md, Durability)")
	dataDir := config.String(fs, "data", "VIGIL_DATA_DIR", ".data", "data directory of the redis-server child or the embedded store")
	storeKind := config.String(fs, "store", "VIGIL_DEV_STORE", "", "without -redis-url: redis-server or embedded; empty: redis-server when installed, else embedded")
	logFormat := config.String(fs, "log-format", "VIGIL_LOG_FORMAT", "text", "log format: json or text")
	logLevel := config.String(fs, "log-level", "VIGIL_LOG_LEVEL", "warn", "log level: debug, info, warn, error")
	portBase := config.Int(fs, "grpc-port-base", "VIGIL_GRPC_PORT_BASE", 7001,
		"first gRPC port: reservations, locks, chat, lobby, room listen on 127.0.0.1 from it up (the CLI's defaults); 0 for any free ports")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := errors.Join(config.Check(fs), config.LogSettings(*logFormat, *logLevel), config.RedisSettings(*durability, "", "")); err != nil {
		return err
	}
	log := config.Logger(*logFormat, *logLevel)
	return startDev(ctx, devOptions{
		HTTPAddr:   *httpAddr,
		Store:      devstore.Options{URL: *redisURL, DataDir: *dataDir, Kind: devstore.Kind(*storeKind), Logger: log},
		PortBase:   *portBase,
		Logger:     log,
		Durability: redisx.Durability(*durability),
	})
}

// startDev runs the services and the gateway until ctx ends, then stops the store it started.
func startDev(ctx context.Context, o devOptions) (err error) {
	// The dev mode is open (no API keys, no TLS): it is for the machine it runs on only.
	if !server.Loopback(o.HTTPAddr) {
		return fmt.Errorf("-addr %s: vigil dev runs open (no API keys, no TLS) and listens on loopback only (127.0.0.1:<port>); "+
			"for a deployment others can reach, run make compose-up (docs/SECURITY.md)", o.HTTPAddr)
	}
	log := o.Logger
	if o.Now == nil {
		o.Now = time.Now
	}
	store, err := devstore.Open(ctx, o.Store)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("store: %w", cerr))
		}
	}()
	rc := redisx.Config{URL: store.URL, Durability: o.Durability}

	// addr is where the i-th service listens: the CLI's default address, or any free port.
	addr := func(i int) string {
		if o.PortBase <= 0 {
			return "127.0.0.1:0"
		}
		return fmt.Sprintf("127.0.0.1:%d", o.PortBase+i)
	}
	core := func(port int, name string) server.Core {
		return server.Core{GRPCAddr: addr(port), Redis: rc, Now: o.Now, Logger: log.With("service", name)}
	}
	// Each service's options are made when it starts: the room's name the lobby's address.
	var b gateway.Backends
	services := []devService{
		{"reservations", server.RunOf(reservations.New, func() reservations.Options { return reservations.Options{Core: core(0, "reservations"), Replay: true} }), &b.Reservations},
		{"locks", server.RunOf(locks.New, func() locks.Options { return locks.Options{Core: core(1, "locks")} }), &b.Locks},
		{"chat", server.RunOf(chat.New, func() chat.Options { return chat.Options{Core: core(2, "chat")} }), &b.Chat},
		// The lobby starts before the room: the room dials it.
		{"lobby", server.RunOf(lobby.New, func() lobby.Options { return lobby.Options{Core: core(3, "lobby")} }), &b.Lobby},
		{"room", server.RunOf(room.New, func() room.Options { return room.Options{Core: core(4, "room"), LobbyAddr: b.Lobby} }), &b.Room},
	}

	g, ctx := errgroup.WithContext(ctx)
	for _, s := range services {
		up := make(chan string, 1)
		g.Go(func() error {
			if err := s.run(ctx, func(a net.Addr) { up <- a.String() }); err != nil {
				if strings.HasPrefix(err.Error(), s.name+": ") {
					return err // a service's start errors name it already
				}
				return fmt.Errorf("%s: %w", s.name, err)
			}
			return nil
		})
		select {
		case *s.addr = <-up:
		case <-ctx.Done():
			return g.Wait()
		}
	}
	ready := o.Ready
	if ready == nil {
		ready = func(a net.Addr) { printBanner(a, store, services) }
	}
	g.Go(func() error {
		return gateway.Run(ctx, gateway.Options{Addr: o.HTTPAddr, Backends: b, Logger: log.With("service", "gateway")}, ready)
	})
	return g.Wait()
}

func printBanner(gw net.Addr, store *devstore.Store, services []devService) {
	fmt.Printf("Vigil is running.\n  gateway  http://%s  (REST, WebSocket, /healthz, /openapi.json, /ui/)\n", gw)
	for _, s := range services {
		fmt.Printf("  %-12s gRPC %s\n", s.name, *s.addr)
	}
	fmt.Printf("  store    %s (%s)\nPress Ctrl-C to stop.\n", store.Kind, store.Detail)
	slog.Debug("dev runner ready")
}
