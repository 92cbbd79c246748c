// Package domain holds the reservation state machine, free of Redis and gRPC. The Lua scripts
// in internal/store are the production form of these transitions; this Go twin is the
// specification the store's tests compare them against.
package domain

import (
	"time"

	"github.com/vigil-dev/vigil/pkg/input"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Status is where a reservation is in its life.
type Status string

// The statuses. Missing is what a reservation that was never created reports.
const (
	Held      Status = "held"
	Expired   Status = "expired"
	Confirmed Status = "confirmed"
	Released  Status = "released"
	Missing   Status = "missing"
)

// TTL limits, in seconds.
const (
	MinTTLSeconds = 5
	MaxTTLSeconds = 3600
)

// The error kinds callers test with errors.Is: the shared kinds of pkg/usererr, which the
// transport maps to gRPC codes with usererr.Status.
var (
	// ErrInvalid marks bad input.
	ErrInvalid = usererr.ErrInvalid
	// ErrNotFound marks a reservation that was never created (and a replay on a service
	// without replay: the route does not exist there).
	ErrNotFound = usererr.ErrNotFound
	// ErrConflict marks a transition the reservation's status forbids.
	ErrConflict = usererr.ErrConflict
	// ErrReplayDisabled is a replay on a service that runs without replay.
	ErrReplayDisabled error = &usererr.Error{Kind: usererr.ErrNotFound,
		Msg: "Alarm replay is disabled; start the reservations service with replay enabled."}
)

// ValidateID checks a reservation id against the seed lab's name rule.
func ValidateID(id string) error { return input.Slug("reservation ID", id) }

// ValidateTTL checks a time to live in seconds.
func ValidateTTL(ttlSeconds int64) error {
	return input.Int("ttlSeconds", ttlSeconds, MinTTLSeconds, MaxTTLSeconds)
}

// ValidateNow checks an explicit replay time in ms: a safe integer of at least 1, so a browser
// reads back exactly the expiredAt it sent.
func ValidateNow(nowMs int64) error { return input.PositiveSafeInt("now", nowMs) }

// NotFound is the error for a reservation that was never created.
func NotFound(id string) error {
	return usererr.New(ErrNotFound, "Reservation %s does not exist; create it first.", id)
}

// Conflict is the error for a transition from a status that forbids it.
func Conflict(id string, from Status, to Status) error {
	return usererr.New(ErrConflict, "Reservation %s is %s and cannot be %s.", id, from, to)
}

// Reservation is one hold. Times are ms since the Unix epoch; zero means unset.
type Reservation struct {
	ID              string
	Status          Status
	CreatedAt       int64
	ExpiresAt       int64
	ExpiredAt       int64
	ExpirationCount int64
	// AlarmAt is when the reservation's alarm is due; zero when none is set.
	AlarmAt int64
}

// New is a fresh hold created at now for ttl, with its alarm due when it expires.
func New(id string, now time.Time, ttl time.Duration) Reservation {
	exp := now.Add(ttl).UnixMilli()
	return Reservation{ID: id, Status: Held, CreatedAt: now.UnixMilli(), ExpiresAt: exp, AlarmAt: exp}
}

// Expire is the alarm's transition: held → expired, only when the hold is due at now (whole
// ms). It reports whether anything changed; running it again changes nothing.
func (r *Reservation) Expire(now time.Time) bool {
	nowMs := now.UnixMilli()
	if r.Status != Held || r.ExpiresAt > nowMs {
		return false
	}
	r.Status = Expired
	r.ExpiredAt = nowMs
	r.ExpirationCount++
	r.AlarmAt = 0
	return true
}

// Settle is the client's transition: held → confirmed or released. A hold already past its
// expiry expires first (correctness does not wait for the alarm), and then conflicts. Asking
// for the status it already has succeeds and changes nothing.
func (r *Reservation) Settle(to Status, now time.Time) error {
	if r.Status == Missing || r.Status == "" {
		return NotFound(r.ID)
	}
	r.Expire(now)
	switch r.Status {
	case to:
		return nil
	case Held:
		r.Status = to
		r.AlarmAt = 0
		return nil
	default:
		return Conflict(r.ID, r.Status, to)
	}
}
