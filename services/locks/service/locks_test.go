package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestOwnerChecksAndIdempotentAcquire(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	ctx := context.Background()

	a := acquire(t, e.locks, "ledger", "alice", 30000, 0)
	if !a.GetAcquired() || a.GetFencingToken() <= 0 || a.Holder != nil {
		t.Fatalf("Acquire(ledger, alice) = %v, want acquired with a positive token and no holder", a)
	}
	again := acquire(t, e.locks, "ledger", "alice", 60000, 0)
	if !again.GetAcquired() || again.GetFencingToken() != a.GetFencingToken() || again.GetExpiresAt() <= a.GetExpiresAt() {
		t.Errorf("re-Acquire(ledger, alice) = %v, want acquired, token %d, later expiry than %d", again, a.GetFencingToken(), a.GetExpiresAt())
	}
	b := acquire(t, e.locks, "ledger", "bob", 30000, 0)
	if b.GetAcquired() || b.GetHolder() != "alice" || b.GetFencingToken() != a.GetFencingToken() || b.GetExpiresAt() != again.GetExpiresAt() {
		t.Errorf("Acquire(ledger, bob) = %v, want refused, holder alice, her token and expiry", b)
	}
	if release(t, e.locks, "ledger", "bob") {
		t.Errorf("Release(ledger, bob) = true, want false: bob does not hold it")
	}
	rn, err := e.locks.Renew(ctx, &locksv1.RenewRequest{Resource: "ledger", Owner: "bob"})
	if err != nil || rn.GetRenewed() || rn.ExpiresAt != nil {
		t.Errorf("Renew(ledger, bob) = %v, %v; want renewed false, no expiry", rn, err)
	}
	rn, err = e.locks.Renew(ctx, &locksv1.RenewRequest{Resource: "ledger", Owner: "alice"})
	if err != nil || !rn.GetRenewed() || rn.GetExpiresAt() <= time.Now().UnixMilli()+29000 {
		t.Errorf("Renew(ledger, alice) with the default ttl = %v, %v; want renewed ~30s ahead", rn, err)
	}
	g, err := e.locks.Get(ctx, &locksv1.GetRequest{Resource: "ledger"})
	if err != nil || !g.GetHeld() || g.GetOwner() != "alice" || g.GetFencingToken() != a.GetFencingToken() || g.GetExpiresAt() != rn.GetExpiresAt() {
		t.Errorf("Get(ledger) = %v, %v; want held by alice, token %d, expiry %d", g, err, a.GetFencingToken(), rn.GetExpiresAt())
	}
	if !release(t, e.locks, "ledger", "alice") {
		t.Fatalf("Release(ledger, alice) = false, want true")
	}
	if release(t, e.locks, "ledger", "alice") {
		t.Errorf("second Release(ledger, alice) = true, want false")
	}
	g, err = e.locks.Get(ctx, &locksv1.GetRequest{Resource: "ledger"})
	if err != nil || g.GetHeld() || g.Owner != nil || g.FencingToken != nil || g.ExpiresAt != nil || g.GetResource() != "ledger" {
		t.Errorf("Get(ledger) after release = %v, %v; want free with owner, token and expiry unset", g, err)
	}
	b = acquire(t, e.locks, "ledger", "bob", 30000, 0)
	if !b.GetAcquired() || b.GetFencingToken() <= a.GetFencingToken() {
		t.Errorf("Acquire(ledger, bob) after release = %v, want acquired with token > %d", b, a.GetFencingToken())
	}
}

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

func TestDefaultTTL(t *testing.T) {
	t.Parallel()
	clk := newTestClock()
	e := startLocks(t, withClock(clk))
	res, err := e.locks.Acquire(context.Background(), &locksv1.AcquireRequest{Resource: "defaults", Owner: "o"})
	if err != nil || !res.GetAcquired() {
		t.Fatalf("Acquire = %v, %v", res, err)
	}
	if got := res.GetExpiresAt() - clk.Now().UnixMilli(); got != 30000 {
		t.Errorf("expiresAt - now = %d ms, want 30000 (the default ttl)", got)
	}
}

func TestExpiryByAlarm(t *testing.T) {
	t.Parallel()
	clk := newTestClock()
	e := startLocks(t, withClock(clk))
	ctx := context.Background()
	a := acquire(t, e.locks, "lease", "sleepy", 200, 0)
	if !a.GetAcquired() {
		t.Fatalf("Acquire(lease, sleepy) = %v", a)
	}
	clk.Add(199 * time.Millisecond)
	if g, err := e.locks.Get(ctx, &locksv1.GetRequest{Resource: "lease"}); err != nil || g.GetOwner() != "sleepy" {
		t.Fatalf("Get(lease) 1 ms before its expiry = %v, %v; want held by sleepy", g, err)
	}
	// The holder stops renewing and its lease ends. The alarm alone must free the lock: watch
	// the key go, without any call that would settle it.
	clk.Add(time.Millisecond)
	wait.Until(t, "the expiry alarm to delete the lock", func() bool {
		n, err := e.rdb.Exists(ctx, lockKey(t, e, "lease")).Result()
		return err == nil && n == 0
	})
	if release(t, e.locks, "lease", "sleepy") {
		t.Errorf("Release(lease, sleepy) after expiry = true, want false")
	}
	b := acquire(t, e.locks, "lease", "next", 30000, 0)
	if !b.GetAcquired() || b.GetFencingToken() <= a.GetFencingToken() {
		t.Errorf("Acquire(lease, next) = %v, want acquired with token > %d", b, a.GetFencingToken())
	}
}

func lockKey(t *testing.T, e *env, resource string) string {
	t.Helper()
	keys, err := e.rdb.Keys(context.Background(), e.prefix+":{locks:*}:fence").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no fencing counter under %s: %v", e.prefix, err)
	}
	// All keys of a resource share its shard's tag; the counter names the tag.
	tag := keys[0][:len(keys[0])-len(":fence")]
	return tag + ":lock:" + redisx.Tag(resource)
}

func TestBadInputGRPC(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	ctx := context.Background()
	tooLong := strings.Repeat("x", 257)
	const (
		msgResource = "resource must be 1 to 256 bytes of UTF-8 text without control characters."
		msgOwner    = "owner must be 1 to 256 bytes of UTF-8 text without control characters."
	)
	// call sends req by its type: Acquire, Release, Renew or Get.
	call := func(req proto.Message) error {
		var err error
		switch r := req.(type) {
		case *locksv1.AcquireRequest:
			_, err = e.locks.Acquire(ctx, r)
		case *locksv1.ReleaseRequest:
			_, err = e.locks.Release(ctx, r)
		case *locksv1.RenewRequest:
			_, err = e.locks.Renew(ctx, r)
		case *locksv1.GetRequest:
			_, err = e.locks.Get(ctx, r)
		default:
			t.Fatalf("no call for %T", req)
		}
		return err
	}
	for _, tc := range []struct {
		name string
		req  proto.Message
		want string
	}{
		{"control char resource", &locksv1.AcquireRequest{Resource: "orders\n42", Owner: "o"}, msgResource},
		{"empty resource", &locksv1.GetRequest{Resource: ""}, msgResource},
		{"long resource", &locksv1.ReleaseRequest{Resource: tooLong, Owner: "o"}, msgResource},
		{"empty owner", &locksv1.AcquireRequest{Resource: "abc", Owner: ""}, msgOwner},
		{"long owner", &locksv1.ReleaseRequest{Resource: "abc", Owner: tooLong}, msgOwner},
		{"control char owner", &locksv1.RenewRequest{Resource: "abc", Owner: "a\nb"}, msgOwner},
		{"ttl too small", &locksv1.AcquireRequest{Resource: "abc", Owner: "o", TtlMs: ms(99)}, "ttlMs must be an integer from 100 through 3600000."},
		{"ttl zero on renew", &locksv1.RenewRequest{Resource: "abc", Owner: "o", TtlMs: ms(0)}, "ttlMs must be an integer from 100 through 3600000."},
		{"ttl too large", &locksv1.AcquireRequest{Resource: "abc", Owner: "o", TtlMs: ms(3600001)}, "ttlMs must be an integer from 100 through 3600000."},
		{"negative wait", &locksv1.AcquireRequest{Resource: "abc", Owner: "o", WaitMs: ms(-1)}, "waitMs must be an integer from 0 through 60000."},
		{"wait too long", &locksv1.AcquireRequest{Resource: "abc", Owner: "o", WaitMs: ms(60001)}, "waitMs must be an integer from 0 through 60000."},
		{"wait beyond 2^53", &locksv1.AcquireRequest{Resource: "abc", Owner: "o", WaitMs: ms(1 << 53)}, "waitMs must be an integer from 0 through 60000."},
		{"ttl beyond -2^53", &locksv1.RenewRequest{Resource: "abc", Owner: "o", TtlMs: ms(-(1 << 53) - 1)}, "ttlMs must be an integer from 100 through 3600000."},
	} {
		err := call(tc.req)
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != tc.want {
			t.Errorf("%s: error = %v, want InvalidArgument %q", tc.name, err, tc.want)
		}
	}
	// Nothing was stored by any of them.
	keys, _ := e.rdb.Keys(ctx, e.prefix+"*:lock:*").Result()
	if len(keys) != 0 {
		t.Errorf("bad requests stored %v", keys)
	}
}

// Lock names and owners as people write them work over gRPC, and Get names the lock as given.
func TestNamesAsPeopleWriteThem(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	ctx := context.Background()
	for _, name := range []string{"orders/42", "Order:42", "report.daily", "user@example.com", "日報/今日", "{tenant}:job", "a}b{", "100%", strings.Repeat("é", 128)} {
		owner := "worker/" + name[:min(len(name), 32)]
		a := acquire(t, e.locks, name, owner, 30000, 0)
		if !a.GetAcquired() {
			t.Errorf("Acquire(%q) = %v, want acquired", name, a)
			continue
		}
		g, err := e.locks.Get(ctx, &locksv1.GetRequest{Resource: name})
		if err != nil || g.GetResource() != name || g.GetOwner() != owner || g.GetFencingToken() != a.GetFencingToken() {
			t.Errorf("Get(%q) = %v, %v; want resource %q held by %q", name, g, err, name, owner)
		}
		if !release(t, e.locks, name, owner) {
			t.Errorf("Release(%q) = false, want true", name)
		}
	}
}
