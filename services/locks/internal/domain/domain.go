// Package domain holds the lock domain's rules that need no Redis or gRPC: the limits on
// names, owners, leases and waits, the sentences that explain them, and the shapes of a lock
// and of an acquire's answer.
package domain

import (
	"errors"
	"regexp"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits from docs/API.md.
const (
	// DefaultTTL is the lease when a request names none.
	DefaultTTL = 30 * time.Second
	// MinTTL and MaxTTL bound a lease.
	MinTTL = 100 * time.Millisecond
	MaxTTL = time.Hour
	// MaxWait bounds how long an acquire may wait for a lock.
	MaxWait = time.Minute
	// MaxOwnerLen is the longest owner, in characters.
	MaxOwnerLen = 128
)

// ErrInvalid marks a request that breaks a rule; its message says which, in a sentence a
// person can act on.
var ErrInvalid = errors.New("invalid request")

// ErrShuttingDown is a waiting acquire's answer when its service replica stops (drains): the
// caller left the queue and should ask again, possibly of another replica.
var ErrShuttingDown = errors.New("lock service is shutting down")

// ErrTooManyWaiting is a waiting acquire's answer when its replica already has as many waiting
// calls as it allows and the lock is held: the caller should retry after a pause.
var ErrTooManyWaiting = errors.New("too many waiting acquires")

// InvalidError is a request that breaks a rule. It matches ErrInvalid with errors.Is.
type InvalidError struct {
	// Msg is the sentence shown to the caller.
	Msg string
}

// Error is the sentence shown to the caller.
func (e *InvalidError) Error() string { return e.Msg }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(msg string) error { return &InvalidError{Msg: msg} }

// The sentences for each broken rule.
const (
	MsgResource = "Use a lowercase lock resource name containing 3-40 letters, digits, or hyphens."
	MsgOwner    = "owner must be 1-128 printable characters."
	MsgTTL      = "ttlMs must be an integer from 100 through 3600000."
	MsgWait     = "waitMs must be an integer from 0 through 60000."
)

var resourceName = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$`)

// CheckResource checks a lock's name.
func CheckResource(r string) error {
	if !resourceName.MatchString(r) {
		return invalid(MsgResource)
	}
	return nil
}

// CheckOwner checks an owner: 1-128 printable characters (letters, marks, numbers,
// punctuation, symbols and the ASCII space), valid UTF-8.
func CheckOwner(o string) error {
	if o == "" || !utf8.ValidString(o) || utf8.RuneCountInString(o) > MaxOwnerLen {
		return invalid(MsgOwner)
	}
	for _, r := range o {
		if !unicode.IsPrint(r) {
			return invalid(MsgOwner)
		}
	}
	return nil
}

// TTL is the lease a request asks for: DefaultTTL when ms is nil.
func TTL(ms *int64) (time.Duration, error) {
	if ms == nil {
		return DefaultTTL, nil
	}
	d := time.Duration(*ms) * time.Millisecond
	if *ms < MinTTL.Milliseconds() || *ms > MaxTTL.Milliseconds() {
		return 0, invalid(MsgTTL)
	}
	return d, nil
}

// Wait is how long an acquire may wait: zero when ms is nil.
func Wait(ms *int64) (time.Duration, error) {
	if ms == nil {
		return 0, nil
	}
	if *ms < 0 || *ms > MaxWait.Milliseconds() {
		return 0, invalid(MsgWait)
	}
	return time.Duration(*ms) * time.Millisecond, nil
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
