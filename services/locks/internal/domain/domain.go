// Package domain holds the lock domain's rules that need no Redis or gRPC: the limits on
// names, owners, leases and waits, the sentences that explain them (from pkg/input), and the
// shapes of a lock and of an acquire's answer.
package domain

import (
	"time"

	"github.com/vigil-dev/vigil/pkg/input"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Limits of the lock contract (docs/LOCKS.md).
const (
	// DefaultTTL is the lease when a request names none.
	DefaultTTL = 30 * time.Second
	// MinTTL and MaxTTL bound a lease.
	MinTTL = 100 * time.Millisecond
	MaxTTL = time.Hour
	// MaxWait bounds how long an acquire may wait for a lock.
	MaxWait = time.Minute
	// MaxNameBytes is the longest resource or owner, in bytes of UTF-8.
	MaxNameBytes = 256
)

// ErrInvalid marks a request that breaks a rule; the error's message says which, in a sentence
// a person can act on.
var ErrInvalid = usererr.ErrInvalid

// ErrShuttingDown is a waiting acquire's answer when its service replica stops (drains): the
// caller left the queue and should ask again, possibly of another replica.
var ErrShuttingDown error = &usererr.Error{Kind: usererr.ErrUnavailable, Msg: "The lock service is restarting; try again."}

// ErrTooManyWaiting is a waiting acquire's answer when its replica already has as many waiting
// calls as it allows and the lock is held: the caller should retry after a pause.
var ErrTooManyWaiting error = &usererr.Error{Kind: usererr.ErrExhausted, Msg: "Too many callers are waiting for locks here; try again shortly."}

// CheckResource checks a lock's name: any UTF-8 text of 1-256 bytes without control
// characters ("orders/42", "Order:42", "user@example.com", "日報").
func CheckResource(r string) error { return input.Name("resource", r, MaxNameBytes) }

// CheckOwner checks an owner, by the same rule as a resource.
func CheckOwner(o string) error { return input.Name("owner", o, MaxNameBytes) }

// TTL is the lease a request asks for: DefaultTTL when ms is nil.
func TTL(ms *int64) (time.Duration, error) {
	if ms == nil {
		return DefaultTTL, nil
	}
	if err := input.Int("ttlMs", *ms, MinTTL.Milliseconds(), MaxTTL.Milliseconds()); err != nil {
		return 0, err
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

// Wait is how long an acquire may wait: zero when ms is nil.
func Wait(ms *int64) (time.Duration, error) {
	if ms == nil {
		return 0, nil
	}
	if err := input.Int("waitMs", *ms, 0, MaxWait.Milliseconds()); err != nil {
		return 0, err
	}
	return time.Duration(*ms) * time.Millisecond, nil
}

// Token is the fencing token a release or renew names: 0 (any hold of the owner) when t is
// nil, else a token Acquire can have returned.
func Token(t *int64) (int64, error) {
	if t == nil {
		return 0, nil
	}
	if err := input.PositiveSafeInt("fencingToken", *t); err != nil {
		return 0, err
	}
	return *t, nil
}

// Lock is a lock as the next acquire would see it.
type Lock struct {
	// Resource is the lock's name.
	Resource string
	// Held is true while someone holds the lock; the other fields are zero when false.
	Held bool
	// Owner holds the lock.
	Owner string
	// Token is the holder's fencing token.
	Token int64
	// ExpiresAt is when the holder's lease ends.
	ExpiresAt time.Time
}

// Acquired is the answer to an acquire.
type Acquired struct {
	// OK is true when the caller holds the lock.
	OK bool
	// Token is the caller's fencing token when OK, else the holder's.
	Token int64
	// ExpiresAt is the caller's lease end when OK, else the holder's.
	ExpiresAt time.Time
	// Holder is who holds the lock when not OK.
	Holder string
}

// Renewed is the answer to a renew.
type Renewed struct {
	// OK is true when the caller held the lock and its lease now ends at ExpiresAt.
	OK bool
	// ExpiresAt is the new lease end; zero when not OK.
	ExpiresAt time.Time
}
