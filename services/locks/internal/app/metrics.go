package app

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/vigil-dev/vigil/pkg/prom"
)

// Metrics are the lock waits and hold times, for operators: how long callers that asked to
// wait waited, and how long locks stayed held from grant to release (timed by the replica
// that granted them).
type Metrics struct {
	wait    *prometheus.HistogramVec
	hold    *prometheus.HistogramVec
	session *prometheus.HistogramVec

	// sessionOK holds the session histogram's series of OK answers, by call, once used: the
	// vector's WithLabelValues hashes and looks up its labels on every call, which a session
	// pays twice a lock pair.
	sessionOK [len(sessionCalls)]atomic.Pointer[prometheus.Observer]
}

// sessionCalls are the calls of a Session stream, in sessionOK's order.
var sessionCalls = [...]string{"acquire", "release", "renew"}

// NewMetrics registers the lock metrics on reg. A registry that already holds them (several
// lock services in one process) keeps the first ones, which this Metrics then shares.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vigil_lock_wait_seconds",
			Help:    "Time an acquire that asked to wait spent waiting, by result (acquired, timed_out).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"result"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vigil_lock_hold_seconds",
			Help:    "Time a lock was held from its grant to its release, measured by the granting replica.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"ended"}),
		session: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vigil_lock_session_call_seconds",
			Help: "Time to answer a call on a Session stream (the gateway's REST lock writes ride these), " +
				"by call (acquire, release, renew) and gRPC code; gRPC's own metrics count only the stream.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"call", "grpc_code"}),
	}
	// A collector that clashes is left unregistered: locks still work, unobserved.
	if prev, err := prom.Register(reg, m.wait); err == nil {
		m.wait = prev
	}
	if prev, err := prom.Register(reg, m.hold); err == nil {
		m.hold = prev
	}
	if prev, err := prom.Register(reg, m.session); err == nil {
		m.session = prev
	}
	return m
}

func (m *Metrics) waited(acquired bool, d time.Duration) {
	if m == nil {
		return
	}
	result := "acquired"
	if !acquired {
		result = "timed_out"
	}
	m.wait.WithLabelValues(result).Observe(d.Seconds())
}

func (m *Metrics) held(d time.Duration) {
	if m == nil {
		return
	}
	m.hold.WithLabelValues("released").Observe(d.Seconds())
}

// SessionCall records one answered call of a Session stream.
func (m *Metrics) SessionCall(call string, code codes.Code, d time.Duration) {
	if m == nil {
		return
	}
	i := slices.Index(sessionCalls[:], call)
	if code != codes.OK || i < 0 {
		m.session.WithLabelValues(call, code.String()).Observe(d.Seconds())
		return
	}
	o := m.sessionOK[i].Load()
	if o == nil {
		series := m.session.WithLabelValues(call, code.String())
		o = &series
		m.sessionOK[i].Store(o)
	}
	(*o).Observe(d.Seconds())
}
