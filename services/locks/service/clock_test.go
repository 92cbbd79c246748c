package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/services/locks/service"
)

// Two replicas on one Redis, one of them with a clock 30s ahead (and, separately, 30s behind):
// whichever replica grants or renews a lock and whichever asks for it next, no lease ends
// before its TTL by Redis's clock, and no other owner gets the lock, by polling or by waiting,
// before the holder's expiresAt. Without the shared clock the replica ahead grants the lock
// 28s early, and leases the replica behind grants or renews end 30s early.
func TestSkewedReplicaGrantsNoLockEarly(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	ctx := context.Background()
	const ttl = 2 * time.Second
	// slack is how far the replicas' clocks may be from Redis's: their error bound, well under
	// 50ms on one host.
	const slack = 50 * time.Millisecond
	for _, skew := range []time.Duration{30 * time.Second, -30 * time.Second} {
		replica := func(base func() time.Time) locksv1.LockServiceClient {
			addr := run(t, replicaOptions(t, prefix, func(o *service.Options) {
				o.Registerer, o.Now, o.DisciplineClock = prometheus.NewRegistry(), base, true
				o.AlarmMaxSleep = 20 * time.Millisecond
			}))
			return locksv1.NewLockServiceClient(servertest.Dial(t, addr))
		}
		inStep := replica(time.Now)
		skewed := replica(func() time.Time { return time.Now().Add(skew) })
		byName := map[string]locksv1.LockServiceClient{"in-step": inStep, "skewed": skewed}
		for _, tc := range []struct{ holder, next string }{{"in-step", "skewed"}, {"skewed", "in-step"}} {
			for _, waiting := range []bool{false, true} {
				name := fmt.Sprintf("skew %v, held on %s, %s on %s", skew, tc.holder, map[bool]string{false: "polled", true: "waited"}[waiting], tc.next)
				resource := fmt.Sprintf("r%d-%s-%v", int(skew/time.Second), tc.holder, waiting)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					holder, next := byName[tc.holder], byName[tc.next]
					before := redistest.Time(t, rdb)
					a := acquire(t, holder, resource, "a", ttl.Milliseconds(), 0)
					if !a.GetAcquired() {
						t.Fatalf("Acquire(%s, a) = %v, want acquired", resource, a)
					}
					if lo := before.Add(ttl - slack); time.UnixMilli(a.GetExpiresAt()).Before(lo) {
						t.Errorf("a's lease ends %v, before Redis's %v + TTL − slack: cut short", time.UnixMilli(a.GetExpiresAt()), before)
					}
					// A renewal on the other replica is no shorter either.
					before = redistest.Time(t, rdb)
					rn, err := next.Renew(ctx, &locksv1.RenewRequest{Resource: resource, Owner: "a", TtlMs: ms(ttl.Milliseconds())})
					if err != nil || !rn.GetRenewed() {
						t.Fatalf("Renew(%s, a) = %v, %v; want renewed", resource, rn, err)
					}
					if lo := before.Add(ttl - slack); time.UnixMilli(rn.GetExpiresAt()).Before(lo) {
						t.Errorf("a's renewed lease ends %v, before Redis's %v + TTL − slack: cut short", time.UnixMilli(rn.GetExpiresAt()), before)
					}
					expiresAt := time.UnixMilli(rn.GetExpiresAt())
					var got *locksv1.AcquireResponse
					if waiting {
						got = acquire(t, next, resource, "b", ttl.Milliseconds(), 10_000)
					} else {
						for got = acquire(t, next, resource, "b", ttl.Milliseconds(), 0); !got.GetAcquired(); got = acquire(t, next, resource, "b", ttl.Milliseconds(), 0) {
							if h := got.GetHolder(); h != "a" {
								t.Fatalf("Acquire(%s, b) refused naming holder %q, want a", resource, h)
							}
						}
					}
					after := redistest.Time(t, rdb)
					if !got.GetAcquired() {
						t.Fatalf("Acquire(%s, b) = %v, want acquired once a's lease ended", resource, got)
					}
					if after.Before(expiresAt) {
						t.Errorf("b got %s at Redis's %v at the latest, %v before a's lease ended (%v)", resource, after, expiresAt.Sub(after), expiresAt)
					}
				})
			}
		}
	}
}
