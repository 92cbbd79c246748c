// Package lockclient is a Go client for Vigil's lock service, shaped like etcd's
// concurrency.Mutex: TryLock fails fast with ErrLocked, Lock(ctx) waits in the service's FIFO
// queue (woken by the release, never polling), the lease is renewed every TTL/3 while held,
// and the fencing token proves the hold to whatever the lock protects. Every mutex of a Client
// talks over one LockService.Session stream (opened on first use, reopened after a break), so
// a call costs one message each way rather than a gRPC call.
//
//	m := lockclient.New(conn).Mutex("reports", lockclient.MutexOptions{Owner: "worker-7"})
//	if err := m.Lock(ctx); err != nil { ... }
//	defer m.Unlock(context.Background())
//	store.Write(data, m.FencingToken()) // the store refuses tokens smaller than one it has seen
//	select { case <-m.Lost(): ... }      // the lease ran out or was taken: stop writing
//
// A caller that relays independent calls (the gateway relays REST) uses Client.Acquire,
// Release and Renew instead: the unary calls, over the same stream. When a replica drains, the
// calls it did not run are sent again on a new session, to another replica.
package lockclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/grpcdial"
)

var (
	// ErrLocked is TryLock's answer when another owner holds the lock.
	ErrLocked = errors.New("lockclient: locked by another owner")
	// ErrNotHeld is Unlock's answer when the mutex does not hold the lock (never locked, already
	// unlocked, or lost to expiry).
	ErrNotHeld = errors.New("lockclient: lock not held")
)

// maxWait is the longest wait the service accepts in one acquire; Lock waits longer by asking
// again.
const maxWait = 60 * time.Second

// CancelWait bounds how long an acquire whose caller's context ended waits for the answer to
// its cancel (which says whether a grant crossed it). A live service answers a cancel within
// milliseconds; a paused or cut-off one would otherwise add its whole silence to the caller's
// deadline, so the wait is short and a grant that comes later is given back in the background.
const CancelWait = time.Second

// giveBackTimeout bounds the release that gives back a grant whose caller no longer waits.
const giveBackTimeout = 5 * time.Second

// Client calls the lock service over one session stream. Close it when done.
type Client struct {
	c          locksv1.LockServiceClient
	conn       io.Closer     // the connection Dial made, closed by Close; nil after New
	cancelWait time.Duration // CancelWait; tests shorten it

	mu      sync.Mutex
	sess    *session
	opening *opening
	closed  bool
}

// New returns a Client on a connection to the lock service. Dial the connection with
// pkg/grpcdial (as Dial does), so that a replica that stops answering is noticed by keepalive
// and the session reopens on another one.
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{c: locksv1.NewLockServiceClient(conn), cancelWait: CancelWait}
}

// Dial connects to the lock service at target (host:port, resolved by DNS, round robin over
// its replicas, keepalive on: see pkg/grpcdial) and returns a Client that owns the
// connection: Close closes both.
func Dial(target string, opts ...grpc.DialOption) (*Client, error) {
	conn, err := grpcdial.New(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("lockclient: dial %s: %w", target, err)
	}
	c := New(conn)
	c.conn = conn
	return c, nil
}

// MutexOptions configure a Mutex. Every zero value has the default given in its comment.
type MutexOptions struct {
	// Owner identifies the holder; the same owner re-acquiring is idempotent, so two mutexes
	// with one owner do NOT exclude each other. Default: host name, pid and random bytes.
	Owner string
	// TTL is the lease; it is renewed every TTL/3 while held. Default 30s.
	TTL time.Duration
	// RetryBackoff is the first pause after a failed call in Lock and in renewal; it doubles up
	// to 1s. Default 50ms.
	RetryBackoff time.Duration
}

// Mutex is one named lock held by one owner.
type Mutex struct {
	c        *Client
	resource string
	o        MutexOptions

	mu     sync.Mutex
	held   bool
	token  int64
	expiry time.Time
	lost   chan struct{}
	stop   context.CancelFunc
	done   chan struct{}
}

// Mutex returns a mutex on resource. It holds nothing until Lock or TryLock succeeds.
func (c *Client) Mutex(resource string, o MutexOptions) *Mutex {
	if o.Owner == "" {
		o.Owner = defaultOwner()
	}
	if o.TTL <= 0 {
		o.TTL = 30 * time.Second
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 50 * time.Millisecond
	}
	return &Mutex{c: c, resource: resource, o: o}
}

func defaultOwner() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Resource is the lock's name.
func (m *Mutex) Resource() string { return m.resource }

// Owner is the mutex's owner id.
func (m *Mutex) Owner() string { return m.o.Owner }

// FencingToken is the token of the current hold (0 when not held). It grows with every new
// holder of the resource, so the protected system can refuse a stale holder's writes.
func (m *Mutex) FencingToken() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.held {
		return 0
	}
	return m.token
}

// Lost is closed when the current hold ends without Unlock: a renewal was refused or the
// lease ran out while the service could not be reached. It is nil before the first lock.
func (m *Mutex) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lost
}

// TryLock takes the lock if it is free (or already held by this owner) and returns ErrLocked
// otherwise, without waiting.
func (m *Mutex) TryLock(ctx context.Context) error {
	ok, err := m.acquire(ctx, 0)
	if err != nil {
		return err
	}
	if !ok {
		return ErrLocked
	}
	return nil
}

// Lock waits for the lock until it is acquired or ctx ends. Waiting happens in the service's
// queue, in arrival order; transient failures are retried with backoff.
func (m *Mutex) Lock(ctx context.Context) error {
	backoff := m.o.RetryBackoff
	for {
		wait := maxWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait <= 0 {
			return context.DeadlineExceeded
		}
		ok, err := m.acquire(ctx, wait)
		switch {
		case ok:
			return nil
		case err == nil:
			backoff = m.o.RetryBackoff // the wait ran out with the lock still held: ask again
		case contextEnded(ctx, err) != nil:
			return contextEnded(ctx, err)
		case !retryable(err):
			return err
		default:
			if err := pause(ctx, backoff); err != nil {
				return err
			}
			backoff = min(2*backoff, time.Second)
		}
	}
}

func (m *Mutex) acquire(ctx context.Context, wait time.Duration) (bool, error) {
	ttl := m.o.TTL.Milliseconds()
	req := &locksv1.AcquireRequest{Resource: m.resource, Owner: m.o.Owner, TtlMs: &ttl}
	if wait > 0 {
		w := max(wait.Milliseconds(), 1)
		req.WaitMs = &w
	}
	started := time.Now()
	var res *locksv1.AcquireResponse
	var err error
	if wait > 0 {
		res, err = m.c.waitingAcquire(ctx, req)
	} else {
		var resp *locksv1.SessionResponse
		resp, err = m.c.call(ctx, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Acquire{Acquire: req}})
		res = resp.GetAcquire()
		if err == nil && res == nil {
			err = errNoAnswer
		}
	}
	if err != nil {
		return false, fmt.Errorf("lockclient: acquire %q: %w", m.resource, err)
	}
	if !res.GetAcquired() {
		return false, nil
	}
	m.hold(res.GetFencingToken(), started.Add(m.o.TTL))
	return true, nil
}

// hold records a new hold and (re)starts renewal. The local expiry counts from the moment the
// acquire was sent, so it is never later than the service's.
func (m *Mutex) hold(token int64, expiry time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held && m.token == token {
		m.expiry = expiry
		return
	}
	m.stopRenewalLocked()
	m.held, m.token, m.expiry = true, token, expiry
	m.lost = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	m.stop, m.done = cancel, make(chan struct{})
	go m.renew(ctx, token, m.lost, m.done)
}

// stopRenewalLocked stops the renewal goroutine and waits for it; m.mu is held, which the
// goroutine never needs while stopping.
func (m *Mutex) stopRenewalLocked() {
	if m.stop == nil {
		return
	}
	m.stop()
	done := m.done
	m.stop, m.done = nil, nil
	m.mu.Unlock()
	<-done
	m.mu.Lock()
}

// renew extends the lease every TTL/3 until stopped; a refused renewal or a lease that ran out
// closes lost.
func (m *Mutex) renew(ctx context.Context, token int64, lost, done chan struct{}) {
	defer close(done)
	every := m.o.TTL / 3
	timer := time.NewTimer(every)
	defer timer.Stop()
	backoff := m.o.RetryBackoff
	ttl := m.o.TTL.Milliseconds()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		sent := time.Now()
		// Fenced: a renewal that arrives late extends this hold or nothing.
		resp, err := m.c.call(ctx, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Renew{Renew: &locksv1.RenewRequest{
			Resource: m.resource, Owner: m.o.Owner, TtlMs: &ttl, FencingToken: &token}}})
		res := resp.GetRenew()
		if err == nil && res == nil {
			err = errNoAnswer
		}
		m.mu.Lock()
		if ctx.Err() != nil {
			m.mu.Unlock()
			return
		}
		switch {
		case err == nil && res.GetRenewed():
			m.expiry = sent.Add(m.o.TTL)
			backoff = m.o.RetryBackoff
			timer.Reset(every)
		case err == nil || !time.Now().Before(m.expiry):
			// Refused (someone else holds it now), or unreachable until the lease ran out.
			m.held = false
			close(lost)
			m.mu.Unlock()
			return
		default:
			timer.Reset(min(backoff, time.Until(m.expiry)))
			backoff = min(2*backoff, time.Second)
		}
		m.mu.Unlock()
	}
}

// Unlock releases the lock and stops renewal. It returns ErrNotHeld when the service says this
// owner did not hold it (for example, it expired after being lost). A release answered
// UNAVAILABLE (its outcome unknown) is sent again until the hold's lease would have ended.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	m.held = false
	stop, done := m.stop, m.done
	m.stop, m.done = nil, nil
	token, expiry := m.token, m.expiry
	m.mu.Unlock()
	// The renewal stops now, but the release does not wait for its goroutine to exit: the
	// next holder waits on this release. A renewal already sent is refused or harmless, and
	// the goroutine changes nothing once stopped.
	if stop != nil {
		stop()
		defer func() { <-done }()
	}
	// Fenced: a release that arrives late (sent again after a lost answer, say) frees this hold
	// or nothing, never a later hold of the same owner.
	rel := &locksv1.ReleaseRequest{Resource: m.resource, Owner: m.o.Owner}
	if token > 0 {
		rel.FencingToken = &token
	}
	// An UNAVAILABLE release may have run (the store did not confirm it in time: outcome
	// unknown): it is sent again while ctx and the lease last, and a repeat that finds the hold
	// gone means the earlier one released it (or its lease ran out), which is what Unlock wanted.
	backoff, repeated := m.o.RetryBackoff, false
	for {
		resp, err := m.c.call(ctx, &locksv1.SessionRequest{Call: &locksv1.SessionRequest_Release{Release: rel}})
		res := resp.GetRelease()
		if err == nil && res == nil {
			err = errNoAnswer
		}
		switch {
		case err == nil && !res.GetReleased() && !repeated:
			return ErrNotHeld
		case err == nil:
			return nil
		case contextEnded(ctx, err) == nil && retryable(err) && token > 0 && time.Now().Add(backoff).Before(expiry):
			if perr := pause(ctx, backoff); perr != nil {
				return fmt.Errorf("lockclient: release %q: %w", m.resource, err)
			}
			backoff, repeated = min(2*backoff, time.Second), true
		default:
			return fmt.Errorf("lockclient: release %q: %w", m.resource, err)
		}
	}
}

// contextEnded is ctx's error when the call failed because ctx ended. gRPC may notice a
// deadline by its own clock a moment before ctx.Err() reports it.
func contextEnded(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if dl, ok := ctx.Deadline(); ok && status.Code(err) == codes.DeadlineExceeded && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
