package uitest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	chat "github.com/vigil-dev/vigil/services/chat/service"
	lobby "github.com/vigil-dev/vigil/services/lobby/service"
	room "github.com/vigil-dev/vigil/services/room/service"
)

// testLogs is the services' and the gateway's logger for one test: the tests check pages, not
// logs, so the lines are kept and printed only when the test fails (a page that never
// connected leaves its reason there, not in a passing run's output).
func testLogs(t *testing.T) *slog.Logger {
	t.Helper()
	logs := &servertest.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the stack's logs:\n%s", logs.String())
		}
	})
	return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// stack is the chat, lobby and room services and the gateway, started in-process on the
// shared Redis under this test's key prefix. The browser reaches the gateway through proxy,
// which a test can cut to simulate a network blip.
type stack struct {
	gateway *httptest.Server
	proxy   *blipProxy
	// url is where the browser goes: the proxy in front of the gateway.
	url string
}

// stackOptions tune the services; zero values are the services' defaults.
type stackOptions struct {
	// idleTTL is how long a room lives without leader activity (Room and Lobby agree on it).
	idleTTL time.Duration
}

// startStack starts every service the pages use and the gateway, each through its real Run
// or New, and stops them when the test ends.
func startStack(t *testing.T, opts ...stackOptions) *stack {
	t.Helper()
	prefix := redistest.Prefix(t)
	var o stackOptions
	if len(opts) > 0 {
		o = opts[0]
	}

	log := testLogs(t)
	chatAddr := servertest.Start(t, "chat", servertest.Serve(chat.New, chat.Options{Core: servertest.Core(t, prefix+":chat", log.With("service", "chat"))})).Addr
	lobbyAddr := servertest.Start(t, "lobby", servertest.Serve(lobby.New, lobby.Options{Core: servertest.Core(t, prefix+":lobby", log.With("service", "lobby")), IdleTTL: o.idleTTL})).Addr
	roomAddr := servertest.Start(t, "room", servertest.Serve(room.New, room.Options{Core: servertest.Core(t, prefix+":room", log.With("service", "room")), LobbyAddr: lobbyAddr, IdleTTL: o.idleTTL})).Addr
	srv := serveGateway(t, gateway.Options{Backends: gateway.Backends{Chat: chatAddr, Lobby: lobbyAddr, Room: roomAddr}, Logger: log.With("service", "gateway")}, log.With("service", "http"))
	p := newBlipProxy(t, srv.Listener.Addr().String())
	t.Cleanup(p.close)
	return &stack{gateway: srv, proxy: p, url: "http://" + p.addr()}
}

// serveGateway serves gateway.New(o) on an httptest server until the test ends, and waits
// until it is healthy.
func serveGateway(t *testing.T, o gateway.Options, access ...*slog.Logger) *httptest.Server {
	t.Helper()
	g, err := gateway.New(context.Background(), o)
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	h := g.Handler()
	if len(access) > 0 {
		h = logRequests(access[0], h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); g.Close() })
	waitHealthy(t, srv.URL)
	return srv
}

// logRequests logs when each request arrives and when its handler returns (a WebSocket's
// handler returns at the upgrade), so a failed test's logs show where a page's request waited.
func logRequests(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		log.Debug("request", "event", "http_start", "method", r.Method, "path", r.URL.Path, "peer", r.RemoteAddr)
		h.ServeHTTP(w, r)
		log.Debug("request handled", "event", "http_end", "method", r.Method, "path", r.URL.Path, "peer", r.RemoteAddr, "ms", time.Since(start).Milliseconds())
	})
}

// waitHealthy waits until the gateway's /healthz says every backend serves.
func waitHealthy(t *testing.T, base string) {
	t.Helper()
	wait.For(t, "the gateway to be healthy", func() error {
		res, err := http.Get(base + "/healthz")
		if err != nil {
			return err
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz answered %d", res.StatusCode)
		}
		return nil
	})
}

// blipProxy forwards TCP connections to the gateway. cut closes every open connection and
// refuses new ones until heal: to the browser that is a network blip.
type blipProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func newBlipProxy(t *testing.T, target string) *blipProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blipProxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p
}

func (p *blipProxy) addr() string { return p.ln.Addr().String() }

func (p *blipProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *blipProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut drops every connection and refuses new ones until heal.
func (p *blipProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// heal lets connections through again.
func (p *blipProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *blipProxy) close() {
	p.cut()
	_ = p.ln.Close()
}
