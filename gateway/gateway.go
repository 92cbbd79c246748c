// Package gateway is Vigil's edge: it translates REST (grpc-gateway) and WebSocket into typed
// gRPC calls on the domain services, and serves /healthz, /metrics, /openapi.json and the web UI.
package gateway

// The root package only wires the gateway's parts: gateway/auth (keys, socket tokens, scopes,
// rate limits), gateway/rest (the REST routes in the JSON dialect of gateway/jsonapi),
// gateway/chat and gateway/room (socket kinds on gateway/socket), gateway/backend (the
// connections to the services). See docs/ARCHITECTURE.md.

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"errors"
	"unicode/utf8"

	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigil-dev/vigil/gateway/auth"
	"github.com/vigil-dev/vigil/gateway/backend"
	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"github.com/vigil-dev/vigil/gateway/rest"
	"github.com/vigil-dev/vigil/gateway/socket"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/tracing"
)

//go:embed openapi/vigil.swagger.json
var openapiJSON []byte

// Options configure the gateway. Every zero value has the default given in its comment.
type Options struct {
	// Addr to listen on. Default "127.0.0.1:8080".
	Addr string
	// Backends are the gRPC addresses of the domain services; a domain with no address is not
	// served (its routes answer 404).
	Backends Backends
	// MaxBodyBytes bounds a request body; larger bodies get 413. Default 64 KiB.
	MaxBodyBytes int64
	// Logger for requests and lifecycle events. Default slog.Default().
	Logger *slog.Logger
	// DialOptions for the backend connections. Default: plaintext.
	DialOptions []grpc.DialOption
	// DrainTimeout bounds the graceful shutdown. Default 10s.
	DrainTimeout time.Duration
	// Security: API keys, TLS, origin checks and HTTP request limits (gateway/auth). Default:
	// the development mode, everything open.
	Security Security
	// Sockets bound the WebSockets: per room on this gateway, and each socket's frames.
	Sockets SocketLimits
	// MaxMessageBytes bounds one gRPC message between the gateway and a service, each way.
	// Default 4 MiB.
	MaxMessageBytes int
	// MetricsAddr, when set, serves Prometheus /metrics on a listener of its own, for operators
	// only (never published), and not on Addr. Default "": /metrics on Addr, which is what
	// `vigil dev` does on 127.0.0.1; the gateway command always sets it (VIGIL_METRICS_ADDR).
	MetricsAddr string
	// Metrics is where this gateway's collectors (vigil_gateway_*: requests, sockets) are
	// registered, each gateway its own; collectors already registered there (a second gateway
	// on the same registry) are shared. /metrics serves this registry when it is also a
	// prometheus.Gatherer (a *prometheus.Registry), the default gatherer otherwise. Default
	// prometheus.DefaultRegisterer.
	Metrics prometheus.Registerer
}

// Backends are the gRPC addresses (host:port) of the domain services.
type Backends struct {
	Reservations string
	Locks        string
	// Chat may list several replicas, comma-separated ("127.0.0.1:7003,127.0.0.1:7013"):
	// calls are balanced round-robin, and a chat room whose stream breaks re-attaches to
	// another (see gateway/backend). Every backend takes such a list.
	Chat  string
	Lobby string
	Room  string
}

// Gateway is the edge's HTTP handler and its backend connections.
type Gateway struct {
	o       Options
	handler http.Handler
	conns   map[string]*grpc.ClientConn
	// closers end what the domains opened on conns (lock sessions), before conns close.
	closers []func()
	log     *slog.Logger
	// router holds every route under its pattern (routes.go); guard checks keys, scopes and
	// rate limits (gateway/auth).
	router *router
	guard  *auth.Guard
	// sockets holds every WebSocket of every route (gateway/socket).
	sockets *socket.Registry
	// metrics count the gateway's HTTP traffic (observe.go), registered on o.Metrics.
	metrics *metrics
	// rest is the REST dialect of every REST route (gateway/rest).
	rest *rest.Relay
	// runtime is the grpc-gateway runtime behind the body limit: it serves the REST rules the
	// domains do not answer themselves, and holds every rule, so the unary routes can be
	// compared with it (unary_test.go).
	runtime http.Handler
}

// New dials the configured backends (lazily: a backend that is down makes its routes answer
// 503 until it is up) and builds the handler.
func New(ctx context.Context, o Options) (*Gateway, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8080"
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 64 << 10
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = 10 * time.Second
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 4 << 20
	}
	if len(o.DialOptions) == 0 {
		var err error
		if o.DialOptions, err = backend.DialOptions(o.Security.BackendTLS, o.MaxMessageBytes); err != nil {
			return nil, err
		}
	}
	// Traced only when the environment asks for it (pkg/tracing); nothing is added otherwise.
	if err := tracing.Setup(ctx, "gateway"); err != nil {
		o.Logger.Warn("tracing is off", "event", "tracing_error", "err", err)
	}
	if o.Metrics == nil {
		o.Metrics = prometheus.DefaultRegisterer
	}
	o.DialOptions = append(o.DialOptions, tracing.DialOptions()...)
	g := &Gateway{o: o, conns: map[string]*grpc.ClientConn{}, log: o.Logger}
	var err error
	if g.metrics, err = newMetrics(o.Metrics); err != nil {
		return nil, err
	}
	hedges, err := backend.NewHedges(o.Metrics)
	if err != nil {
		return nil, err
	}
	g.guard = auth.NewGuard(o.Security, o.Logger)
	if g.sockets, err = g.socketRegistry(); err != nil {
		return nil, err
	}
	g.rest = rest.New(jsonapi.New(querySentences, dialect), o.Logger, o.MaxBodyBytes)
	var served []domain
	var admin []rest.Backend
	for _, d := range o.domains() {
		if d.addr == "" {
			continue
		}
		conn, err := backend.Dial(d.addr, hedges, o.DialOptions...)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("dial %s at %s: %w", d.name, d.addr, err)
		}
		g.conns[d.name] = conn
		served = append(served, d)
		admin = append(admin, rest.Backend{Name: d.name, Conn: conn})
	}

	gw := g.rest.Runtime(successCodes)
	runtimeRoutes := g.rest.LimitBody(gw)
	g.runtime = runtimeRoutes
	mux := newRouter(g.guard.Wrap)
	g.router = mux
	for _, d := range served {
		if d.own != nil {
			d.own(g, mux, g.conns[d.name])
		}
		if d.rest != nil {
			if err := d.rest(ctx, gw, g.conns[d.name]); err != nil {
				g.Close()
				return nil, fmt.Errorf("register %s routes: %w", d.name, err)
			}
			// The HTTP rules' routes, except those the domain answers itself.
			for _, pattern := range restRoutes()[domainServices[d.name]] {
				if mux.registered(pattern) {
					continue
				}
				h := runtimeRoutes
				if req, ok := restQueries()[pattern]; ok {
					h = g.rest.CheckQuery(req, h)
				}
				mux.Handle(pattern, h)
			}
		}
	}
	mux.HandleFunc("GET /{$}", g.root)
	mux.HandleFunc("GET /healthz", g.healthz)
	g.rest.HandleAdmin(mux, admin)
	mux.Handle("GET /ui/", uiHandler())
	if o.MetricsAddr == "" {
		mux.Handle("GET /metrics", g.metricsHandler())
	}
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapiJSON)
	})
	mux.HandleFunc("POST /auth/socket-token", g.guard.ServeSocketToken)
	mux.HandleFunc("/", mux.noRoute)
	if mux.err != nil {
		g.Close()
		return nil, mux.err
	}
	g.handler = g.metrics.observe(utf8Only(mux.mux))
	return g, nil
}

// utf8Only refuses a path or query that is not UTF-8 before anything routes it: gRPC refuses
// such strings, and they would otherwise fail as 500s.
func utf8Only(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !validUTF8(r) {
			jsonapi.WriteError(w, http.StatusBadRequest, "Use UTF-8 in the path and query.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// metricsHandler serves /metrics from the registry the gateway's collectors are on (see
// Options.Metrics).
func (g *Gateway) metricsHandler() http.Handler {
	gatherer, ok := g.o.Metrics.(prometheus.Gatherer)
	if !ok {
		gatherer = prometheus.DefaultGatherer
	}
	return promhttp.InstrumentMetricHandler(g.o.Metrics, promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
}

// Handler serves every route of the gateway.
func (g *Gateway) Handler() http.Handler { return g.handler }

// CloseSockets closes every WebSocket with 1001 (going away) and waits until they are closed
// or ctx ends; new upgrades are refused from now on. Clients reconnect and resume.
func (g *Gateway) CloseSockets(ctx context.Context) error { return g.sockets.Shutdown(ctx) }

// Close closes the backend connections.
func (g *Gateway) Close() {
	for _, c := range g.closers {
		c()
	}
	for _, c := range g.conns {
		_ = c.Close()
	}
}

// Run serves the gateway on o.Addr until ctx ends, then shuts down gracefully. ready, when not
// nil, receives the listening address once the gateway accepts connections.
func Run(ctx context.Context, o Options, ready func(addr net.Addr)) error {
	g, err := New(ctx, o)
	if err != nil {
		return err
	}
	defer g.Close()
	lis, err := net.Listen("tcp", g.o.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", g.o.Addr, err)
	}
	if lis, err = tlsListener(g.o.Security.TLS, lis); err != nil {
		return err
	}
	srv := &http.Server{Handler: g.handler, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	var ms *http.Server
	if g.o.MetricsAddr != "" {
		mlis, err := net.Listen("tcp", g.o.MetricsAddr)
		if err != nil {
			_ = lis.Close()
			return fmt.Errorf("metrics listen %s: %w", g.o.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", g.metricsHandler())
		ms = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := ms.Serve(mlis); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics serve: %w", err)
			}
		}()
	}
	g.log.Info("gateway serving", "event", "start", "service", "gateway", "http", lis.Addr().String(), "metrics", g.o.MetricsAddr)
	if ready != nil {
		ready(lis.Addr())
	}
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		if ms != nil {
			_ = ms.Close()
		}
		_ = srv.Close()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), g.o.DrainTimeout)
	defer cancel()
	if ms != nil {
		_ = ms.Close()
	}
	// Sockets first, inside the same deadline: hijacked connections are outside the server's
	// Shutdown, and a socket must hear 1001 (reconnect elsewhere) before the process ends.
	// The listener is closed by Shutdown below; upgrades arriving meanwhile are refused.
	open := g.sockets.Open()
	sockErr := g.sockets.Shutdown(sctx)
	g.log.Info("gateway sockets closed", "event", "sockets_closed", "sockets", open, "err", sockErr)
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("gateway shutdown: %w", err)
	}
	return nil
}

func (g *Gateway) root(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		http.Redirect(w, r, "/ui/", http.StatusFound)
		return
	}
	domains := make([]string, 0, len(g.conns))
	for _, d := range g.o.domains() {
		if _, ok := g.conns[d.name]; ok {
			domains = append(domains, d.name)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"service": "vigil",
		"domains": domains,
		"openapi": "/openapi.json",
		"health":  "/healthz",
		"ui":      "/ui/",
	})
}

// healthz is ready only when every backend answers its gRPC health check with SERVING (a
// service answers NOT_SERVING while its Redis does not, see pkg/server). The answer names each
// backend's state, and a 503 says in a sentence which ones are not ready.
func (g *Gateway) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	backends := map[string]string{}
	for name, conn := range g.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			state := "SERVING"
			res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			switch {
			case err != nil:
				state = "UNAVAILABLE"
			case res.GetStatus() != healthpb.HealthCheckResponse_SERVING:
				state = res.GetStatus().String()
			}
			mu.Lock()
			defer mu.Unlock()
			backends[name] = state
		}()
	}
	wg.Wait()
	var down []string
	for _, d := range g.o.domains() {
		if st, ok := backends[d.name]; ok && st != "SERVING" {
			down = append(down, fmt.Sprintf("%s (%s)", d.name, st))
		}
	}
	body := map[string]any{"status": "ok", "backends": backends}
	code := http.StatusOK
	if len(down) > 0 {
		code = http.StatusServiceUnavailable
		body["status"] = "unavailable"
		body["error"] = "Not ready: " + strings.Join(down, ", ") + "."
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// validUTF8 reports whether the request's path and query values are UTF-8.
func validUTF8(r *http.Request) bool {
	if !utf8.ValidString(r.URL.Path) {
		return false
	}
	if r.URL.RawQuery == "" {
		// The usual REST call: no query, nothing to parse (Query would allocate a map).
		return true
	}
	for k, vs := range r.URL.Query() {
		if !utf8.ValidString(k) {
			return false
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

// tlsListener wraps lis in TLS when cfg names a certificate. Only HTTP/1.1 is offered:
// WebSocket upgrades need it, and the REST API gains nothing from HTTP/2 here.
func tlsListener(cfg server.TLS, lis net.Listener) (net.Listener, error) {
	c, err := cfg.ServerConfig()
	if err != nil || c == nil {
		return lis, err
	}
	c.NextProtos = []string{"http/1.1"}
	return tls.NewListener(lis, c), nil
}
