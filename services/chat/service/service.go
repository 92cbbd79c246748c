// Package service assembles the chat service: Redis store and live feed, gRPC server. main and
// tests start it the same way, through Run.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/chat/internal/app"
	"github.com/vigil-dev/vigil/services/chat/internal/store"
	"github.com/vigil-dev/vigil/services/chat/internal/transport"
)

// Options configure the service. Every zero value has the default given in its comment.
type Options struct {
	// GRPCAddr to listen on. Default "127.0.0.1:0" (a free port; see Run's ready callback).
	GRPCAddr string
	// MetricsAddr serves Prometheus metrics when set. Default "": none.
	MetricsAddr string
	// Redis to keep rooms in. Required. Turn AOF on for history to survive a Redis restart.
	Redis redisx.Config
	// Prefix starts every key. Default "vigil".
	Prefix string
	// HistoryKeep is how many messages each room keeps. Default 1000.
	HistoryKeep int
	// HistoryOnJoin is how many of the last messages a new member gets, and the default page
	// of ListMessages. Default 50.
	HistoryOnJoin int
	// PostIDTTL is how long a post's idempotency key is remembered. Default 1m.
	PostIDTTL time.Duration
	// StreamBuffer is how many messages a Connect stream may fall behind before it is cut
	// (RESOURCE_EXHAUSTED; the gateway resumes it). Default 1024.
	StreamBuffer int
	// Logger for everything. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// DrainTimeout bounds the graceful stop. Default 10s.
	DrainTimeout time.Duration
}

// Run serves the chat service until ctx ends. ready, when not nil, receives the gRPC address
// once the server listens. When ctx ends, open Connect streams end at once with UNAVAILABLE
// (their clients resume on another replica) and unary calls drain.
func Run(ctx context.Context, o Options, ready func(net.Addr)) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HistoryOnJoin <= 0 {
		o.HistoryOnJoin = 50
	}
	rdb, err := redisx.Open(ctx, o.Redis)
	if err != nil {
		return err
	}
	defer rdb.Close()
	st := store.New(rdb, store.Options{Prefix: o.Prefix, Keep: o.HistoryKeep, PostIDTTL: o.PostIDTTL})
	if o.HistoryOnJoin > st.Keep() {
		o.HistoryOnJoin = st.Keep()
	}
	feed := store.NewFeed(st, o.StreamBuffer, o.Logger)
	a := app.New(st, feed, o.Now, o.HistoryOnJoin, o.Logger)
	srv, err := server.New(server.Options{
		Name: "vigil.chat.v1.ChatService", GRPCAddr: o.GRPCAddr,
		MetricsAddr: o.MetricsAddr, Logger: o.Logger, DrainTimeout: o.DrainTimeout,
		Store: rdb, // health is NOT_SERVING while Redis does not answer
	})
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	chatv1.RegisterChatServiceServer(srv.GRPC(), transport.NewServer(a, o.Logger, ctx))
	if ready != nil {
		ready(srv.Addr())
	}
	return srv.Serve(ctx, feed.Run)
}
