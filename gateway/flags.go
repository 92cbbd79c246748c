package gateway

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-dev/vigil/gateway/auth"
	"github.com/vigil-dev/vigil/gateway/socket"
	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/server"
)

// Flags defines the gateway's security and limit flags on fs, each with an environment
// fallback, and returns a function that fills an Options' Security, Sockets and
// MaxMessageBytes after fs is parsed.
func Flags(fs *flag.FlagSet) func(o *Options) error {
	keysFile := config.String(fs, "api-keys-file", "VIGIL_API_KEYS_FILE", "", "file of API keys: name sha256:<hash> scopes (see docs/SECURITY.md)")
	keys := config.String(fs, "api-keys", "VIGIL_API_KEYS", "", "API keys in the file's format, ';' between keys")
	require := config.Bool(fs, "require-auth", "VIGIL_REQUIRE_AUTH", false, "refuse to start without API keys")
	anon := config.String(fs, "anonymous-scopes", "VIGIL_ANONYMOUS_SCOPES", "", "scopes of requests without a key, comma-separated")
	secretFile := config.String(fs, "socket-token-secret-file", "VIGIL_SOCKET_TOKEN_SECRET_FILE", "", "file whose bytes sign socket tokens (same on every replica); default random")
	ttl := config.Duration(fs, "socket-token-ttl", "VIGIL_SOCKET_TOKEN_TTL", time.Minute, "lifetime of a socket token")
	origins := config.String(fs, "allowed-origins", "VIGIL_ALLOWED_ORIGINS", "", "other origins that may open WebSockets, comma-separated host patterns")
	cert := config.String(fs, "tls-cert", "VIGIL_GATEWAY_TLS_CERT", "", "HTTPS certificate (PEM); empty: plain HTTP")
	key := config.String(fs, "tls-key", "VIGIL_GATEWAY_TLS_KEY", "", "HTTPS key (PEM)")
	clientCA := config.String(fs, "tls-client-ca", "VIGIL_GATEWAY_TLS_CLIENT_CA", "", "require HTTPS client certificates from this CA")
	bCA := config.String(fs, "backend-tls-ca", server.EnvTLSCA, "", "CA (PEM) that signs the services' certificates; empty: plaintext gRPC")
	bCert := config.String(fs, "backend-tls-cert", server.EnvTLSCert, "", "client certificate (PEM) for mutual TLS to the services")
	bKey := config.String(fs, "backend-tls-key", server.EnvTLSKey, "", "client key (PEM) for mutual TLS to the services")
	bName := config.String(fs, "backend-tls-server-name", server.EnvTLSServerName, "", "name expected in the services' certificates; default the dialled host")
	rate := config.String(fs, "rate-limit", "VIGIL_RATE_LIMIT", "0", "requests a second per key or client address; 0 default (100 with keys), -1 off")
	burst := config.Int(fs, "rate-burst", "VIGIL_RATE_BURST", 0, "burst of the rate limit; 0: twice the rate")
	proxies := config.String(fs, "trusted-proxies", "VIGIL_TRUSTED_PROXIES", "", "CIDRs of proxies whose X-Forwarded-For is believed, comma-separated")
	rooms := config.String(fs, "rooms-per-hour", "VIGIL_ROOMS_PER_HOUR", "0", "rooms one key may create an hour; 0 default (30 with keys), -1 off")
	perRoom := config.Int(fs, "sockets-per-room", "VIGIL_SOCKETS_PER_ROOM", 0, "WebSockets per room on this gateway; 0 default (10000), -1 off")
	sockRate := config.String(fs, "socket-rate", "VIGIL_SOCKET_RATE", "0", "frames a second one socket may send; 0 default (20)")
	sockBurst := config.Int(fs, "socket-burst", "VIGIL_SOCKET_BURST", 0, "frame burst of one socket; 0 default (40)")
	frame := config.Int(fs, "max-frame-bytes", "VIGIL_MAX_FRAME_BYTES", 0, "largest WebSocket frame a client may send; 0 default (16 KiB)")
	msg := config.Int(fs, "max-grpc-message-bytes", "VIGIL_MAX_GRPC_MESSAGE_BYTES", 0, "largest gRPC message to or from a service; 0 default (4 MiB)")
	return func(o *Options) error {
		s := &o.Security
		var err error
		if s.Keys, err = LoadAPIKeys(*keysFile, *keys); err != nil {
			return err
		}
		if *require && len(s.Keys) == 0 {
			return errors.New("require-auth is set but no API key is configured (api-keys-file or VIGIL_API_KEYS)")
		}
		s.AnonymousScopes = splitList(*anon)
		for _, sc := range s.AnonymousScopes {
			if !auth.ValidScope(sc) {
				return fmt.Errorf("anonymous-scopes: unknown scope %q", sc)
			}
		}
		if *secretFile != "" {
			if s.SocketTokenSecret, err = os.ReadFile(*secretFile); err != nil {
				return fmt.Errorf("socket token secret: %w", err)
			}
			if len(s.SocketTokenSecret) < 32 {
				return errors.New("socket token secret: use at least 32 bytes")
			}
		}
		s.SocketTokenTTL = *ttl
		s.AllowedOrigins = splitList(*origins)
		s.TLS = server.TLS{CertFile: *cert, KeyFile: *key, CAFile: *clientCA}
		s.BackendTLS = server.TLS{CAFile: *bCA, CertFile: *bCert, KeyFile: *bKey, ServerName: *bName}
		l, sock := &s.Limits, &o.Sockets
		for name, f := range map[string]struct {
			s   string
			dst *float64
		}{"rate-limit": {*rate, &l.Rate}, "rooms-per-hour": {*rooms, &l.RoomsPerHour}, "socket-rate": {*sockRate, &sock.Rate}} {
			if *f.dst, err = strconv.ParseFloat(f.s, 64); err != nil {
				return fmt.Errorf("%s: want a number, got %q", name, f.s)
			}
		}
		for _, c := range splitList(*proxies) {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return fmt.Errorf("trusted-proxies: %w", err)
			}
			l.TrustedProxies = append(l.TrustedProxies, p)
		}
		l.Burst = *burst
		sock.PerRoom, sock.Burst, sock.MaxFrameBytes = *perRoom, *sockBurst, int64(*frame)
		o.MaxMessageBytes = *msg
		return nil
	}
}

// splitList splits a comma- or space-separated list, dropping blanks.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// SocketLimits bound the gateway's WebSockets (chat and practice rooms): each room's count on
// this gateway and each socket's frames. Every zero value has the default in its comment.
type SocketLimits struct {
	// PerRoom is how many WebSockets this gateway holds for one chat or practice room; one more
	// is refused with 429 before the upgrade. Default 10,000; negative: no cap.
	PerRoom int
	// Rate and Burst bound the frames a second one socket may send (extra frames get an error
	// frame and are dropped). Defaults 20 and 40.
	Rate  float64
	Burst int
	// MaxFrameBytes is the largest frame a client may send; larger closes the socket with 1009.
	// Default 16 KiB, or a route's own larger size (a practice room's formations: 24 KiB).
	MaxFrameBytes int64
}

// socketLimits are Options.Sockets in the socket layer's terms. A route whose frames are
// larger by nature passes its own frame limit, used unless MaxFrameBytes is set.
func (g *Gateway) socketLimits(routeMaxFrame int64) socket.Limits {
	l := g.o.Sockets
	frame := l.MaxFrameBytes
	if frame <= 0 {
		frame = routeMaxFrame
	}
	return socket.Limits{MaxFrame: frame, Rate: l.Rate, Burst: l.Burst}.WithDefaults()
}

// socketRegistry is the gateway's one socket registry, with the security options' origins and
// the socket limits' per-room cap.
func (g *Gateway) socketRegistry() (*socket.Registry, error) {
	return socket.NewRegistry(socket.Options{
		OriginPatterns: g.o.Security.AllowedOrigins,
		MaxPerRoom:     g.o.Sockets.PerRoom,
		OnRefuse: func(r *http.Request, reason string) {
			g.log.InfoContext(r.Context(), "socket refused", "event", "refused", "reason", reason,
				"method", r.Method, "path", r.URL.Path, "client", g.guard.ClientAddr(r))
		},
		Metrics: g.o.Metrics,
	})
}
