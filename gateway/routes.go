package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Every route the gateway serves is registered under its exact ServeMux pattern through a
// router, and needs the scope routeScopes gives that pattern. A pattern without an entry cannot
// be registered (New fails), and a request whose pattern has no entry is refused: the gateway is
// closed by default. Scopes depend on the route, never on what a path happens to contain (a
// lock named "replay-job" is an ordinary lock).

// Two scopes that are not a key's scopes.
const (
	// scopePublic routes are served to anyone, with or without a key.
	scopePublic = "public"
	// scopeAnyKey routes need a valid key (any scope) once keys are on.
	scopeAnyKey = "any key"
)

// routeScopes is the one table of what each route needs, keyed by the pattern the gateway
// registers. The REST patterns are openapi.json's paths (see restRoutes).
var routeScopes = map[string]string{
	// The gateway's own.
	"GET /{$}":          scopePublic,
	"GET /healthz":      scopePublic,
	"GET /metrics":      scopePublic,
	"GET /openapi.json": scopePublic,
	"GET /ui/":          scopePublic,
	// No route matched: answered 404 or 405 without calling anything.
	"/":                       scopeAnyKey,
	"POST /auth/socket-token": scopeAnyKey,
	// Reservations.
	"GET /reservations/{reservationId}":               "reservations:read",
	"POST /reservations/{reservationId}":              "reservations:write",
	"POST /reservations/{reservationId}/confirm":      "reservations:write",
	"POST /reservations/{reservationId}/release":      "reservations:write",
	"POST /reservations/{reservationId}/replay-alarm": ScopeAdmin,
	// Locks.
	"GET /locks/{resource}":          "locks:read",
	"POST /locks/{resource}/acquire": "locks:write",
	"POST /locks/{resource}/release": "locks:write",
	"POST /locks/{resource}/renew":   "locks:write",
	// Chat.
	"GET /chat/rooms/{room}/messages":  "chat:read",
	"POST /chat/rooms/{room}/messages": "chat:write",
	"GET /websocket":                   "chat:write",
	// Lobby and practice rooms.
	"GET /lobby/rooms":            "lobby:read",
	"GET /lobby/rooms/{code}":     "lobby:read",
	"POST /lobby/rooms":           "lobby:create",
	"DELETE /lobby/rooms/{code}":  "lobby:create",
	"GET /rooms/{code}/websocket": "lobby:join",
	// Operators (admin.go).
	"GET /admin/alarms":                             ScopeAdmin,
	"GET /admin/{domain}/alarms":                    ScopeAdmin,
	"GET /admin/{domain}/dead-letters":              ScopeAdmin,
	"POST /admin/{domain}/dead-letters/{id}/replay": ScopeAdmin,
	"DELETE /admin/{domain}/dead-letters/{id}":      ScopeAdmin,
	"GET /admin/{domain}/objects/{id}":              ScopeAdmin,
}

// router registers routes on one ServeMux, each under a pattern of routeScopes and behind the
// guard that checks that scope, and remembers which it registered.
type router struct {
	mux      *http.ServeMux
	guard    func(route string, h http.Handler) http.Handler
	patterns []string
	err      error
}

func newRouter(guard func(route string, h http.Handler) http.Handler) *router {
	return &router{mux: http.NewServeMux(), guard: guard}
}

// Handle registers h under pattern, which must have a scope in routeScopes.
func (rt *router) Handle(pattern string, h http.Handler) {
	if _, ok := routeScopes[pattern]; !ok {
		rt.err = errors.Join(rt.err, fmt.Errorf("route %q has no scope in routeScopes (gateway/routes.go)", pattern))
		return
	}
	if slices.Contains(rt.patterns, pattern) {
		rt.err = errors.Join(rt.err, fmt.Errorf("route %q is registered twice", pattern))
		return
	}
	rt.mux.Handle(pattern, rt.guard(pattern, h))
	rt.patterns = append(rt.patterns, pattern)
}

// HandleFunc registers h under pattern, which must have a scope in routeScopes.
func (rt *router) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	rt.Handle(pattern, http.HandlerFunc(h))
}

// registered reports whether pattern was registered.
func (rt *router) registered(pattern string) bool { return slices.Contains(rt.patterns, pattern) }

// route is the pattern a request matches, "" for none (a redirect to a cleaned path, which
// the ServeMux answers itself; the cleaned path is then routed and guarded like any other).
func (rt *router) route(r *http.Request) string {
	_, pattern := rt.mux.Handler(r)
	return pattern
}

// routeMethods are the methods the gateway's routes use, in the order an Allow header lists them.
var routeMethods = []string{http.MethodGet, http.MethodPost, http.MethodDelete}

// noRoute answers a request no route matched: 405 with Allow when the path is served for other
// methods, else 404.
func (rt *router) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range routeMethods {
		probe := *r
		probe.Method = m
		if p := rt.route(&probe); p != "" && p != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "Method not allowed.")
		return
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("No route %s %s.", r.Method, r.URL.Path))
}

// domainServices names the gRPC service (the OpenAPI tag) whose HTTP rules each domain serves.
var domainServices = map[string]string{
	"reservations": "ReservationService",
	"locks":        "LockService",
	"chat":         "ChatService",
	"lobby":        "LobbyService",
	"room":         "RoomService",
}

// restRoutes are the REST patterns of openapi.json ("POST /locks/{resource}/acquire"), by the
// OpenAPI tag of their service. The OpenAPI document is generated from the same HTTP rules
// (proto/vigil/gateway.yaml) as the grpc-gateway handlers, so the two cannot differ.
var restRoutes = sync.OnceValue(func() map[string][]string {
	var doc struct {
		Paths map[string]map[string]struct {
			Tags []string `json:"tags"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		panic("gateway: openapi/vigil.swagger.json: " + err.Error())
	}
	out := map[string][]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for _, tag := range op.Tags {
				out[tag] = append(out[tag], strings.ToUpper(method)+" "+path)
			}
		}
	}
	for _, ps := range out {
		sort.Strings(ps)
	}
	return out
})
