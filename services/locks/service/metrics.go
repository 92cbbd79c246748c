package service

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/services/locks/internal/domain"
	"github.com/vigil-dev/vigil/services/locks/internal/transport"
)

// Lock waits and hold times, for operators: how long callers that asked to wait waited, and how
// long locks stayed held from grant to release. Measured around the store, so the store's
// scripts stay as they are; a hold is timed by the replica that granted it, and a lock released
// through another replica (or left to expire) is not timed.

var (
	lockWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vigil_lock_wait_seconds",
		Help:    "Time an acquire that asked to wait spent waiting, by result (acquired, timed_out).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"result"})
	lockHold = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vigil_lock_hold_seconds",
		Help:    "Time a lock was held from its grant to its release, measured by the granting replica.",
		Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
	}, []string{"ended"})
	registerMetrics sync.Once
)

// maxTimedHolds bounds the grants remembered for timing, so locks left to expire cannot grow
// the map without end.
const maxTimedHolds = 100_000

// observedLocks times waits and holds around the store.
type observedLocks struct {
	transport.Locks
	mu    sync.Mutex
	holds map[string]grant // resource → the grant this replica made
}

type grant struct {
	owner string
	token int64
	at    time.Time
}

func observeLocks(l transport.Locks) *observedLocks {
	registerMetrics.Do(func() { prometheus.MustRegister(lockWait, lockHold) })
	return &observedLocks{Locks: l, holds: map[string]grant{}}
}

// Acquire implements transport.Locks.
func (o *observedLocks) Acquire(ctx context.Context, resource, owner string, ttl, wait time.Duration) (domain.Acquired, error) {
	start := time.Now()
	a, err := o.Locks.Acquire(ctx, resource, owner, ttl, wait)
	if err != nil {
		return a, err
	}
	if wait > 0 {
		result := "acquired"
		if !a.OK {
			result = "timed_out"
		}
		lockWait.WithLabelValues(result).Observe(time.Since(start).Seconds())
	}
	if a.OK {
		o.mu.Lock()
		// Re-acquiring by the holder (same token) keeps the first grant's time.
		if g, ok := o.holds[resource]; !ok || g.token != a.Token {
			if ok || len(o.holds) < maxTimedHolds {
				o.holds[resource] = grant{owner: owner, token: a.Token, at: time.Now()}
			}
		}
		o.mu.Unlock()
	}
	return a, nil
}

// Release implements transport.Locks.
func (o *observedLocks) Release(ctx context.Context, resource, owner string) (bool, error) {
	ok, err := o.Locks.Release(ctx, resource, owner)
	if err != nil || !ok {
		return ok, err
	}
	o.mu.Lock()
	g, timed := o.holds[resource]
	if timed && g.owner == owner {
		delete(o.holds, resource)
	}
	o.mu.Unlock()
	if timed && g.owner == owner {
		lockHold.WithLabelValues("released").Observe(time.Since(g.at).Seconds())
	}
	return ok, nil
}
