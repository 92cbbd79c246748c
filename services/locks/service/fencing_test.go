package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/lockclient"
)

// A release delayed from an owner's earlier hold (sent again after a lost answer, or held up on
// a paused replica) arrives after the owner took the lock again: with the earlier hold's
// fencing token it releases nothing, and a renewal likewise extends nothing. Without a token it
// would free the later hold.
func TestDelayedReleaseLeavesTheOwnersLaterHold(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	ctx := context.Background()
	first := acquire(t, e.locks, "ledger", "alice", 30000, 0)
	rel, err := e.locks.Release(ctx, &locksv1.ReleaseRequest{Resource: "ledger", Owner: "alice", FencingToken: ms(first.GetFencingToken())})
	if err != nil || !rel.GetReleased() {
		t.Fatalf("Release(ledger, alice, %d) = %v, %v; want released", first.GetFencingToken(), rel, err)
	}
	later := acquire(t, e.locks, "ledger", "alice", 30000, 0)
	if !later.GetAcquired() || later.GetFencingToken() <= first.GetFencingToken() {
		t.Fatalf("Acquire(ledger, alice) again = %v, want a new hold", later)
	}

	// The first release, delayed, arrives now.
	rel, err = e.locks.Release(ctx, &locksv1.ReleaseRequest{Resource: "ledger", Owner: "alice", FencingToken: ms(first.GetFencingToken())})
	if err != nil || rel.GetReleased() {
		t.Errorf("delayed Release(ledger, alice, %d) = %v, %v; want released false", first.GetFencingToken(), rel, err)
	}
	rn, err := e.locks.Renew(ctx, &locksv1.RenewRequest{Resource: "ledger", Owner: "alice", TtlMs: ms(3_600_000), FencingToken: ms(first.GetFencingToken())})
	if err != nil || rn.GetRenewed() {
		t.Errorf("delayed Renew(ledger, alice, %d) = %v, %v; want renewed false", first.GetFencingToken(), rn, err)
	}
	g, err := e.locks.Get(ctx, &locksv1.GetRequest{Resource: "ledger"})
	if err != nil || !g.GetHeld() || g.GetFencingToken() != later.GetFencingToken() || g.GetExpiresAt() != later.GetExpiresAt() {
		t.Errorf("Get(ledger) = %v, %v; want alice's later hold %d, its lease unchanged", g, err, later.GetFencingToken())
	}

	// A token that no acquire can have returned is refused with a sentence.
	for _, bad := range []int64{0, -3} {
		_, err := e.locks.Release(ctx, &locksv1.ReleaseRequest{Resource: "ledger", Owner: "alice", FencingToken: ms(bad)})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "fencingToken must be an integer from 1") {
			t.Errorf("Release with token %d = %v, want InvalidArgument naming fencingToken", bad, err)
		}
		_, err = e.locks.Renew(ctx, &locksv1.RenewRequest{Resource: "ledger", Owner: "alice", FencingToken: ms(bad)})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("Renew with token %d = %v, want InvalidArgument", bad, err)
		}
	}
	if !release(t, e.locks, "ledger", "alice") {
		t.Errorf("Release(ledger, alice) without a token = false, want the later hold released")
	}
}

// lockclient fences what it sends: a Mutex whose hold was replaced by a later hold of the same
// owner (taken here by a raw call) finds ErrNotHeld on Unlock and leaves that hold alone.
func TestLockClientUnlockIsFenced(t *testing.T) {
	t.Parallel()
	e, c := startClient(t)
	ctx := context.Background()
	m := c.Mutex("press", lockclient.MutexOptions{Owner: "worker"})
	if err := m.TryLock(ctx); err != nil {
		t.Fatalf("TryLock = %v", err)
	}
	old := m.FencingToken()
	// The owner's hold is given back and taken again behind the Mutex's back.
	if !release(t, e.locks, "press", "worker") {
		t.Fatal("raw Release(press, worker) = false")
	}
	later := acquire(t, e.locks, "press", "worker", 30000, 0)
	if err := m.Unlock(ctx); !errors.Is(err, lockclient.ErrNotHeld) {
		t.Errorf("Unlock of hold %d after the owner's hold %d was taken = %v, want ErrNotHeld", old, later.GetFencingToken(), err)
	}
	g, err := e.locks.Get(ctx, &locksv1.GetRequest{Resource: "press"})
	if err != nil || !g.GetHeld() || g.GetFencingToken() != later.GetFencingToken() {
		t.Errorf("Get(press) = %v, %v; want the later hold %d still held", g, err, later.GetFencingToken())
	}
}
