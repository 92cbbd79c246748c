package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vigil-dev/vigil/gateway/auth"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	chatservice "github.com/vigil-dev/vigil/services/chat/service"
	lobbyservice "github.com/vigil-dev/vigil/services/lobby/service"
	locksservice "github.com/vigil-dev/vigil/services/locks/service"
	reservationservice "github.com/vigil-dev/vigil/services/reservations/service"
	roomservice "github.com/vigil-dev/vigil/services/room/service"
)

// startGateway serves the gateway for the given backends on an httptest server.
func startGateway(t *testing.T, b Backends) *httptest.Server {
	t.Helper()
	g, err := New(context.Background(), Options{Backends: b, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	return srv
}

// readFrames reads c's frames until it closes: each frame is a JSON object, or several
// separated by newlines (a chat socket's pack=1), read with numbers as json.Number into frames;
// the error that ended the socket (a read error, or a frame that is not JSON) goes to closed.
func readFrames(c *websocket.Conn, frames chan<- map[string]any, closed chan<- error) {
	for {
		_, data, err := c.Read(context.Background())
		if err != nil {
			closed <- err
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		for dec.More() {
			var f map[string]any
			if err := dec.Decode(&f); err != nil {
				closed <- fmt.Errorf("frame %.60q is not JSON: %w", data, err)
				return
			}
			frames <- f
		}
	}
}

// writeFrame sends text on c, failing the test when it is not written within 5 s.
func writeFrame(t *testing.T, c *websocket.Conn, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(text)); err != nil {
		t.Fatalf("send %.60q: %v", text, err)
	}
}

// startChatGateway runs one chat replica on this test's prefix and a gateway in front of it.
func startChatGateway(t *testing.T) *httptest.Server {
	t.Helper()
	return startGateway(t, Backends{Chat: newChatEnv(t).startChat(t, "", nil).Addr})
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewJSONHandler(io.Discard, nil))
}

// apiResponse is an HTTP answer with its JSON body decoded (numbers kept as json.Number).
type apiResponse struct {
	code int
	body map[string]any
	raw  string
}

func call(t *testing.T, method, url, body string, header ...string) apiResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := apiResponse{code: res.StatusCode, raw: string(raw)}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&out.body)
	return out
}

// routeScopes is the route table (gateway/auth/scopes.go), pattern to scope.
var routeScopes = func() map[string]string {
	m := map[string]string{}
	for _, p := range auth.Routes() {
		m[p], _ = auth.Scope(p)
	}
	return m
}()

// testCore is a service's Core on the Redis at url under prefix, logging to log (nil: the
// service's default).
func testCore(url, prefix string, log *slog.Logger) server.Core {
	return server.Core{Redis: redisx.Config{URL: url}, Prefix: prefix, Logger: log}
}

// chatEnv is a Redis prefix shared by a test's chat replicas.
type chatEnv struct {
	url, prefix string
}

func newChatEnv(t *testing.T) chatEnv {
	t.Helper()
	return chatEnv{url: redistest.URL(t), prefix: redistest.Prefix(t)}
}

// startChat runs one chat replica on addr ("" for any free port).
func (e chatEnv) startChat(t *testing.T, addr string, log *slog.Logger) *servertest.Running {
	t.Helper()
	if log == nil {
		log = testLogger(t)
	}
	o := chatservice.Options{Core: server.Core{GRPCAddr: addr, Redis: redisx.Config{URL: e.url}, Prefix: e.prefix, Logger: log}}
	return servertest.Start(t, "chat", servertest.Serve(chatservice.New, o))
}

// startRoomStack runs a Lobby, a Room replica and a gateway in front of them on this test's
// key prefix, with the given idle TTL and a one-second prune grace.
func startRoomStack(t *testing.T, idleTTL time.Duration) string {
	t.Helper()
	_, prefix := redistest.Client(t) // removes the prefix's keys at the end
	url := redistest.URL(t)
	lobby := servertest.Start(t, "lobby", servertest.Serve(lobbyservice.New, lobbyservice.Options{
		Core:    testCore(url, prefix+"-lobby", testLogger(t)),
		IdleTTL: idleTTL, PruneGrace: time.Second,
	}))
	room := servertest.Start(t, "room", servertest.Serve(roomservice.New, roomservice.Options{
		Core:   testCore(url, prefix+"-room", testLogger(t)),
		Shards: 4, LobbyAddr: lobby.Addr,
		IdleTTL: idleTTL, SessionLease: 3 * time.Second,
	}))
	return startGateway(t, Backends{Lobby: lobby.Addr, Room: room.Addr}).URL
}

// roomStack is a Lobby, a Room service on a fixed address (so it can be restarted or killed
// and come back there) and a gateway, on this test's key prefix, with every log captured.
type roomStack struct {
	gw        string
	url       string
	prefix    string
	lobbyAddr string
	roomAddr  string
	// roomBackend is the gateway's room backend when it is not roomAddr alone (replicas).
	roomBackend string
	lease       time.Duration
	logs        *servertest.LogBuffer
	log         *slog.Logger
}

func newRoomStack(t *testing.T, lease time.Duration) *roomStack {
	t.Helper()
	_, prefix := redistest.Client(t)
	s := &roomStack{url: redistest.URL(t), prefix: prefix, roomAddr: servertest.FreeAddr(t), lease: lease, logs: &servertest.LogBuffer{}}
	s.log = slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	lobby := servertest.Start(t, "lobby", servertest.Serve(lobbyservice.New, lobbyservice.Options{
		Core:    testCore(s.url, prefix+"-lobby", s.log.With("service", "lobby")),
		IdleTTL: time.Hour, PruneGrace: time.Second,
	}))
	s.lobbyAddr = lobby.Addr
	return s
}

// startRoom runs the Room service in-process on the stack's address.
func (s *roomStack) startRoom(t *testing.T) *servertest.Running {
	t.Helper()
	return s.startRoomAt(t, s.roomAddr)
}

// startRoomAt runs a Room replica in-process on addr.
func (s *roomStack) startRoomAt(t *testing.T, addr string) *servertest.Running {
	t.Helper()
	return servertest.Start(t, "room", servertest.Serve(roomservice.New, roomservice.Options{
		Core:      server.Core{GRPCAddr: addr, Redis: redisx.Config{URL: s.url}, Prefix: s.prefix + "-room", Logger: s.log.With("service", "room")},
		Shards:    4,
		LobbyAddr: s.lobbyAddr, IdleTTL: time.Hour, SessionLease: s.lease,
	}))
}

// startGateway serves the gateway in front of the stack, logging into the stack's buffer.
func (s *roomStack) startGateway(t *testing.T) {
	t.Helper()
	room := s.roomAddr
	if s.roomBackend != "" {
		room = s.roomBackend
	}
	g, err := New(context.Background(), Options{Backends: Backends{Lobby: s.lobbyAddr, Room: room}, Logger: s.log.With("service", "gateway")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	s.gw = srv.URL
}

// startReservations runs the reservations service for a test (logging nowhere unless o says).
func startReservations(t *testing.T, o reservationservice.Options) *servertest.Running {
	t.Helper()
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	return servertest.Start(t, "reservations", servertest.Serve(reservationservice.New, o))
}

// startLocks runs the locks service for a test.
func startLocks(t *testing.T, o locksservice.Options) *servertest.Running {
	t.Helper()
	return servertest.Start(t, "locks", servertest.Serve(locksservice.New, o))
}
