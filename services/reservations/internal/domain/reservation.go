// Package domain holds the reservation state machine, free of Redis and gRPC. The Lua scripts
// in internal/store are the production form of these transitions; this Go twin is the
// specification the store's tests compare them against.
package domain

import (
	"errors"
	"regexp"
	"time"

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

// Errors callers can test with errors.Is. Each wraps a sentence meant for the end user.
var (
	// ErrInvalid marks bad input.
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound marks a reservation that was never created.
	ErrNotFound = errors.New("reservation not found")
	// ErrConflict marks a transition the reservation's status forbids.
	ErrConflict = errors.New("reservation status conflict")
	// ErrReplayDisabled marks a replay on a service that runs without replay.
	ErrReplayDisabled = errors.New("alarm replay disabled")
)

// UserError is an error with a sentence a person can act on (shared by every domain).
type UserError = usererr.Error

var userErr = usererr.New

var idPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$`)

// ValidateID checks a reservation id against the name rule.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return userErr(ErrInvalid, "Use a lowercase reservation ID containing 3-40 letters, digits, or hyphens.")
	}
	return nil
}

// ValidateTTL checks a time to live in seconds.
func ValidateTTL(ttlSeconds int64) error {
	if ttlSeconds < MinTTLSeconds || ttlSeconds > MaxTTLSeconds {
		return userErr(ErrInvalid, "ttlSeconds must be an integer from %d through %d.", MinTTLSeconds, MaxTTLSeconds)
	}
	return nil
}

// ValidateNow checks an explicit replay time.
func ValidateNow(nowMs int64) error {
	if nowMs <= 0 {
		return userErr(ErrInvalid, "now must be a positive integer timestamp.")
	}
	return nil
}

// NotFound is the error for a reservation that was never created.
func NotFound(id string) error {
	return userErr(ErrNotFound, "Reservation %s does not exist; create it first.", id)
}

// Conflict is the error for a transition from a status that forbids it.
func Conflict(id string, from Status, to Status) error {
	return userErr(ErrConflict, "Reservation %s is %s and cannot be %s.", id, from, to)
}

// ReplayDisabled is the error for a replay on a service without replay enabled.
func ReplayDisabled() error {
	return userErr(ErrReplayDisabled, "Alarm replay is disabled; start the reservations service with replay enabled.")
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

// Expire is the alarm's transition: held → expired, only when the hold is due at nowMs.
// It reports whether anything changed; running it again changes nothing.
func (r *Reservation) Expire(nowMs int64) bool {
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
func (r *Reservation) Settle(to Status, nowMs int64) error {
	if r.Status == Missing || r.Status == "" {
		return NotFound(r.ID)
	}
	r.Expire(nowMs)
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
