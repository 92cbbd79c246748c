// Package service assembles the chat service: Redis store and live feed, gRPC server. main and
// tests start it the same way: New, then Serve.
package service

import (
	"context"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/chat/internal/app"
	"github.com/vigil-dev/vigil/services/chat/internal/store"
	"github.com/vigil-dev/vigil/services/chat/internal/transport"
)

// Options configure the service. Every zero value has the default given in its comment.
type Options struct {
	// Core is what every service shares: addresses, Redis (to keep rooms in; required, with
	// AOF on for history to survive a Redis restart), prefix, logger, Registerer (Redis and
	// gRPC metrics), TLS, limits and the clock that stamps messages.
	server.Core
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
	// PresenceLease is how long a session entered on a Connect stream stays present without a
	// renewal; the replica holding the stream renews it every third of it, so a session whose
	// gateway died leaves this long after its last renewal. Default 15s.
	PresenceLease time.Duration
}

func (o Options) withDefaults() (Options, error) {
	var err error
	if o.Core, err = o.Core.WithDefaults("chat"); err != nil {
		return o, err
	}
	if o.HistoryOnJoin <= 0 {
		o.HistoryOnJoin = 50
	}
	if o.PresenceLease <= 0 {
		o.PresenceLease = 15 * time.Second
	}
	return o, nil
}

// Service is a chat service listening on its gRPC address, ready to Serve.
type Service struct {
	rdb  redis.UniversalClient
	feed *store.Feed
	srv  *server.Server
}

// New connects to Redis, builds the service and listens; calls are answered once Serve runs.
func New(ctx context.Context, o Options) (*Service, error) {
	return server.Build(ctx, o, Options.withDefaults, func(o Options, rdb redis.UniversalClient) (*Service, error) {
		st := store.New(rdb, store.Options{Prefix: o.Prefix, Keep: o.HistoryKeep, PostIDTTL: o.PostIDTTL})
		if o.HistoryOnJoin > st.Keep() {
			o.HistoryOnJoin = st.Keep()
		}
		feed := store.NewFeed(st, o.StreamBuffer, o.Logger)
		a := app.New(st, feed, app.Options{Now: o.Now, JoinLimit: o.HistoryOnJoin, Lease: o.PresenceLease, Logger: o.Logger})
		srv, err := o.Listen("vigil.chat.v1.ChatService", rdb)
		if err != nil {
			return nil, err
		}
		chatv1.RegisterChatServiceServer(srv.GRPC(), transport.NewServer(a, o.Logger, srv.Stopping()))
		return &Service{rdb: rdb, feed: feed, srv: srv}, nil
	})
}

// Addr is the gRPC address the service listens on.
func (s *Service) Addr() net.Addr { return s.srv.Addr() }

// Serve answers calls until ctx ends. Then open Connect streams end at once with UNAVAILABLE
// (their clients resume on another replica), unary calls drain, and the Redis connection
// closes.
func (s *Service) Serve(ctx context.Context) error {
	defer s.rdb.Close()
	return s.srv.Serve(ctx, s.feed.Run)
}
