package auth

import (
	"maps"
	"slices"
)

// Every route the gateway serves is registered under its exact ServeMux pattern, and needs the
// scope this table gives that pattern. A pattern without an entry cannot be registered (the
// gateway fails to start), and a request whose pattern has no entry is refused: the gateway is
// closed by default. Scopes depend on the route, never on what a path happens to contain (a
// lock named "replay-job" is an ordinary lock). A part that adds a route adds its line here.

// Two scopes that are not a key's scopes.
const (
	// ScopePublic routes are served to anyone, with or without a key.
	ScopePublic = "public"
	// ScopeAnyKey routes need a valid key (any scope) once keys are on.
	ScopeAnyKey = "any key"
)

// routeScopes is the one table of what each route needs, keyed by the pattern the gateway
// registers. The REST patterns are openapi.json's paths (see restRoutes).
var routeScopes = map[string]string{
	// The gateway's own.
	"GET /{$}":          ScopePublic,
	"GET /healthz":      ScopePublic,
	"GET /metrics":      ScopePublic,
	"GET /openapi.json": ScopePublic,
	"GET /ui/":          ScopePublic,
	// No route matched: answered 404 or 405 without calling anything.
	"/":                       ScopeAnyKey,
	"POST /auth/socket-token": ScopeAnyKey,
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
	"GET /chat/rooms/{room}/presence":  "chat:read",
	"POST /chat/rooms/{room}/messages": "chat:write",
	"GET /websocket":                   "chat:write",
	// Lobby and practice rooms.
	"GET /lobby/rooms":               "lobby:read",
	"GET /lobby/rooms/{code}":        "lobby:read",
	"GET /lobby/rooms/{code}/people": "lobby:read",
	"POST /lobby/rooms":              "lobby:create",
	"DELETE /lobby/rooms/{code}":     "lobby:create",
	"GET /rooms/{code}/websocket":    "lobby:join",
	// Operators (gateway/rest/admin.go).
	"GET /admin/alarms":                             ScopeAdmin,
	"GET /admin/{domain}/alarms":                    ScopeAdmin,
	"GET /admin/{domain}/dead-letters":              ScopeAdmin,
	"POST /admin/{domain}/dead-letters/{id}/replay": ScopeAdmin,
	"DELETE /admin/{domain}/dead-letters/{id}":      ScopeAdmin,
	"GET /admin/{domain}/objects/{id}":              ScopeAdmin,
}

// Scope is the scope route (a ServeMux pattern) needs; false when the table has no line for it.
func Scope(route string) (string, bool) {
	s, ok := routeScopes[route]
	return s, ok
}

// Routes are every pattern of the table, sorted.
func Routes() []string { return slices.Sorted(maps.Keys(routeScopes)) }
