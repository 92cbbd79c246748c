package gateway

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/felixge/httpsnoop"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/pkg/tracing"
)

// What the gateway tells operators about its own traffic: requests by status, time to answer,
// requests shed under load, and open WebSocket connections in all and per room. Sockets are
// counted where their connection is hijacked and closed, so every WebSocket route is counted
// without the bridges doing anything.

var (
	httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_gateway_http_requests_total", Help: "HTTP requests answered, by method and status code.",
	}, []string{"method", "code"})
	httpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vigil_gateway_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request (WebSocket upgrades excluded), by method.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
	}, []string{"method"})
	shedRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_gateway_requests_shed_total",
		Help: "Requests refused to protect the system: 429 rate limited or over quota, 503 a backend unavailable.",
	}, []string{"reason"})
	socketsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vigil_gateway_sockets", Help: "Open WebSocket connections on this gateway, by route (chat, room).",
	}, []string{"route"})
	roomSockets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vigil_gateway_room_sockets", Help: "Open WebSocket connections on this gateway per room; a room's series goes when its last socket closes.",
	}, []string{"route", "room"})
)

func init() {
	prometheus.MustRegister(httpRequests, httpSeconds, shedRequests, socketsOpen, roomSockets)
}

// roomCounts keeps the per-room socket counts, so a room's series is deleted at zero.
var roomCounts = struct {
	sync.Mutex
	n map[[2]string]int
}{n: map[[2]string]int{}}

func socketOpened(route, room string) {
	socketsOpen.WithLabelValues(route).Inc()
	roomCounts.Lock()
	defer roomCounts.Unlock()
	k := [2]string{route, room}
	roomCounts.n[k]++
	roomSockets.WithLabelValues(route, room).Set(float64(roomCounts.n[k]))
}

func socketClosed(route, room string) {
	socketsOpen.WithLabelValues(route).Dec()
	roomCounts.Lock()
	defer roomCounts.Unlock()
	k := [2]string{route, room}
	if roomCounts.n[k]--; roomCounts.n[k] <= 0 {
		delete(roomCounts.n, k)
		roomSockets.DeleteLabelValues(route, room)
		return
	}
	roomSockets.WithLabelValues(route, room).Set(float64(roomCounts.n[k]))
}

// socketLabels names a WebSocket request's route and room: /rooms/{code}/websocket is a practice
// room, /websocket?room= a chat room.
func socketLabels(r *http.Request) (route, room string) {
	if code, ok := strings.CutPrefix(r.URL.Path, "/rooms/"); ok {
		return "room", strings.TrimSuffix(code, "/websocket")
	}
	room = r.URL.Query().Get("room")
	if room == "" {
		room = "general"
	}
	return "chat", room
}

// observe wraps the gateway's handler with its metrics and, when tracing is on, its spans.
func observe(next http.Handler) http.Handler {
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code := 0
		hijacked := false
		w = httpsnoop.Wrap(w, httpsnoop.Hooks{
			WriteHeader: func(next httpsnoop.WriteHeaderFunc) httpsnoop.WriteHeaderFunc {
				return func(c int) {
					if code == 0 {
						code = c
					}
					next(c)
				}
			},
			Write: func(next httpsnoop.WriteFunc) httpsnoop.WriteFunc {
				return func(b []byte) (int, error) {
					if code == 0 {
						code = http.StatusOK
					}
					return next(b)
				}
			},
			Hijack: func(next httpsnoop.HijackFunc) httpsnoop.HijackFunc {
				return func() (net.Conn, *bufio.ReadWriter, error) {
					conn, rw, err := next()
					if err != nil {
						return conn, rw, err
					}
					hijacked = true
					route, room := socketLabels(r)
					socketOpened(route, room)
					return &countedConn{Conn: conn, route: route, room: room}, rw, nil
				}
			},
		})
		next.ServeHTTP(w, r)
		if hijacked {
			httpRequests.WithLabelValues(r.Method, "101").Inc()
			return
		}
		if code == 0 {
			code = http.StatusOK
		}
		httpRequests.WithLabelValues(r.Method, strconv.Itoa(code)).Inc()
		httpSeconds.WithLabelValues(r.Method).Observe(time.Since(start).Seconds())
		switch code {
		case http.StatusTooManyRequests:
			shedRequests.WithLabelValues("rate_limited").Inc()
		case http.StatusServiceUnavailable:
			shedRequests.WithLabelValues("unavailable").Inc()
		}
	})
	return tracing.HTTPHandler(counted, "gateway")
}

// countedConn is a hijacked WebSocket connection that leaves the socket counts once, when the
// socket closes it.
type countedConn struct {
	net.Conn
	route, room string
	once        sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { socketClosed(c.route, c.room) })
	return c.Conn.Close()
}
