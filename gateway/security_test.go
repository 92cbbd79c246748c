package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/vigil-dev/vigil/gateway/auth"
	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"github.com/vigil-dev/vigil/gateway/socket"
	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/tlstest"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/reservations/service"

	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
)

// testKeys makes API keys with the given scopes, by name, and returns them with their secrets.
func testKeys(t *testing.T, scopes map[string]string) ([]APIKey, map[string]string) {
	t.Helper()
	var lines []string
	secrets := map[string]string{}
	for name, sc := range scopes {
		key, hash := NewAPIKey()
		secrets[name] = key
		lines = append(lines, name+" "+hash+" "+sc)
	}
	keys, err := ParseAPIKeys(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatalf("ParseAPIKeys: %v", err)
	}
	return keys, secrets
}

// secureOnly serves the security layer in front of next (no backends), the way New chains it.
func secureOnly(t *testing.T, s Security, next http.Handler) *httptest.Server {
	t.Helper()
	guard := auth.NewGuard(s, testLogger(t))
	router := newRouter(guard.Wrap)
	for pattern := range routeScopes {
		if pattern == "POST /auth/socket-token" {
			router.HandleFunc(pattern, guard.ServeSocketToken)
		} else {
			router.Handle(pattern, next)
		}
	}
	srv := httptest.NewServer(utf8Only(router.mux))
	t.Cleanup(srv.Close)
	return srv
}

// okHandler answers every request 200 {"ok": true}, and upgrades WebSocket requests with the
// library's own origin check switched off (the security layer does it).
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if socket.IsUpgrade(r) {
		if r.URL.Query().Has("access_token") {
			jsonapi.WriteError(w, http.StatusTeapot, "the socket token reached the route")
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		go func() {
			defer c.CloseNow()
			for {
				if _, _, err := c.Read(context.Background()); err != nil {
					return
				}
			}
		}()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"ok": true}`))
})

func dialWS(t *testing.T, url string, header ...string) (*websocket.Conn, int, error) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), &websocket.DialOptions{HTTPHeader: h})
	code := 0
	if res != nil {
		code = res.StatusCode
	}
	if c != nil {
		t.Cleanup(func() { _ = c.CloseNow() })
	}
	return c, code, err
}

// TestAuthScopesThroughTheGateway runs the reservations service behind a gateway with keys:
// no key or a wrong key gets 401, a key outside its scope 403, a key in scope reaches the
// service, replay needs the admin scope, and public routes need no key.
func TestAuthScopesThroughTheGateway(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.Client(t)
	svc := startReservations(t, service.Options{Core: testCore(redistest.URL(t), prefix, nil), Replay: true})
	keys, k := testKeys(t, map[string]string{
		"writer": "reservations:write", "reader": "reservations:read", "ops": "admin",
		"locker": "locks", "domain": "reservations",
	})
	g, err := New(context.Background(), Options{Backends: Backends{Reservations: svc.Addr}, Logger: testLogger(t),
		Security: Security{Keys: keys}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	t.Cleanup(func() { gw.Close(); g.Close() })
	bearer := func(name string) []string { return []string{"Authorization", "Bearer " + k[name]} }

	cases := []struct {
		name, method, path, body string
		header                   []string
		want                     int
	}{
		{"no key", "POST", "/reservations/auth-one", `{"ttlSeconds": 60}`, nil, 401},
		{"wrong key", "POST", "/reservations/auth-one", `{"ttlSeconds": 60}`, []string{"Authorization", "Bearer vk_not-a-key"}, 401},
		{"not bearer", "POST", "/reservations/auth-one", `{"ttlSeconds": 60}`, []string{"Authorization", "Basic " + k["writer"]}, 401},
		{"reader writes", "POST", "/reservations/auth-one", `{"ttlSeconds": 60}`, bearer("reader"), 403},
		{"other domain", "POST", "/reservations/auth-one", `{"ttlSeconds": 60}`, bearer("locker"), 403},
		{"writer writes", "POST", "/reservations/auth-one", `{"ttlSeconds": 60}`, bearer("writer"), 201},
		{"X-API-Key", "POST", "/reservations/auth-two", `{"ttlSeconds": 60}`, []string{"X-API-Key", k["writer"]}, 201},
		{"reader reads", "GET", "/reservations/auth-one", "", bearer("reader"), 200},
		{"writer reads", "GET", "/reservations/auth-one", "", bearer("writer"), 200},
		{"writer replays", "POST", "/reservations/auth-one/replay-alarm", `{"now": 1}`, bearer("writer"), 403},
		{"domain-wide key replays", "POST", "/reservations/auth-one/replay-alarm", `{"now": 1}`, bearer("domain"), 403},
		{"no key replays", "POST", "/reservations/auth-one/replay-alarm", `{"now": 1}`, nil, 401},
		{"admin replays", "POST", "/reservations/auth-one/replay-alarm", `{"now": 1}`, bearer("ops"), 200},
		{"domain-wide key confirms", "POST", "/reservations/auth-one/confirm", `{}`, bearer("domain"), 200},
		{"unknown route, no key", "GET", "/nowhere", "", nil, 401},
		{"unknown route, key", "GET", "/nowhere", "", bearer("reader"), 404},
		{"healthz", "GET", "/healthz", "", nil, 200},
		{"openapi", "GET", "/openapi.json", "", nil, 200},
		{"root", "GET", "/", "", nil, 200},
		{"socket token without key", "POST", "/auth/socket-token", "", nil, 401},
		{"socket token", "POST", "/auth/socket-token", "", bearer("reader"), 200},
	}
	for _, c := range cases {
		res := call(t, c.method, gw.URL+c.path, c.body, c.header...)
		if res.code != c.want {
			t.Errorf("%s: %s %s = %d %s, want %d", c.name, c.method, c.path, res.code, res.raw, c.want)
		}
		if res.code == 401 && res.body["error"] == nil {
			t.Errorf("%s: 401 body %s has no error sentence", c.name, res.raw)
		}
	}
	res := call(t, "POST", gw.URL+"/reservations/auth-one", `{"ttlSeconds": 60}`)
	if !strings.Contains(res.raw, "API key") {
		t.Errorf("401 body = %s, want it to say how to send a key", res.raw)
	}
}

// TestSocketTokens: a browser trades its key for a short-lived token and opens a socket with
// it; an expired, forged or misplaced token is refused, and the route never sees the token.
func TestSocketTokens(t *testing.T) {
	t.Parallel()
	keys, k := testKeys(t, map[string]string{"viewer": "chat", "reader": "reservations:read"})
	clk := clocktest.New(time.Unix(1_800_000_000, 0))
	srv := secureOnly(t, Security{Keys: keys, Now: clk.Now, SocketTokenTTL: time.Minute}, okHandler)

	token := func(name string) string {
		res := call(t, "POST", srv.URL+"/auth/socket-token", "", "X-API-Key", k[name])
		tok, _ := res.body["token"].(string)
		if res.code != 200 || tok == "" || num(t, res.body["expiresAt"]) != clk.Now().Add(time.Minute).UnixMilli() {
			t.Fatalf("POST /auth/socket-token = %d %s, want a token expiring in a minute", res.code, res.raw)
		}
		return tok
	}
	tok := token("viewer")
	if _, code, err := dialWS(t, srv.URL+"/websocket?room=lobby&access_token="+tok); err != nil {
		t.Fatalf("socket with a token = %d %v, want open", code, err)
	}
	if _, code, err := dialWS(t, srv.URL+"/websocket?room=lobby", "Authorization", "Bearer "+k["viewer"]); err != nil {
		t.Fatalf("socket with the key on the upgrade = %d %v, want open", code, err)
	}
	refused := map[string]string{
		"no token":         "/websocket?room=lobby",
		"forged":           "/websocket?access_token=" + tok[:len(tok)-4] + "AAAA",
		"garbage":          "/websocket?access_token=st1.e30",
		"other scopes":     "/websocket?access_token=" + token("reader"),
		"api key in query": "/websocket?access_token=" + k["viewer"],
	}
	for name, path := range refused {
		_, code, err := dialWS(t, srv.URL+path)
		want := http.StatusUnauthorized
		if name == "other scopes" {
			want = http.StatusForbidden
		}
		if err == nil || code != want {
			t.Errorf("socket with %s = %d %v, want %d", name, code, err, want)
		}
	}
	if res := call(t, "GET", srv.URL+"/reservations/abc?access_token="+token("reader"), ""); res.code != 401 {
		t.Errorf("a socket token on a plain request = %d, want 401 (tokens open sockets only)", res.code)
	}
	clk.Add(time.Minute)
	if _, code, err := dialWS(t, srv.URL+"/websocket?access_token="+tok); err == nil || code != 401 {
		t.Errorf("socket with an expired token = %d %v, want 401", code, err)
	}
}

// TestWebSocketOrigins: the gateway's AllowedOrigins reach the socket layer: a cross-site
// upgrade from an origin not on the list is refused with 403 before the room's hello (no
// backend is called); the gateway's own origin, listed origins and non-browser clients get
// past the check (to a room service that is down here: 503).
func TestWebSocketOrigins(t *testing.T) {
	t.Parallel()
	g, err := New(context.Background(), Options{
		Backends: Backends{Room: servertest.DownAddr(t)}, Logger: testLogger(t),
		Security: Security{AllowedOrigins: []string{"app.example.com", "https://*.vigil.test"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	host := strings.TrimPrefix(srv.URL, "http://")
	cases := []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{"http://" + host, true},
		{"https://app.example.com", true},
		{"https://ui.vigil.test", true},
		{"http://ui.vigil.test", false},
		{"https://evil.example", false},
		{"https://app.example.com.evil.example", false},
		{"null", false},
	}
	for _, c := range cases {
		var h []string
		if c.origin != "" {
			h = []string{"Origin", c.origin}
		}
		_, code, err := dialWS(t, srv.URL+"/rooms/abc123/websocket?role=viewer", h...)
		if c.ok && code != http.StatusServiceUnavailable {
			t.Errorf("upgrade from origin %q = %d %v, want past the origin check (503: no room service)", c.origin, code, err)
		}
		if !c.ok && code != http.StatusForbidden {
			t.Errorf("upgrade from origin %q = %d %v, want 403", c.origin, code, err)
		}
	}
}

// TestRateLimit: over its bucket a key gets 429 with Retry-After; another key and another
// address are not affected; the bucket refills with time.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	keys, k := testKeys(t, map[string]string{"a": "locks", "b": "locks"})
	clk := clocktest.New(time.Unix(1_800_000_000, 0))
	srv := secureOnly(t, Security{Keys: keys, Now: clk.Now, AnonymousScopes: []string{"locks:read"},
		Limits: Limits{Rate: 5, Burst: 5}}, okHandler)
	for i := range 5 {
		if res := call(t, "GET", srv.URL+"/locks/r1", "", "X-API-Key", k["a"]); res.code != 200 {
			t.Fatalf("request %d within the burst = %d %s, want 200", i+1, res.code, res.raw)
		}
	}
	req, _ := http.NewRequest("GET", srv.URL+"/locks/r1", nil)
	req.Header.Set("X-API-Key", k["a"])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), "Too many requests") {
		t.Fatalf("6th request = %d Retry-After %q %s, want 429 with Retry-After 1", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if res := call(t, "GET", srv.URL+"/locks/r1", "", "X-API-Key", k["b"]); res.code != 200 {
		t.Fatalf("another key = %d, want 200 (buckets are per key)", res.code)
	}
	if res := call(t, "GET", srv.URL+"/locks/r1", ""); res.code != 200 {
		t.Fatalf("anonymous from this address = %d, want 200 (its own bucket)", res.code)
	}
	if res := call(t, "GET", srv.URL+"/healthz", "", "X-API-Key", k["a"]); res.code != 200 {
		t.Fatalf("healthz over the limit = %d, want 200 (public routes are not limited)", res.code)
	}
	clk.Add(200 * time.Millisecond)
	if res := call(t, "GET", srv.URL+"/locks/r1", "", "X-API-Key", k["a"]); res.code != 200 {
		t.Fatalf("after a refill = %d, want 200", res.code)
	}
	// Wrong keys are counted against the address, so guessing keys is throttled too.
	for range 10 {
		call(t, "GET", srv.URL+"/locks/r1", "", "X-API-Key", "vk_guess")
	}
	if res := call(t, "GET", srv.URL+"/locks/r1", "", "X-API-Key", "vk_guess"); res.code != 429 {
		t.Fatalf("guessing keys = %d, want 429", res.code)
	}
}

// TestRoomQuota: a key may create RoomsPerHour rooms an hour.
func TestRoomQuota(t *testing.T) {
	t.Parallel()
	keys, k := testKeys(t, map[string]string{"host": "lobby"})
	clk := clocktest.New(time.Unix(1_800_000_000, 0))
	srv := secureOnly(t, Security{Keys: keys, Now: clk.Now, Limits: Limits{RoomsPerHour: 2}}, okHandler)
	for i := range 2 {
		if res := call(t, "POST", srv.URL+"/lobby/rooms", `{}`, "X-API-Key", k["host"]); res.code != 200 {
			t.Fatalf("room %d = %d, want through", i+1, res.code)
		}
	}
	res := call(t, "POST", srv.URL+"/lobby/rooms", `{}`, "X-API-Key", k["host"])
	if res.code != 429 || !strings.Contains(res.raw, "rooms") {
		t.Fatalf("third room in an hour = %d %s, want 429", res.code, res.raw)
	}
	if res := call(t, "GET", srv.URL+"/lobby/rooms", "", "X-API-Key", k["host"]); res.code != 200 {
		t.Fatalf("listing rooms over the quota = %d, want 200", res.code)
	}
	clk.Add(30 * time.Minute)
	if res := call(t, "POST", srv.URL+"/lobby/rooms", `{}`, "X-API-Key", k["host"]); res.code != 200 {
		t.Fatalf("room after half an hour = %d, want through", res.code)
	}
}

// TestSocketsPerRoom: SocketLimits.PerRoom reaches the socket layer: one socket over the
// room's cap is refused with 429 (a chat socket is upgraded before its room attaches, so a
// chat service that is down still holds the slot).
func TestSocketsPerRoom(t *testing.T) {
	t.Parallel()
	g, err := New(context.Background(), Options{
		Backends: Backends{Chat: servertest.DownAddr(t)}, Logger: testLogger(t),
		Sockets: SocketLimits{PerRoom: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	if _, code, err := dialWS(t, srv.URL+"/websocket?room=full"); err != nil {
		t.Fatalf("first socket = %d %v, want open", code, err)
	}
	if _, code, err := dialWS(t, srv.URL+"/websocket?room=full"); err == nil || code != http.StatusTooManyRequests {
		t.Fatalf("second socket in the room = %d %v, want 429", code, err)
	}
	if _, code, err := dialWS(t, srv.URL+"/websocket?room=other"); err != nil {
		t.Fatalf("socket in another room = %d %v, want open", code, err)
	}
}

// fakeReservations answers GetReservation, for TLS tests that need no Redis.
type fakeReservations struct {
	reservationsv1.UnimplementedReservationServiceServer
}

func (fakeReservations) GetReservation(_ context.Context, r *reservationsv1.GetReservationRequest) (*reservationsv1.GetReservationResponse, error) {
	return &reservationsv1.GetReservationResponse{Reservation: &reservationsv1.Reservation{ReservationId: r.GetReservationId(), Status: "missing"}}, nil
}

// TestGatewayTLS serves HTTPS at the gateway and calls a service that requires mutual TLS:
// a gateway with the client certificate gets through; one without gets 503.
func TestGatewayTLS(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	s, err := server.New(server.Options{Name: "fake-reservations", Logger: testLogger(t),
		TLS: server.TLS{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, CAFile: pki.CA}})
	if err != nil {
		t.Fatal(err)
	}
	reservationsv1.RegisterReservationServiceServer(s.GRPC(), fakeReservations{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	runGateway := func(backend server.TLS) string {
		ctx, cancel := context.WithCancel(context.Background())
		addrc := make(chan net.Addr, 1)
		errc := make(chan error, 1)
		go func() {
			errc <- Run(ctx, Options{Backends: Backends{Reservations: s.Addr().String()}, Logger: testLogger(t), Addr: "127.0.0.1:0",
				Security: Security{TLS: server.TLS{CertFile: pki.ServerCert, KeyFile: pki.ServerKey}, BackendTLS: backend}},
				func(a net.Addr) { addrc <- a })
		}()
		t.Cleanup(func() { cancel(); <-errc })
		select {
		case a := <-addrc:
			return a.String()
		case err := <-errc:
			t.Fatalf("gateway Run: %v", err)
		}
		return ""
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(pki.CA)
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(url string) (int, error) {
		res, err := client.Get(url)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}

	addr := runGateway(server.TLS{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey})
	if code, err := get("https://" + addr + "/reservations/tls-check"); err != nil || code != 200 {
		t.Fatalf("GET over HTTPS through mutual TLS = %d %v, want 200", code, err)
	}
	if code, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/healthz"); err == nil && code.StatusCode < 400 {
		t.Fatalf("plain HTTP to the HTTPS gateway = %d, want refused", code.StatusCode)
	}
	noCert := runGateway(server.TLS{CAFile: pki.CA})
	if code, err := get("https://" + noCert + "/reservations/tls-check"); err != nil || code != 503 {
		t.Fatalf("gateway without a client certificate = %d %v, want 503 (the service refuses it)", code, err)
	}
}

func TestSocketLimitsFromOptions(t *testing.T) {
	t.Parallel()
	g := &Gateway{o: Options{Sockets: SocketLimits{MaxFrameBytes: 1024, Rate: 2, Burst: 3}}}
	if l := g.socketLimits(24 << 10); l.MaxFrame != 1024 || l.Rate != 2 || l.Burst != 3 || l.SendQueue == 0 {
		t.Fatalf("socketLimits(24 KiB) = %+v, want the configured frame 1024, rate 2, burst 3 and defaults for the rest", l)
	}
	if l := (&Gateway{}).socketLimits(0); l.MaxFrame != 16<<10 || l.Rate != 20 || l.Burst != 40 {
		t.Fatalf("default socketLimits(0) = %+v, want 16 KiB, 20/s, 40", l)
	}
	if l := (&Gateway{}).socketLimits(24 << 10); l.MaxFrame != 24<<10 {
		t.Fatalf("default socketLimits(24 KiB) = %+v, want the route's 24 KiB", l)
	}
}

// TestFlags builds the deployed configuration from flags: keys from a file, HTTPS and backend
// TLS files, origins, request, socket and message limits; and refuses to start without keys
// when auth is required.
func TestFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, hash := NewAPIKey()
	keysFile := dir + "/api-keys"
	if err := os.WriteFile(keysFile, []byte("ci "+hash+" reservations:write,locks\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secretFile := dir + "/secret"
	if err := os.WriteFile(secretFile, []byte(strings.Repeat("s", 40)), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) (Options, error) {
		fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
		fill := Flags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("Parse(%q): %v", args, err)
		}
		var o Options
		return o, fill(&o)
	}
	o, err := parse("-require-auth", "-api-keys-file", keysFile, "-api-keys", "ops "+HashAPIKey("x")+" admin",
		"-anonymous-scopes", "lobby,chat", "-socket-token-secret-file", secretFile,
		"-allowed-origins", "app.example.com, *.example.org", "-tls-cert", "c.pem", "-tls-key", "k.pem",
		"-backend-tls-ca", "ca.pem", "-backend-tls-cert", "s.pem", "-backend-tls-key", "sk.pem",
		"-rate-limit", "7.5", "-rate-burst", "9", "-trusted-proxies", "10.0.0.0/8", "-rooms-per-hour", "-1",
		"-sockets-per-room", "50", "-socket-rate", "3", "-max-frame-bytes", "2048", "-max-grpc-message-bytes", "1000000")
	if err != nil {
		t.Fatalf("Flags: %v", err)
	}
	s := o.Security
	if len(s.Keys) != 2 || s.Keys[0].Name != "ci" || s.Keys[1].Name != "ops" {
		t.Errorf("Keys = %+v, want ci (file) then ops (flag)", s.Keys)
	}
	if strings.Join(s.AnonymousScopes, " ") != "lobby chat" || len(s.SocketTokenSecret) != 40 ||
		strings.Join(s.AllowedOrigins, " ") != "app.example.com *.example.org" {
		t.Errorf("anonymous %v, secret %d bytes, origins %v", s.AnonymousScopes, len(s.SocketTokenSecret), s.AllowedOrigins)
	}
	if s.TLS.CertFile != "c.pem" || s.TLS.KeyFile != "k.pem" || s.BackendTLS != (server.TLS{CAFile: "ca.pem", CertFile: "s.pem", KeyFile: "sk.pem"}) {
		t.Errorf("TLS %+v, backend %+v", s.TLS, s.BackendTLS)
	}
	l := s.Limits
	if l.Rate != 7.5 || l.Burst != 9 || len(l.TrustedProxies) != 1 || l.RoomsPerHour != -1 {
		t.Errorf("Limits = %+v", l)
	}
	if o.Sockets != (SocketLimits{PerRoom: 50, Rate: 3, MaxFrameBytes: 2048}) || o.MaxMessageBytes != 1000000 {
		t.Errorf("Sockets = %+v, MaxMessageBytes = %d", o.Sockets, o.MaxMessageBytes)
	}
	for _, bad := range [][]string{
		{"-require-auth"},
		{"-api-keys", "ci vk_plainkey locks"},
		{"-anonymous-scopes", "everything"},
		{"-rate-limit", "fast"},
		{"-trusted-proxies", "10.0.0.0/99"},
		{"-socket-token-secret-file", keysFile + ".missing"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("Flags(%q) = nil error, want an error", bad)
		}
	}
}

// TestConfiguredSocketLimitsReachChat: with MaxFrameBytes 512 and Burst 2, the chat
// socket refuses a third frame in a burst with an error frame, and closes with 1009 on a
// frame over 512 bytes.
func TestConfiguredSocketLimitsReachChat(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t)
	chat := env.startChat(t, "", nil)
	g, err := New(context.Background(), Options{Backends: Backends{Chat: chat.Addr}, Logger: testLogger(t),
		Sockets: SocketLimits{MaxFrameBytes: 512, Rate: 0.001, Burst: 2}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	t.Cleanup(func() { gw.Close(); g.Close() })
	w := dialChat(t, gw.URL, "room=limits&userId=u1")
	if f := w.next(); f["type"] != "history" {
		t.Fatalf("first frame = %v, want history", f)
	}
	for range 3 {
		w.say("hi")
	}
	var sawLimit bool
	for range 3 {
		if f := w.next(); f["type"] == "error" && strings.Contains(fmt.Sprint(f["error"]), "too fast") {
			sawLimit = true
		}
	}
	if !sawLimit {
		t.Fatal("a third frame in a burst of 2 got no rate-limit error frame")
	}
	w.send(`{"body": "` + strings.Repeat("x", 600) + `"}`)
	select {
	case err := <-w.closed:
		if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Fatalf("socket closed with %v, want 1009", err)
		}
	case <-time.After(wait.Deadline):
		t.Fatal("a 600-byte frame did not close the socket within 10s")
	}
}
