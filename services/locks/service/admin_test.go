package service_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/prom/promtest"
)

// histogramCount is how many observations a histogram series holds in the default registry;
// labels are name, value pairs the series must all carry.
func histogramCount(t *testing.T, name string, labels ...string) uint64 {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range promtest.Series(t, prometheus.DefaultGatherer, name, want) {
		return m.GetHistogram().GetSampleCount()
	}
	return 0
}

// TestAdminAndLockMetrics checks what the service tells operators: a lock and its expiry alarm
// through the admin service, a timed-out wait and a hold in the metrics.
func TestAdminAndLockMetrics(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	ctx := context.Background()
	admin := adminv1.NewAlarmAdminServiceClient(e.conn)

	got, err := e.locks.Acquire(ctx, &locksv1.AcquireRequest{Resource: "adm-lock", Owner: "alice"})
	if err != nil || !got.GetAcquired() {
		t.Fatalf("Acquire(adm-lock, alice) = %v, %v; want acquired", got, err)
	}
	res, err := admin.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: "adm-lock"})
	if err != nil {
		t.Fatalf("LookupObject(adm-lock): %v", err)
	}
	obj := res.GetObject().AsMap()
	if res.GetNamespace() != "locks" || !res.GetFound() || obj["held"] != true || obj["owner"] != "alice" ||
		res.GetAlarm().GetDueAt() != got.GetExpiresAt() {
		t.Fatalf("LookupObject(adm-lock) = %v; want held by alice with its alarm at expiresAt %d", res, got.GetExpiresAt())
	}
	pending, err := admin.ListPending(ctx, &adminv1.ListPendingRequest{})
	if err != nil || pending.GetPending() != 1 {
		t.Fatalf("ListPending = %v, %v; want the one lock's alarm", pending, err)
	}

	waits := histogramCount(t, "vigil_lock_wait_seconds", "result", "timed_out")
	wait := int64(50)
	if r, err := e.locks.Acquire(ctx, &locksv1.AcquireRequest{Resource: "adm-lock", Owner: "bob", WaitMs: &wait}); err != nil || r.GetAcquired() {
		t.Fatalf("Acquire(adm-lock, bob, wait 50ms) = %v, %v; want not acquired", r, err)
	}
	if n := histogramCount(t, "vigil_lock_wait_seconds", "result", "timed_out"); n < waits+1 {
		t.Fatalf("vigil_lock_wait_seconds{result=timed_out} count = %d after a timed-out wait, want at least %d", n, waits+1)
	}
	holds := histogramCount(t, "vigil_lock_hold_seconds", "ended", "released")
	if r, err := e.locks.Release(ctx, &locksv1.ReleaseRequest{Resource: "adm-lock", Owner: "alice"}); err != nil || !r.GetReleased() {
		t.Fatalf("Release(adm-lock, alice) = %v, %v; want released", r, err)
	}
	if n := histogramCount(t, "vigil_lock_hold_seconds", "ended", "released"); n < holds+1 {
		t.Fatalf("vigil_lock_hold_seconds{ended=released} count = %d after a release, want at least %d", n, holds+1)
	}
}
