// Package app holds the lock service's use cases: it checks each request against the domain's
// rules, runs it on the store, times waits and holds for operators, and handles the expiry
// alarms of the "locks" namespace. Transports (unary gRPC, the session stream) only map
// protobuf to these calls.
package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/services/locks/internal/domain"
)

// Store is what the use cases need from the Redis side (store.Store).
type Store interface {
	Acquire(ctx context.Context, resource, owner string, ttl, wait time.Duration) (domain.Acquired, error)
	Release(ctx context.Context, resource, owner string, token int64) (bool, error)
	Renew(ctx context.Context, resource, owner string, ttl time.Duration, token int64) (domain.Renewed, error)
	Get(ctx context.Context, resource string) (domain.Lock, error)
	Expire(ctx context.Context, ids []string) (changed []bool, errs []error)
}

// Options configure an App. Every zero value has the default given in its comment.
type Options struct {
	// Logger for the alarm log line. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the alarm log line's lateness. Default time.Now.
	Now func() time.Time
	// Metrics records waits and holds. Default: none.
	Metrics *Metrics
}

// App is the lock service's use cases.
type App struct {
	store Store
	o     Options
	holds *holdTimer
}

var _ alarm.Handler = (*App)(nil)

// New returns the use cases on store.
func New(store Store, o Options) *App {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &App{store: store, o: o, holds: &holdTimer{holds: map[string]grant{}}}
}

// AcquireRequest is one acquire as a caller sends it: limits unset (nil) take their defaults.
type AcquireRequest struct {
	Resource, Owner string
	// TTLMs is the lease in ms; nil means domain.DefaultTTL.
	TTLMs *int64
	// WaitMs is how long to wait in ms; nil or 0 answers at once.
	WaitMs *int64
}

// Acquire takes the lock for the owner, waiting up to WaitMs in the lock's FIFO queue. A waiting
// call whose ctx ends leaves the queue (giving back a lock granted to it meanwhile).
func (a *App) Acquire(ctx context.Context, r AcquireRequest) (domain.Acquired, error) {
	if err := checkNames(r.Resource, r.Owner); err != nil {
		return domain.Acquired{}, err
	}
	ttl, err := domain.TTL(r.TTLMs)
	if err != nil {
		return domain.Acquired{}, err
	}
	wait, err := domain.Wait(r.WaitMs)
	if err != nil {
		return domain.Acquired{}, err
	}
	start := time.Now()
	got, err := a.store.Acquire(ctx, r.Resource, r.Owner, ttl, wait)
	if err != nil {
		return got, err
	}
	if wait > 0 {
		a.o.Metrics.waited(got.OK, time.Since(start))
	}
	if got.OK && a.o.Metrics != nil {
		a.holds.start(r.Resource, r.Owner, got.Token)
	}
	return got, nil
}

// Release frees the lock if owner holds it, handing it to the next waiter. With a fencing
// token (not nil) only the hold with that token is released, so a release delayed from an
// earlier hold cannot free the owner's later one.
func (a *App) Release(ctx context.Context, resource, owner string, fencingToken *int64) (bool, error) {
	if err := checkNames(resource, owner); err != nil {
		return false, err
	}
	token, err := domain.Token(fencingToken)
	if err != nil {
		return false, err
	}
	ok, err := a.store.Release(ctx, resource, owner, token)
	if err != nil || !ok {
		return ok, err
	}
	if a.o.Metrics != nil {
		if held, timed := a.holds.end(resource, owner); timed {
			a.o.Metrics.held(held)
		}
	}
	return true, nil
}

// Renew extends owner's lease to TTLMs (nil: the default) from now, if owner holds the lock
// (under fencingToken, when it is not nil).
func (a *App) Renew(ctx context.Context, resource, owner string, ttlMs, fencingToken *int64) (domain.Renewed, error) {
	if err := checkNames(resource, owner); err != nil {
		return domain.Renewed{}, err
	}
	ttl, err := domain.TTL(ttlMs)
	if err != nil {
		return domain.Renewed{}, err
	}
	token, err := domain.Token(fencingToken)
	if err != nil {
		return domain.Renewed{}, err
	}
	return a.store.Renew(ctx, resource, owner, ttl, token)
}

// Get describes the lock as the next acquire would see it.
func (a *App) Get(ctx context.Context, resource string) (domain.Lock, error) {
	if err := domain.CheckResource(resource); err != nil {
		return domain.Lock{}, err
	}
	return a.store.Get(ctx, resource)
}

// HandleAlarms is the expiry of a batch of fired lock alarms: one log line per firing (the
// event "alarm", with isRetry and retryCount), then the store's expiry transition.
func (a *App) HandleAlarms(ctx context.Context, batch []alarm.Firing) []error {
	ids := make([]string, len(batch))
	for i, f := range batch {
		ids[i] = f.ID
	}
	changed, errs := a.store.Expire(ctx, ids)
	now := a.o.Now()
	for i, f := range batch {
		args := []any{"event", "alarm", "ns", "locks", "id", f.ID, "isRetry", f.IsRetry(), "retryCount", f.RetryCount(),
			"lateMs", now.Sub(f.Due).Milliseconds()}
		if errs[i] != nil {
			a.o.Logger.WarnContext(ctx, "lock alarm failed", append(args, "err", errs[i])...)
			continue
		}
		a.o.Logger.InfoContext(ctx, "lock alarm", append(args, "expired", changed[i])...)
	}
	return errs
}

func checkNames(resource, owner string) error {
	if err := domain.CheckResource(resource); err != nil {
		return err
	}
	return domain.CheckOwner(owner)
}

// maxTimedHolds bounds the grants remembered for timing, so locks left to expire cannot grow
// the map without end.
const maxTimedHolds = 100_000

// holdTimer remembers when this replica granted each lock, to time holds up to their release.
// A lock released through another replica (or left to expire) is not timed.
type holdTimer struct {
	mu    sync.Mutex
	holds map[string]grant // resource → the grant this replica made
}

type grant struct {
	owner string
	token int64
	at    time.Time
}

func (h *holdTimer) start(resource, owner string, token int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Re-acquiring by the holder (same token) keeps the first grant's time.
	if g, ok := h.holds[resource]; !ok || g.token != token {
		if ok || len(h.holds) < maxTimedHolds {
			h.holds[resource] = grant{owner: owner, token: token, at: time.Now()}
		}
	}
}

func (h *holdTimer) end(resource, owner string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.holds[resource]
	if !ok || g.owner != owner {
		return 0, false
	}
	delete(h.holds, resource)
	return time.Since(g.at), true
}
