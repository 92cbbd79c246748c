package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-dev/vigil/gateway/auth"
	"github.com/vigil-dev/vigil/pkg/redistest"
	locksservice "github.com/vigil-dev/vigil/services/locks/service"
	"github.com/vigil-dev/vigil/services/reservations/service"
)

// allBackends names an address for every domain; connections are lazy, so nothing needs to
// listen there for the gateway to build its routes.
var allBackends = Backends{Reservations: "127.0.0.1:1", Locks: "127.0.0.1:1", Chat: "127.0.0.1:1", Lobby: "127.0.0.1:1", Room: "127.0.0.1:1"}

var wildcard = regexp.MustCompile(`\{([^}$.]+)(\.\.\.)?\}`)

// concretePath turns a pattern's path into a request path whose every wildcard holds a name
// with "replay" in it.
func concretePath(pattern string) (method, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		return "GET", "/nowhere" // the catch-all
	}
	path = strings.ReplaceAll(path, "{$}", "")
	path = wildcard.ReplaceAllString(path, "replay-x")
	if strings.HasSuffix(path, "/") && path != "/" {
		path += "index.html"
	}
	return method, path
}

// TestRouteScopes walks every route the gateway registers with every domain served: each has a
// scope in the one table, each entry of the table is a registered route, every route of
// openapi.json is served, and a request to the route is found under its own pattern. With keys
// on, a key holding only the route's scope passes the scope check and a key of another domain
// does not.
func TestRouteScopes(t *testing.T) {
	g, err := New(context.Background(), Options{Backends: allBackends, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	for _, p := range g.router.patterns {
		if _, ok := routeScopes[p]; !ok {
			t.Errorf("registered route %q has no scope", p)
		}
		method, path := concretePath(p)
		if got := g.router.route(httptest.NewRequest(method, path, nil)); got != p {
			t.Errorf("%s %s is routed to %q, want %q", method, path, got, p)
		}
	}
	for p := range routeScopes {
		if !g.router.registered(p) {
			t.Errorf("routeScopes lists %q, which the gateway does not register", p)
		}
	}
	for tag, ps := range restRoutes() {
		for _, p := range ps {
			if !g.router.registered(p) {
				t.Errorf("openapi.json's %s route %q is not served", tag, p)
			}
		}
	}

	var keysSpec = map[string]string{}
	for _, want := range routeScopes {
		if want != auth.ScopePublic && want != auth.ScopeAnyKey {
			keysSpec[strings.ReplaceAll(want, ":", "-")] = want
		}
	}
	keysSpec["stranger"] = "lobby:read"
	keys, secrets := testKeys(t, keysSpec)
	ga, err := New(context.Background(), Options{Backends: allBackends, Logger: testLogger(t), Security: Security{Keys: keys}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ga.Close)
	h := ga.Handler()
	serve := func(method, path, key string) int {
		req := httptest.NewRequest(method, path, strings.NewReader("{}"))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, p := range ga.router.patterns {
		want := routeScopes[p]
		method, path := concretePath(p)
		switch want {
		case auth.ScopePublic:
			if code := serve(method, path, ""); code == 401 || code == 403 {
				t.Errorf("public %s %s without a key = %d", method, path, code)
			}
			continue
		case auth.ScopeAnyKey:
			if code := serve(method, path, ""); code != 401 {
				t.Errorf("%s %s without a key = %d, want 401", method, path, code)
			}
			if code := serve(method, path, secrets["stranger"]); code == 401 || code == 403 {
				t.Errorf("%s %s with a key = %d, want it let through", method, path, code)
			}
			continue
		}
		if code := serve(method, path, secrets[strings.ReplaceAll(want, ":", "-")]); code == 401 || code == 403 {
			t.Errorf("%s %s with a %s key = %d, want it let through", method, path, want, code)
		}
		if want != "lobby:read" {
			if code := serve(method, path, secrets["stranger"]); code != 403 {
				t.Errorf("%s %s with a lobby:read key = %d, want 403 (it needs %s)", method, path, code, want)
			}
		}
	}
}

// TestUnlistedRouteIsRefused: a route missing from the table cannot be registered, and a
// request the router cannot place is refused.
func TestUnlistedRouteIsRefused(t *testing.T) {
	rt := newRouter(func(_ string, h http.Handler) http.Handler { return h })
	rt.HandleFunc("GET /secret-thing", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	if rt.err == nil || !strings.Contains(rt.err.Error(), `"GET /secret-thing" has no scope`) {
		t.Errorf("registering an unlisted route: err = %v, want it refused", rt.err)
	}
	if rt.registered("GET /secret-thing") {
		t.Error("an unlisted route was registered")
	}
	if _, ok := routeScopes[""]; ok {
		t.Error(`routeScopes has an entry for "" (requests that match no pattern must be refused)`)
	}
}

// TestReplayInNamesNeedsNoAdmin: a reservation, a lock and a chat room whose names contain
// "replay" are used with ordinary write keys through real services; only the replay-alarm route
// needs the admin scope.
func TestReplayInNamesNeedsNoAdmin(t *testing.T) {
	t.Parallel()
	url, prefix := redistest.URL(t), redistest.Prefix(t)
	log := testLogger(t)
	res := startReservations(t, service.Options{Core: testCore(url, prefix+"-r", nil), Replay: true})
	locks := startLocks(t, locksservice.Options{Core: testCore(url, prefix+"-k", log)})
	chat := newChatEnv(t).startChat(t, "", log)
	keys, k := testKeys(t, map[string]string{"writer": "reservations:write locks:write chat:write"})
	g, err := New(context.Background(), Options{Backends: Backends{Reservations: res.Addr, Locks: locks.Addr, Chat: chat.Addr},
		Logger: log, Security: Security{Keys: keys}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	t.Cleanup(func() { gw.Close(); g.Close() })
	key := []string{"Authorization", "Bearer " + k["writer"]}

	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/reservations/replay-seat", `{"ttlSeconds": 60}`, 201},
		{"GET", "/reservations/replay-seat", "", 200},
		{"POST", "/reservations/replay-seat/confirm", `{}`, 200},
		{"POST", "/reservations/replay-seat/replay-alarm", `{"now": 1}`, 403},
		{"POST", "/locks/replay-job/acquire", `{"owner": "w1", "ttlMs": 10000}`, 200},
		{"GET", "/locks/replay-job", "", 200},
		{"POST", "/locks/replay-job/release", `{"owner": "w1"}`, 200},
		{"POST", "/chat/rooms/replay/messages", `{"userId": "u1", "username": "ann", "body": "hi"}`, 201},
		{"GET", "/chat/rooms/replay/messages", "", 200},
	} {
		r := call(t, c.method, gw.URL+c.path, c.body, key...)
		if r.code != c.want {
			t.Errorf("%s %s with a write key = %d %s, want %d", c.method, c.path, r.code, r.raw, c.want)
		}
	}
	if r := call(t, "POST", gw.URL+"/locks/replay-job/acquire", `{"owner": "w1"}`, key...); r.body["acquired"] != true {
		t.Errorf("acquire replay-job = %s, want acquired", r.raw)
	}
	c, code, err := dialWS(t, gw.URL+"/websocket?room=replay&userId=u2", key...)
	if err != nil {
		t.Fatalf("socket to chat room replay with a write key = %d %v", code, err)
	}
	_ = c.CloseNow()
	if !slices.Contains(g.router.patterns, "GET /websocket") {
		t.Error("the chat socket route is not registered")
	}
}
