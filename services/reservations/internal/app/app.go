// Package app holds the reservation use cases: validate, run one store transition, log.
package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/services/reservations/internal/domain"
	"github.com/vigil-dev/vigil/services/reservations/internal/store"
)

// App runs the reservation use cases.
type App struct {
	store  *store.Store
	now    func() time.Time
	replay bool
	log    *slog.Logger
}

// New returns the use cases over s. replay enables ReplayAlarm.
func New(s *store.Store, now func() time.Time, replay bool, log *slog.Logger) *App {
	return &App{store: s, now: now, replay: replay, log: log}
}

// Create holds reservation id for ttlSeconds, resetting any earlier hold.
func (a *App) Create(ctx context.Context, id string, ttlSeconds int64) (domain.Reservation, error) {
	if err := domain.ValidateID(id); err != nil {
		return domain.Reservation{}, err
	}
	if err := domain.ValidateTTL(ttlSeconds); err != nil {
		return domain.Reservation{}, err
	}
	return a.store.Create(ctx, id, a.now(), time.Duration(ttlSeconds)*time.Second)
}

// Get reads reservation id.
func (a *App) Get(ctx context.Context, id string) (domain.Reservation, error) {
	if err := domain.ValidateID(id); err != nil {
		return domain.Reservation{}, err
	}
	return a.store.Get(ctx, id)
}

// Replay runs the alarm's expiry transition with an explicit now.
func (a *App) Replay(ctx context.Context, id string, nowMs int64) (domain.Reservation, bool, error) {
	if !a.replay {
		return domain.Reservation{}, false, domain.ReplayDisabled()
	}
	if err := domain.ValidateID(id); err != nil {
		return domain.Reservation{}, false, err
	}
	if err := domain.ValidateNow(nowMs); err != nil {
		return domain.Reservation{}, false, err
	}
	r, changed, err := a.store.Expire(ctx, id, nowMs)
	if err == nil && changed {
		a.log.InfoContext(ctx, "reservation expired by replay", "event", "expired", "id", id, "replay", true, "now", nowMs)
	}
	return r, changed, err
}

// Settle confirms or releases reservation id.
func (a *App) Settle(ctx context.Context, id string, to domain.Status) (domain.Reservation, error) {
	if err := domain.ValidateID(id); err != nil {
		return domain.Reservation{}, err
	}
	return a.store.Settle(ctx, id, to, a.now().UnixMilli())
}

// HandleAlarms is the alarm handler: the same expiry transition as Replay, at the clock's now,
// pipelined for the batch. It logs one line per firing.
func (a *App) HandleAlarms(ctx context.Context, batch []alarm.Firing) []error {
	ids := make([]string, len(batch))
	for i, f := range batch {
		ids[i] = f.ID
	}
	now := a.now().UnixMilli()
	results := a.store.ExpireBatch(ctx, ids, now)
	var errs []error
	for i, res := range results {
		f := batch[i]
		if res.Err != nil {
			if errs == nil {
				errs = make([]error, len(batch))
			}
			errs[i] = res.Err
			continue
		}
		a.log.InfoContext(ctx, "alarm fired", "event", "alarm", "ns", "reservations", "id", f.ID,
			"isRetry", f.IsRetry(), "retryCount", f.RetryCount(), "changed", res.Changed,
			"status", string(res.Reservation.Status), "lateMs", now-f.Due.UnixMilli())
	}
	return errs
}
