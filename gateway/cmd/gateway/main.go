// Command gateway runs Vigil's edge: REST and WebSocket in front of the domain services' gRPC.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/server"
)

func main() {
	fs := flag.NewFlagSet("gateway", flag.ExitOnError)
	addr := config.String(fs, "addr", "VIGIL_HTTP_ADDR", ":8080", "HTTP listen address")
	metricsAddr := config.String(fs, "metrics-addr", "VIGIL_METRICS_ADDR", ":9090",
		"Prometheus /metrics listen address, for operators only: never publish it (the public port has no /metrics)")
	reservations := config.String(fs, "reservations-addr", "VIGIL_RESERVATIONS_ADDR", "", "reservations service gRPC address; empty: not served")
	locks := config.String(fs, "locks-addr", "VIGIL_LOCKS_ADDR", "", "locks service gRPC address; empty: not served")
	chat := config.String(fs, "chat-addr", "VIGIL_CHAT_ADDR", "", "chat service gRPC address; empty: not served")
	lobby := config.String(fs, "lobby-addr", "VIGIL_LOBBY_ADDR", "", "lobby service gRPC address; empty: not served")
	room := config.String(fs, "room-addr", "VIGIL_ROOM_ADDR", "", "room service gRPC address; empty: not served")
	maxBody := config.Int(fs, "max-body-bytes", "VIGIL_MAX_BODY_BYTES", 64<<10, "largest request body accepted (413 above)")
	drain := config.Duration(fs, "drain-timeout", "VIGIL_DRAIN_TIMEOUT", 10*time.Second, "graceful shutdown deadline")
	logFormat := config.String(fs, "log-format", "VIGIL_LOG_FORMAT", "json", "log format: json or text")
	logLevel := config.String(fs, "log-level", "VIGIL_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	limits := gateway.Flags(fs)
	_ = fs.Parse(os.Args[1:])
	err := config.Check(fs)
	if err == nil {
		err = config.LogSettings(*logFormat, *logLevel)
	}
	o := gateway.Options{
		Addr: *addr,
		Backends: gateway.Backends{
			Reservations: *reservations,
			Locks:        *locks,
			Chat:         *chat,
			Lobby:        *lobby,
			Room:         *room,
		},
		MaxBodyBytes: int64(*maxBody),
		DrainTimeout: *drain,
		MetricsAddr:  *metricsAddr,
	}
	err = errors.Join(err, limits(&o))
	sec := o.Security
	if err == nil && *metricsAddr == "" {
		err = errors.New("metrics-addr (VIGIL_METRICS_ADDR) is empty: give /metrics an operator-only address such as :9090")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(2)
	}
	log := config.Logger(*logFormat, *logLevel)
	if !server.Loopback(*addr) && (len(sec.Keys) == 0 || !sec.TLS.Enabled()) {
		log.Warn("INSECURE: the gateway listens on "+*addr+" without API keys or without HTTPS: anyone who reaches it may call every route; "+
			"set VIGIL_API_KEYS_FILE, VIGIL_REQUIRE_AUTH and VIGIL_GATEWAY_TLS_CERT/KEY (docs/SECURITY.md)",
			"event", "insecure", "service", "gateway", "apiKeys", len(sec.Keys) > 0, "https", sec.TLS.Enabled())
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.Logger = log
	err = gateway.Run(ctx, o, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}
