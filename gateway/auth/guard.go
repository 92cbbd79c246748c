package auth

import (
	"crypto/rand"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/vigil-dev/vigil/pkg/server"
)

// Security is the edge's protection: API keys and scopes, TLS on the listener and to the
// services, WebSocket origin checks, and abuse limits. The zero value is the development
// mode: no keys (every route open), plaintext, same-origin sockets, no request rate limit.
// docs/SECURITY.md describes the threat model and how to configure each part.
type Security struct {
	// Keys are the API keys the gateway accepts (stored as hashes; see ParseAPIKeys). Empty:
	// authentication is off.
	Keys []APIKey
	// AnonymousScopes are what a request without a key may do when Keys is set, e.g.
	// "lobby:read lobby:join" for a public practice-room site. Default none.
	AnonymousScopes []string
	// SocketTokenTTL is how long a socket token from POST /auth/socket-token opens sockets.
	// Default 1 minute.
	SocketTokenTTL time.Duration
	// SocketTokenSecret signs socket tokens; replicas behind one balancer need the same one.
	// Default: random per process.
	SocketTokenSecret []byte
	// AllowedOrigins are the browser origins, besides the gateway's own host, that may open
	// WebSockets: host patterns ("app.example.com", "*.example.com") or scheme://host patterns,
	// as path.Match globs. A cross-site upgrade from any other origin gets 403. Requests
	// without an Origin header (programs, not browsers) are not checked.
	AllowedOrigins []string
	// TLS serves HTTPS with CertFile/KeyFile (and, with CAFile, asks clients for certificates
	// from that CA). Default: plaintext HTTP.
	TLS server.TLS
	// BackendTLS secures the gRPC links to the services: CAFile verifies them, CertFile/KeyFile
	// are presented for mutual TLS. Default: plaintext.
	BackendTLS server.TLS
	// Limits bound what one client may do.
	Limits Limits
	// Now is the clock for socket tokens and rate limits. Default time.Now.
	Now func() time.Time
}

// Guard is the check the router puts in front of every route: authentication, the route's
// scope and rate limits. The route is known when it is registered, so a request is routed
// once, by the ServeMux. WebSocket origins and the sockets per room are checked by the socket
// layer (gateway/socket) when a route admits an upgrade.
type Guard struct {
	auth      bool
	lim       Limits
	a         *authenticator
	requests  *limiterSet
	roomQuota *limiterSet
	log       *slog.Logger
}

// NewGuard builds the guard of s; refusals are logged on log.
func NewGuard(s Security, log *slog.Logger) *Guard {
	auth := len(s.Keys) > 0
	lim := s.Limits.WithDefaults(auth)
	now := s.Now
	if now == nil {
		now = time.Now
	}
	secret := s.SocketTokenSecret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	ttl := s.SocketTokenTTL
	if ttl <= 0 {
		ttl = time.Minute
	}
	return &Guard{
		auth: auth, lim: lim, log: log,
		a:         &authenticator{keys: s.Keys, anonymous: s.AnonymousScopes, secret: secret, tokenTTL: ttl, now: now},
		requests:  newLimiterSet(lim.Rate, lim.Burst, now),
		roomQuota: newLimiterSet(lim.RoomsPerHour/3600, int(math.Ceil(lim.RoomsPerHour)), now),
	}
}

// ClientAddr is the request's client address, as the rate limits see it (Limits.TrustedProxies).
func (gd *Guard) ClientAddr(r *http.Request) string { return clientAddr(r, gd.lim.TrustedProxies) }

// Wrap guards next, the handler of route (a pattern of the route table, see Scope).
func (gd *Guard) Wrap(route string, next http.Handler) http.Handler {
	auth, lim, a, requests, roomQuota := gd.auth, gd.lim, gd.a, gd.requests, gd.roomQuota
	want, _ := Scope(route) // the router registers only routes with a scope
	if want == ScopePublic {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &principal{name: "", scopes: []string{ScopeAdmin}}
		var authErr error
		if auth {
			if p, authErr = a.identify(r, route); authErr != nil {
				p = &principal{}
			}
		}
		// The client's address and the limiter id are worked out only when something uses them:
		// a limiter is on, or a refusal is logged.
		client, id := "", ""
		identify := func() {
			if client == "" {
				client = clientAddr(r, lim.TrustedProxies)
				id = "addr:" + clientID(client)
				if authErr == nil && p.name != "" {
					id = "key:" + p.name
				}
			}
		}
		refused := func(reason string) {
			identify()
			gd.log.InfoContext(r.Context(), "request refused", "event", "refused", "reason", reason,
				"method", r.Method, "path", r.URL.Path, "key", p.name, "client", client)
		}
		if requests != nil {
			identify()
		}
		if ok, wait := requests.allow(id); !ok {
			refused("rate")
			tooMany(w, wait, "requests")
			return
		}
		if authErr != nil {
			refused("bad_credentials")
			refuseUnauthenticated(w)
			return
		}
		if auth && !p.allowed(want) {
			if p.name == "" {
				refused("no_key")
				refuseUnauthenticated(w)
				return
			}
			refused("scope")
			refuseScope(w, want)
			return
		}
		if route == "POST /auth/socket-token" {
			r = r.WithContext(withPrincipal(r.Context(), p))
		}
		if route == "POST /lobby/rooms" && roomQuota != nil {
			identify()
			if ok, wait := roomQuota.allow(id); !ok {
				refused("room_quota")
				tooMany(w, wait, "rooms created by this key")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
