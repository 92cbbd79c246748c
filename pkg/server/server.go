// Package server is the one gRPC server bootstrap every Vigil service uses: health and
// reflection services, recovery, logging and Prometheus interceptors, a metrics endpoint, and a
// graceful drain (NOT_SERVING first, then GracefulStop with a hard deadline).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/vigil-dev/vigil/pkg/clock"
	"github.com/vigil-dev/vigil/pkg/prom"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/pkg/tracing"
)

// Options configure a Server. Every zero value has the default given in its comment.
type Options struct {
	// Name of the service, used in logs and as the health service name. Required.
	Name string
	// GRPCAddr to listen on. Default "127.0.0.1:0" (any free port; see Server.Addr).
	GRPCAddr string
	// MetricsAddr serves /metrics and /healthz over HTTP when set. Default "": no such listener.
	MetricsAddr string
	// Logger for requests and lifecycle events. Default slog.Default().
	Logger *slog.Logger
	// DrainTimeout bounds the graceful stop; after it, open calls are cut. Default 10s.
	DrainTimeout time.Duration
	// MaxRecvMsgSize bounds one request message. Default 1 MiB.
	MaxRecvMsgSize int
	// MaxSendMsgSize bounds one response message. Default 4 MiB.
	MaxSendMsgSize int
	// TLS secures the listener (mutual TLS when TLS.CAFile is set; see tls.go). Default:
	// plaintext (mains fill it from the -tls-* flags, VIGIL_TLS_*: config.ServiceFlags.TLS).
	TLS TLS
	// ServerOptions are appended to the bootstrap's own (TLS credentials, for example).
	ServerOptions []grpc.ServerOption
	// MaxInFlight bounds the unary calls running at once; calls beyond it are refused at once
	// with RESOURCE_EXHAUSTED (HTTP 429 at the gateway) and counted in vigil_grpc_shed_total
	// (see limit.go). Negative: no limit. Default DefaultMaxInFlight (1024).
	MaxInFlight int
	// Store is the service's Redis. When set, Serve pings it every ReadinessInterval and the
	// health service answers NOT_SERVING while it does not answer (two failed pings in a row),
	// SERVING again at the first answer: a replica whose store is gone leaves rotation, and a
	// probe or the gateway's /healthz sees why. Default nil: health follows the server only.
	Store redis.UniversalClient
	// ReadinessInterval is how often Store is pinged. Default DefaultReadinessInterval (1s).
	ReadinessInterval time.Duration
	// Registerer takes the server's metrics (grpc_server_*, vigil_grpc_shed_total); when it
	// is also a prometheus.Gatherer (a *prometheus.Registry), the MetricsAddr listener serves
	// it. Several servers in one process may share a Registerer: they share its collectors.
	// Default prometheus.DefaultRegisterer, served with prometheus.DefaultGatherer.
	Registerer prometheus.Registerer
	// Clock is the service's clock disciplined to Store's TIME (Core sets it; see pkg/clock):
	// New takes its first samples, so the service decides nothing against an unmeasured
	// clock, Serve keeps sampling, and /healthz on MetricsAddr reports its offset. Needs
	// Store. Default nil: no clock to keep.
	Clock *clock.Clock
}

// Server is a gRPC server with Vigil's standard services and interceptors. Its MetricsAddr
// listener serves /metrics and /healthz (see healthz.go).
type Server struct {
	o        Options
	lis      net.Listener
	grpc     *grpc.Server
	health   *health.Server
	metrics  *grpcprom.ServerMetrics
	gatherer prometheus.Gatherer
	// stopping ends when the drain starts (see Stopping).
	stopping context.Context
	stop     context.CancelFunc
}

// metrics are the collectors a server registers. Servers sharing a Registerer (the all-in-one
// dev mode runs several on the default one) share them; the method label tells them apart.
type metrics struct {
	server *grpcprom.ServerMetrics
	shed   *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer) (metrics, error) {
	m := metrics{
		server: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets([]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}),
		)),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_grpc_shed_total",
			Help: "Unary calls refused with RESOURCE_EXHAUSTED because MaxInFlight calls were already running.",
		}, []string{"grpc_method"}),
	}
	var err error
	if m.server, err = prom.Register(r, m.server); err != nil {
		return m, err
	}
	if m.shed, err = prom.Register(r, m.shed); err != nil {
		return m, err
	}
	return m, nil
}

// New listens on o.GRPCAddr and builds the server. Register services on GRPC() before Serve.
func New(o Options) (*Server, error) {
	if o.Name == "" {
		return nil, errors.New("server: Name is required")
	}
	if o.GRPCAddr == "" {
		o.GRPCAddr = "127.0.0.1:0"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 10 * time.Second
	}
	if o.MaxRecvMsgSize <= 0 {
		o.MaxRecvMsgSize = 1 << 20
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.ReadinessInterval <= 0 {
		o.ReadinessInterval = DefaultReadinessInterval
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.DefaultRegisterer
	}
	gatherer := prometheus.DefaultGatherer
	if g, ok := o.Registerer.(prometheus.Gatherer); ok {
		gatherer = g
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	secure, err := o.securityOptions()
	if err != nil {
		return nil, err
	}
	if err := o.syncClock(); err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", o.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", o.GRPCAddr, err)
	}
	logger := o.Logger
	recoveryOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "panic in handler", "event", "panic", "panic", fmt.Sprint(p))
		return status.Error(codes.Internal, "internal error")
	})
	logOpts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall), logging.WithLevels(serverCodeToLevel)}
	opts := append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(o.MaxRecvMsgSize),
		// Calls run on long-lived workers, not a new goroutine each: a fresh goroutine grows
		// its stack through a gRPC handler's depth on every call (runtime.copystack was 5-9 %
		// of a vigilbench lobby profile); a call that finds every worker busy still gets one.
		grpc.NumStreamWorkers(uint32(4 * runtime.GOMAXPROCS(0))),
		grpc.ChainUnaryInterceptor(
			m.server.UnaryServerInterceptor(),
			limitUnary(o.MaxInFlight, m.shed),
			logging.UnaryServerInterceptor(slogAdapter(logger), logOpts...),
			recovery.UnaryServerInterceptor(recoveryOpt),
		),
		grpc.ChainStreamInterceptor(
			m.server.StreamServerInterceptor(),
			logging.StreamServerInterceptor(slogAdapter(logger), logOpts...),
			recovery.StreamServerInterceptor(recoveryOpt),
		),
	}, append(secure, o.ServerOptions...)...)
	opts = append(keepaliveOptions(), opts...) // first, so o.ServerOptions may override it
	// Traced only when the environment asks for it (pkg/tracing); nothing is added otherwise.
	if err := tracing.Setup(context.Background(), o.Name); err != nil {
		logger.Warn("tracing is off", "event", "tracing_error", "err", err)
	}
	opts = append(opts, tracing.ServerOptions()...)
	s := &Server{o: o, lis: lis, grpc: grpc.NewServer(opts...), health: health.NewServer(), metrics: m.server, gatherer: gatherer}
	s.stopping, s.stop = context.WithCancel(context.Background())
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	return s, nil
}

// serverCodeToLevel logs successful calls at debug, so a busy service's log holds what matters.
func serverCodeToLevel(c codes.Code) logging.Level {
	switch c {
	case codes.OK, codes.NotFound, codes.Canceled:
		return logging.LevelDebug
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists, codes.ResourceExhausted, codes.Unauthenticated, codes.PermissionDenied:
		return logging.LevelInfo
	default:
		return logging.LevelError
	}
}

func slogAdapter(l *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		l.Log(ctx, slog.Level(lvl), msg, append([]any{"event", "rpc"}, fields...)...)
	})
}

// GRPC is the underlying server, for registering services.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Health is the health server; services may mark themselves NOT_SERVING while a dependency
// is down.
func (s *Server) Health() *health.Server { return s.health }

// Stopping ends when Serve starts to drain (or returns). Long streams watch it to end at once
// with UNAVAILABLE, so that their clients resume on another replica and the drain does not
// wait on them.
func (s *Server) Stopping() context.Context { return s.stopping }

// Serve serves until ctx ends, running each background task (alarm schedulers, for example)
// beside the server. Then it drains: health answers NOT_SERVING, background tasks stop, and
// in-flight calls get DrainTimeout to finish before they are cut. It returns the first error
// of the server or a task; nil after a clean drain.
func (s *Server) Serve(ctx context.Context, background ...func(ctx context.Context) error) error {
	defer s.stop()
	s.metrics.InitializeMetrics(s.grpc)
	s.setServing(healthpb.HealthCheckResponse_SERVING)
	s.o.Logger.Info("serving", "event", "start", "service", s.o.Name, "grpc", s.lis.Addr().String(), "metrics", s.o.MetricsAddr)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := s.grpc.Serve(s.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("grpc serve: %w", err)
		}
		return nil
	})
	if s.o.MetricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", s.healthz)
		ms := &http.Server{Addr: s.o.MetricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		g.Go(func() error {
			if err := ms.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("metrics serve: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return ms.Shutdown(sctx)
		})
	}
	if s.o.Store != nil {
		check := PingStore(s.o.Store)
		g.Go(func() error { return s.watchReadiness(gctx, check) })
	}
	if s.o.Clock != nil {
		g.Go(func() error { return s.o.Clock.Run(gctx, clock.RedisTime(s.o.Store)) })
	}
	for _, task := range background {
		g.Go(func() error { return task(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		s.drain()
		return nil
	})
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func (s *Server) drain() {
	s.stop()
	s.health.Shutdown() // every service NOT_SERVING, so balancers stop sending new calls
	s.o.Logger.Info("draining", "event", "drain", "service", s.o.Name, "deadline", s.o.DrainTimeout.String())
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.o.DrainTimeout):
		s.o.Logger.Warn("drain deadline passed; cutting open calls", "event", "drain_timeout", "service", s.o.Name)
		s.grpc.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tracing.Flush(ctx)
}
