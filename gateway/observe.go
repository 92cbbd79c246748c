package gateway

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/felixge/httpsnoop"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/pkg/prom"

	"github.com/vigil-dev/vigil/pkg/tracing"
)

// What the gateway tells operators about its own traffic: requests by status, time to answer,
// and requests shed under load. Open sockets are counted by the socket layer
// (vigil_gateway_sockets{route}, vigil_gateway_socket_rooms{route}). No label takes user input:
// methods, status codes, routes and reasons are fixed sets.

// metrics are one gateway's HTTP collectors, created in New and registered on Options.Metrics.
type metrics struct {
	httpRequests *prometheus.CounterVec
	httpSeconds  *prometheus.HistogramVec
	shedRequests *prometheus.CounterVec
}

// newMetrics creates the gateway's HTTP collectors and registers them on reg. A collector
// already registered there (a second gateway on the same registry) is reused, so both
// gateways count into the same series.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_gateway_http_requests_total", Help: "HTTP requests answered, by method and status code.",
		}, []string{"method", "code"}),
		httpSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vigil_gateway_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request (WebSocket upgrades excluded), by method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
		}, []string{"method"}),
		shedRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_gateway_requests_shed_total",
			Help: "Requests refused to protect the system: 429 rate limited or over quota, 503 a backend unavailable.",
		}, []string{"reason"}),
	}
	var errs [3]error
	m.httpRequests, errs[0] = prom.Register(reg, m.httpRequests)
	m.httpSeconds, errs[1] = prom.Register(reg, m.httpSeconds)
	m.shedRequests, errs[2] = prom.Register(reg, m.shedRequests)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return m, nil
}

// observe wraps the gateway's handler with its metrics and, when tracing is on, its spans.
func (m *metrics) observe(next http.Handler) http.Handler {
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
					hijacked = err == nil
					return conn, rw, err
				}
			},
		})
		next.ServeHTTP(w, r)
		if hijacked {
			m.httpRequests.WithLabelValues(r.Method, "101").Inc()
			return
		}
		if code == 0 {
			code = http.StatusOK
		}
		m.httpRequests.WithLabelValues(r.Method, strconv.Itoa(code)).Inc()
		m.httpSeconds.WithLabelValues(r.Method).Observe(time.Since(start).Seconds())
		switch code {
		case http.StatusTooManyRequests:
			m.shedRequests.WithLabelValues("rate_limited").Inc()
		case http.StatusServiceUnavailable:
			m.shedRequests.WithLabelValues("unavailable").Inc()
		}
	})
	return tracing.HTTPHandler(counted, "gateway")
}
