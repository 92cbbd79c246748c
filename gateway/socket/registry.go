// Package socket is the gateway's one socket layer: every WebSocket of every route (chat
// rooms, practice rooms) is admitted, upgraded, counted, limited and closed here.
//
//   - Admit checks an upgrade before the route does any work: a WebSocket request (426
//     otherwise), from an allowed origin (403; coder/websocket's own OriginPatterns check),
//     with room for one more socket in its room on this gateway (429), while the gateway is
//     not shutting down (503). It holds the room's slot in a Ticket.
//   - Ticket.Accept upgrades. The socket keeps the slot until it closes; the registry then
//     gives the slot back and updates vigil_gateway_sockets{route}.
//   - Shutdown closes every socket with 1001 (going away) and waits until they are closed:
//     the gateway's graceful shutdown runs it inside its drain deadline, before Run returns.
//     Clients reconnect (to another gateway) and resume.
//
// A room is a Key: the route ("chat", "room") and the room's name. Names are user input: they
// key the counts, never a metric label.
package socket

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/pkg/prom"
)

// Key names a room: the route that serves it and its name.
type Key struct {
	Route string // "chat" or "room": a fixed set, used as a metric label
	Name  string // the room's name or code: user input, never a label
}

// Options configure a Registry. Every zero value has the default in its comment.
type Options struct {
	// OriginPatterns are the browser origins, besides the request's own host, that may open
	// sockets: coder/websocket's AcceptOptions.OriginPatterns (path.Match globs on the host,
	// or on scheme://host when the pattern has "://"). Requests without an Origin header
	// (programs, not browsers) are not checked. Default none.
	OriginPatterns []string
	// MaxPerRoom is how many sockets this gateway holds for one room; one more is refused
	// with 429 before the upgrade. Default 10,000; negative: no cap.
	MaxPerRoom int
	// OnRefuse, when set, is told why an upgrade was refused ("origin", "room_sockets",
	// "shutting_down"), for the gateway's log.
	OnRefuse func(r *http.Request, reason string)
	// Metrics is where the registry's gauges (vigil_gateway_sockets{route},
	// vigil_gateway_socket_rooms{route}) are registered; gauges already registered there are
	// shared. Default prometheus.DefaultRegisterer.
	Metrics prometheus.Registerer
}

// Registry holds every socket of the gateway.
type Registry struct {
	o Options
	m *metrics

	mu       sync.Mutex
	rooms    map[Key]int
	open     map[*entry]struct{}
	closing  bool
	drained  chan struct{} // closed when closing and open is empty
	shutOnce sync.Once

	flushers flusherPool // write the sockets' bursts (Conn.SendFrames)
}

// entry is one admitted socket, from Admit until its connection closes.
type entry struct {
	key  Key
	conn *Conn
	done chan struct{}
}

// metrics are one registry's collectors, registered on Options.Metrics.
type metrics struct {
	open  *prometheus.GaugeVec // vigil_gateway_sockets{route}
	rooms *prometheus.GaugeVec // vigil_gateway_socket_rooms{route}
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_gateway_sockets", Help: "Open WebSocket connections on this gateway, by route (chat, room).",
		}, []string{"route"}),
		rooms: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_gateway_socket_rooms", Help: "Rooms with at least one open WebSocket on this gateway, by route (chat, room).",
		}, []string{"route"}),
	}
	var err error
	if m.open, err = prom.Register(reg, m.open); err != nil {
		return nil, err
	}
	if m.rooms, err = prom.Register(reg, m.rooms); err != nil {
		return nil, err
	}
	return m, nil
}

// NewRegistry returns an empty registry, its metrics registered on o.Metrics.
func NewRegistry(o Options) (*Registry, error) {
	if o.MaxPerRoom == 0 {
		o.MaxPerRoom = 10_000
	}
	if o.Metrics == nil {
		o.Metrics = prometheus.DefaultRegisterer
	}
	m, err := newMetrics(o.Metrics)
	if err != nil {
		return nil, err
	}
	return &Registry{o: o, m: m, rooms: map[Key]int{}, open: map[*entry]struct{}{}, drained: make(chan struct{})}, nil
}

// Ticket is an admitted upgrade holding its room's slot: Accept it or Release it.
type Ticket struct {
	reg      *Registry
	e        *entry
	released sync.Once
}

// Admit checks an upgrade request before the route does any work (see the package comment).
// On a refusal it has answered the request and returns false.
func (g *Registry) Admit(w http.ResponseWriter, r *http.Request, key Key) (*Ticket, bool) {
	if !IsUpgrade(r) {
		RefuseNonWebSocket(w)
		return nil, false
	}
	if !g.originAllowed(r) {
		g.refused(r, "origin")
		WriteError(w, http.StatusForbidden, "WebSockets from this page's origin are not allowed here.")
		return nil, false
	}
	g.mu.Lock()
	switch {
	case g.closing:
		g.mu.Unlock()
		g.refused(r, "shutting_down")
		WriteError(w, http.StatusServiceUnavailable, "This gateway is shutting down; connect again.")
		return nil, false
	case g.o.MaxPerRoom > 0 && g.rooms[key] >= g.o.MaxPerRoom:
		g.mu.Unlock()
		g.refused(r, "room_sockets")
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusTooManyRequests, "Too many sockets in this room; try again in 1 s.")
		return nil, false
	}
	if g.rooms[key] == 0 {
		g.m.rooms.WithLabelValues(key.Route).Inc()
	}
	g.rooms[key]++
	e := &entry{key: key, done: make(chan struct{})}
	g.open[e] = struct{}{}
	g.mu.Unlock()
	g.m.open.WithLabelValues(key.Route).Inc()
	return &Ticket{reg: g, e: e}, true
}

func (g *Registry) refused(r *http.Request, reason string) {
	if g.o.OnRefuse != nil {
		g.o.OnRefuse(r, reason)
	}
}

// originAllowed runs the library's own origin check (OriginPatterns) before the route does
// any work: a route that opens a backend session before it upgrades (a practice room answers
// its hello first) must not do so for a page the upgrade would refuse. The check is
// websocket.Accept itself on a writer that cannot be hijacked: it stops right after the
// origin check, with 403 for a refused origin.
func (g *Registry) originAllowed(r *http.Request) bool {
	if r.Header.Get("Origin") == "" {
		return true
	}
	probe := &statusProbe{header: http.Header{}}
	_, _ = websocket.Accept(probe, r, &websocket.AcceptOptions{OriginPatterns: g.o.OriginPatterns})
	return probe.code != http.StatusForbidden
}

// statusProbe is a ResponseWriter that only records the status code.
type statusProbe struct {
	header http.Header
	code   int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int) {
	if p.code == 0 {
		p.code = code
	}
}

// Release gives the slot back without a socket (the route refused the request after Admit).
// It does nothing after a successful Accept.
func (t *Ticket) Release() {
	t.released.Do(func() { t.reg.remove(t.e) })
}

// Accept upgrades the request with lim (defaults applied) and starts the socket's keep-alive.
// The caller must then run one goroutine that calls Read until it fails, and may return from
// the handler: the socket does not hold the HTTP server's buffers. On an error the slot is
// released and the response written.
func (t *Ticket) Accept(w http.ResponseWriter, r *http.Request, lim Limits) (*Conn, error) {
	lim = lim.WithDefaults()
	hw := &hijacker{ResponseWriter: w, onClose: t.Release}
	c, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		OriginPatterns:  t.reg.o.OriginPatterns,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		t.Release()
		return nil, err
	}
	conn := newConn(c, hw.conn, &lim)
	conn.entry = t.e
	conn.flushers = &t.reg.flushers
	conn.done = t.e.done
	t.reg.mu.Lock()
	t.e.conn = conn
	closing := t.reg.closing
	t.reg.mu.Unlock()
	if closing {
		go conn.Close(GoingAway, "gateway shutting down")
	}
	return conn, nil
}

func (g *Registry) remove(e *entry) {
	g.mu.Lock()
	if _, ok := g.open[e]; !ok {
		g.mu.Unlock()
		return
	}
	delete(g.open, e)
	if g.rooms[e.key]--; g.rooms[e.key] <= 0 {
		delete(g.rooms, e.key)
		g.m.rooms.WithLabelValues(e.key.Route).Dec()
	}
	if g.closing && len(g.open) == 0 {
		close(g.drained)
	}
	g.mu.Unlock()
	g.m.open.WithLabelValues(e.key.Route).Dec()
	close(e.done)
}

// Count is how many sockets the room has on this gateway.
func (g *Registry) Count(key Key) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rooms[key]
}

// Open is how many sockets this gateway holds.
func (g *Registry) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.open)
}

// Shutdown refuses new sockets, closes every socket with 1001 (going away) and waits until
// all are closed or ctx ends; then it drops what is left without a close handshake.
func (g *Registry) Shutdown(ctx context.Context) error {
	g.mu.Lock()
	g.shutOnce.Do(func() {
		g.closing = true
		if len(g.open) == 0 {
			close(g.drained)
		}
	})
	conns := make([]*Conn, 0, len(g.open))
	for e := range g.open {
		if e.conn != nil {
			conns = append(conns, e.conn)
		}
	}
	g.mu.Unlock()
	for _, c := range conns {
		go c.Close(GoingAway, "gateway shutting down")
	}
	select {
	case <-g.drained:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	for e := range g.open {
		if e.conn != nil {
			conns = append(conns, e.conn)
		}
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.CloseNow()
	}
	return errors.New("sockets still open at the drain deadline were dropped")
}

// IsUpgrade reports whether r asks to upgrade to a WebSocket.
func IsUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// RefuseNonWebSocket answers a plain HTTP request to a socket route with 426.
func RefuseNonWebSocket(w http.ResponseWriter) {
	w.Header().Set("Upgrade", "websocket")
	w.Header().Set("Connection", "Upgrade")
	WriteError(w, http.StatusUpgradeRequired, "This route is a WebSocket: connect with a WebSocket client.")
}

// WriteError answers with the gateway's error body, {"error": "<a sentence>"}.
func WriteError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{msg})
}
