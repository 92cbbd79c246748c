// Package app holds the reservation use cases: validate, run one store transition, log. It is
// also the alarm handler the scheduler calls.
package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/services/reservations/internal/domain"
	"github.com/vigil-dev/vigil/services/reservations/internal/store"
)

// Options configure the use cases. Every zero value has the default given in its comment.
type Options struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Replay enables Replay. Default false.
	Replay bool
	// Logger for everything but the alarm lines. Default slog.Default().
	Logger *slog.Logger
	// AlarmLog receives the reservation-alarm lines (see alarmlog.go), whatever Logger's
	// level. Default os.Stderr; io.Discard turns them off.
	AlarmLog io.Writer
}

// App runs the reservation use cases.
type App struct {
	store    *store.Store
	now      func() time.Time
	replay   bool
	log      *slog.Logger
	alarmLog *alarmLog
}

var _ alarm.Handler = (*App)(nil)

// New returns the use cases over s.
func New(s *store.Store, o Options) *App {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.AlarmLog == nil {
		o.AlarmLog = os.Stderr
	}
	return &App{store: s, now: o.Now, replay: o.Replay, log: o.Logger, alarmLog: &alarmLog{w: o.AlarmLog}}
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

// Replay runs the alarm's expiry transition with an explicit now (ms since the epoch, a safe
// integer of at least 1).
func (a *App) Replay(ctx context.Context, id string, nowMs int64) (domain.Reservation, bool, error) {
	if !a.replay {
		return domain.Reservation{}, false, domain.ErrReplayDisabled
	}
	if err := domain.ValidateID(id); err != nil {
		return domain.Reservation{}, false, err
	}
	if err := domain.ValidateNow(nowMs); err != nil {
		return domain.Reservation{}, false, err
	}
	r, changed, err := a.store.Expire(ctx, id, time.UnixMilli(nowMs))
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
	return a.store.Settle(ctx, id, to, a.now())
}

// HandleAlarms is the alarm handler: the same expiry transition as Replay, at the clock's now,
// for the whole claimed batch in one script call. It writes a reservation-alarm line per firing
// before the transition ("start") and after it ("done", or "failed" with every firing of the
// batch when the call failed: the queue then retries them all).
func (a *App) HandleAlarms(ctx context.Context, batch []alarm.Firing) []error {
	now := a.now()
	a.alarmLog.start(batch, now)
	ids := make([]string, len(batch))
	for i, f := range batch {
		ids[i] = f.ID
	}
	changed, err := a.store.ExpireDue(ctx, ids, now)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = errors.New("stopped before the transition answered")
		}
		a.alarmLog.failed(batch, now, err)
		errs := make([]error, len(batch))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	a.alarmLog.done(batch, changed, now)
	return nil
}
