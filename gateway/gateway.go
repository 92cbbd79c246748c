// Package gateway is Vigil's edge: it translates REST (grpc-gateway) and WebSocket into typed
// gRPC calls on the domain services, and serves /healthz, /metrics, /openapi.json and the web UI.
package gateway

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"

	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vigil-dev/vigil/gateway/socket"
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
	// Security: API keys, TLS, origin checks and abuse limits (security.go). Default: the
	// development mode, everything open.
	Security Security
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
	// another (see backendTarget in chat.go). Every backend takes such a list.
	Chat  string
	Lobby string
	Room  string
}

// domain is one backend the gateway serves: its REST routes (registered on the grpc-gateway
// mux) and its WebSocket routes (served beside it).
type domain struct {
	name string
	addr string
	// rest registers the domain's grpc-gateway handlers on the domain's one backend
	// connection. One connection, not a pool: concurrent calls share its writes (the HTTP/2
	// frames of many calls go out in one syscall), which on a small machine beats spreading
	// them over several connections (measured in vigilbench: REST creates 0.56× gRPC on one
	// connection, 0.51× on four).
	rest func(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error
	// own adds the routes the domain answers itself (WebSockets, hand-written answers, the
	// busiest REST rules as unaryRoutes) to mux, each under a pattern of routeScopes.
	own func(g *Gateway, mux *router, conn *grpc.ClientConn)
	// created maps full RPC method names to the HTTP status of their success (201, 204).
	created map[string]int
	// allowEmpty and fieldErrors tune the JSON dialect for the domain's request messages.
	allowEmpty  []protoreflect.FullName
	fieldErrors map[protoreflect.FullName]string
}

func (o *Options) domains() []domain {
	return []domain{
		reservationsDomain(o.Backends.Reservations),
		locksDomain(o.Backends.Locks),
		chatDomain(o.Backends.Chat),
		lobbyDomain(o.Backends.Lobby),
		roomDomain(o.Backends.Room),
	}
}

// Gateway is the edge's HTTP handler and its backend connections.
type Gateway struct {
	o       Options
	handler http.Handler
	conns   map[string]*grpc.ClientConn
	// closers end what the domains opened on conns (lock sessions), before conns close.
	closers []func()
	log     *slog.Logger
	// router holds every route under its pattern (routes.go); auth checks keys (auth.go).
	router *router
	auth   *authenticator
	// sockets holds every WebSocket of every route (gateway/socket).
	sockets *socket.Registry
	// metrics count the gateway's HTTP traffic (observe.go), registered on o.Metrics.
	metrics *metrics
	// json is the JSON dialect of every REST route (jsonapi.go).
	json *apiMarshaler
	// runtime is the grpc-gateway runtime behind limitBody: it serves the REST rules the
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
	if len(o.DialOptions) == 0 {
		var err error
		if o.DialOptions, err = o.Security.dialOptions(); err != nil {
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
	if g.sockets, err = g.socketRegistry(); err != nil {
		return nil, err
	}
	m := &apiMarshaler{allowEmpty: map[protoreflect.FullName]bool{}, fieldErrors: map[protoreflect.FullName]string{}}
	g.json = m
	successCodes := map[string]int{}
	var served []domain
	for _, d := range o.domains() {
		if d.addr == "" {
			continue
		}
		conn, err := grpc.NewClient(d.addr, o.DialOptions...)
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("dial %s at %s: %w", d.name, d.addr, err)
		}
		g.conns[d.name] = conn
		for _, n := range d.allowEmpty {
			m.allowEmpty[n] = true
		}
		for n, msg := range d.fieldErrors {
			m.fieldErrors[n] = msg
		}
		for meth, code := range d.created {
			successCodes[meth] = code
		}
		served = append(served, d)
	}

	installQueryParser()
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, m),
		runtime.WithErrorHandler(g.writeRPCError),
		runtime.WithRoutingErrorHandler(routingError),
		// Path parameters are names as people write them, percent-encoded in the path:
		// /locks/orders%2F42/acquire is the lock "orders/42". In this mode the raw path is split
		// on "/" only, and a one-segment parameter is fully unescaped (AllCharacters would split
		// on "%2F" too).
		runtime.WithUnescapingMode(runtime.UnescapingModeAllExceptReserved),
		runtime.WithForwardResponseOption(func(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
			if meth, ok := runtime.RPCMethod(ctx); ok {
				if code, ok := successCodes[meth]; ok {
					w.WriteHeader(code)
				}
			}
			return nil
		}),
	)
	rest := g.limitBody(gw)
	g.runtime = rest
	mux := newRouter(g.secure())
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
				if !mux.registered(pattern) {
					mux.Handle(pattern, rest)
				}
			}
		}
	}
	mux.HandleFunc("GET /{$}", g.root)
	mux.HandleFunc("GET /healthz", g.healthz)
	g.adminRoutes(mux)
	mux.Handle("GET /ui/", uiHandler())
	if o.MetricsAddr == "" {
		mux.Handle("GET /metrics", g.metricsHandler())
	}
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapiJSON)
	})
	mux.HandleFunc("POST /auth/socket-token", g.serveSocketToken)
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
			writeError(w, http.StatusBadRequest, "Use UTF-8 in the path and query.")
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
	if lis, err = g.o.Security.listener(lis); err != nil {
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

// errorBody is every error answer: one sentence a person can act on.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(errorBody{Error: msg})
}

// writeRPCError maps a gRPC status to HTTP. Services write user-facing messages for client
// errors; server-side failures get a generic sentence so internals never leak.
func (g *Gateway) writeRPCError(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	code := runtime.HTTPStatusFromCode(st.Code())
	msg := st.Message()
	switch st.Code() {
	case codes.FailedPrecondition:
		// The object's state forbids the call (confirming an expired hold): a conflict.
		code = http.StatusConflict
	case codes.Unavailable:
		msg = "A backend service is unavailable; try again shortly."
	case codes.DeadlineExceeded:
		msg = "The request timed out; try again."
	case codes.Internal, codes.Unknown, codes.DataLoss:
		g.log.ErrorContext(ctx, "backend error", "event", "http_error", "path", r.URL.Path, "code", st.Code().String(), "err", st.Message())
		msg = "Internal error."
	case codes.Unimplemented:
		code, msg = http.StatusNotFound, "Not found."
	}
	if msg == "" {
		msg = http.StatusText(code) + "."
	}
	writeError(w, code, msg)
}

func routingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	switch code {
	case http.StatusMethodNotAllowed:
		writeError(w, code, "Method not allowed.")
	case http.StatusNotFound:
		writeError(w, code, fmt.Sprintf("No route %s %s.", r.Method, r.URL.Path))
	default:
		writeError(w, code, http.StatusText(code)+".")
	}
}

// limitBody reads at most MaxBodyBytes of a request body up front: larger bodies get 413
// before any backend is called.
func (g *Gateway) limitBody(next http.Handler) http.Handler {
	limit := g.o.MaxBodyBytes
	tooLarge := fmt.Sprintf("The request body is larger than %d KiB; send a smaller one.", limit>>10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			writeError(w, http.StatusRequestEntityTooLarge, tooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			var body []byte
			var err error
			if n := r.ContentLength; n >= 0 {
				// The usual case: read exactly the announced length into one buffer.
				body = make([]byte, n)
				_, err = io.ReadFull(r.Body, body)
			} else {
				body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, errSendJSON)
				return
			}
			if int64(len(body)) > limit {
				writeError(w, http.StatusRequestEntityTooLarge, tooLarge)
				return
			}
			r.Body = &bufferedBody{Reader: bytes.NewReader(body), b: body}
		}
		next.ServeHTTP(w, r)
	})
}

// bufferedBody is a request body limitBody has read: the JSON decoder takes its bytes as they
// are instead of copying them again.
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

func (*bufferedBody) Close() error { return nil }

// take returns the unread bytes and marks them read.
func (b *bufferedBody) take() []byte {
	rest := b.b[len(b.b)-b.Len():]
	_, _ = b.Seek(0, io.SeekEnd)
	return rest
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
