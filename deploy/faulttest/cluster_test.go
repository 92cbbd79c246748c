//go:build faulttest

package faulttest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

// TestClusterFailoverLosesNoAlarm runs the reservations service on a Redis Cluster of three
// masters with a replica each, creates holds whose expiries spread over three seconds, and kills
// a master with SIGKILL in the middle of the expiries, with writes in flight. The service runs
// with replica durability: a create or an expiry counts as done only once the master's replica
// has it (WAIT), so nothing waits for the replicas before the kill. After the replica takes
// over, every hold has expired exactly once (none lost, none with an expirationCount above 1)
// and no expiry's effect ran twice.
func TestClusterFailoverLosesNoAlarm(t *testing.T) {
	t.Parallel()
	const holds = 6000
	t0 := time.Now()
	cl := redistest.StartCluster(t, 3)
	t.Logf("cluster of 6 nodes up in %v", time.Since(t0).Round(time.Millisecond))
	prefix := redistest.Prefix(t)
	ev := newEvents()
	// The service's clock runs an hour behind while the holds are created and stops short of
	// the first due time, so none falls due before all are created, however slow the machine;
	// then it runs on from the first due time at a quarter speed, so the expiries spread
	// over four times as long as the creates took (up to the 5 s TTL) and the kill lands among them.
	firstDue := time.Now().Add(-time.Hour + 5*time.Second)
	var jumped atomic.Bool
	var jumpReal atomic.Int64 // ns since the epoch
	now := func() time.Time {
		if !jumped.Load() {
			return minTime(time.Now().Add(-time.Hour), firstDue.Add(-time.Millisecond))
		}
		return firstDue.Add(time.Duration(time.Now().UnixNano()-jumpReal.Load()) / 4)
	}
	conn := start(t, servertest.Serve(reservations.New, reservations.Options{
		Core: server.Core{Redis: redisx.Config{ClusterAddrs: cl.Addrs(), Durability: redisx.Replica},
			Prefix: prefix, Logger: ev.Logger(), Now: now},
		Shards: 16, Lease: time.Second, AlarmLog: ev, // a 1 s lease is 4 s of real time
	}))
	client := reservationsv1.NewReservationServiceClient(conn)
	ctx := context.Background()

	// Create the holds at a steady pace over 3 s, so that they fall due over 3 s or more and
	// the kill lands among the expiries.
	began := time.Now()
	spread := 3 * time.Second
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= holds {
					return
				}
				if d := time.Until(began.Add(spread * time.Duration(i) / holds)); d > 0 {
					time.Sleep(d) // pacing the load, not waiting for a result
				}
				if _, err := client.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{
					ReservationId: holdID(int(i)), TtlSeconds: 5}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create before the fault: %v", err)
	}
	t.Logf("%d holds created (each on its master's replica when acknowledged) in %v", holds, time.Since(began).Round(time.Millisecond))
	jumpReal.Store(time.Now().UnixNano())
	jumped.Store(true)

	// Kill the master that serves shard 0's keys once a third of the holds have expired.
	wait.Until(t, "a third of the holds to expire", func() bool {
		effects, _, _ := ev.snapshot()
		return effects >= holds/3
	})
	victim := cl.MasterOf(t, prefix+":{reservations:0}")
	atKill, _, _ := ev.snapshot()
	killed := time.Now()
	cl.Kill(t, victim)
	cl.WaitHealthy(t, 30*time.Second)
	failover := time.Since(killed)
	t.Logf("failover done %v after the kill; %v since the first create", failover.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	// The promoted replica has no replica of its own, so under replica durability nothing it
	// serves can be confirmed (UNAVAILABLE, outcome unknown) until the killed master is back,
	// as its replica.
	cl.Start(t, victim)
	// Count every hold after the failover: expired, exactly once, with no alarm left.
	expired, getErrs := 0, 0
	var lastErr error
	var lastErrAt time.Time
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < holds; {
		r, err := client.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: holdID(i)})
		if err == nil && r.GetReservation().GetStatus() == "expired" {
			res := r.GetReservation()
			if res.GetExpirationCount() != 1 || res.AlarmAt != nil {
				t.Fatalf("%s = %v, want expired once with no alarm", holdID(i), res)
			}
			expired++
			i++
			continue
		}
		if err != nil {
			getErrs++
			lastErr, lastErrAt = err, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not expired 60s after the failover: %v, err %v", holdID(i), r.GetReservation(), err)
		}
		time.Sleep(20 * time.Millisecond) // polling the hold's state, bounded by the deadline
	}
	effects, redone, retries := ev.snapshot()
	unlogged := max(0, holds-effects+redone)
	t.Logf("every hold checked %v after the kill", time.Since(killed).Round(time.Millisecond))
	if getErrs > 0 {
		t.Logf("%d reads failed while the client found the new master, the last %v after the kill: %v",
			getErrs, lastErrAt.Sub(killed).Round(time.Millisecond), lastErr)
	}
	t.Logf("at stake: %d holds on a 3-master cluster; master %s SIGKILLed after %d expiries; failover took %v",
		holds, victim, atKill, failover.Round(time.Millisecond))
	if atKill >= holds {
		t.Fatalf("every hold had expired before the kill: the fault missed the load")
	}
	t.Logf("after: %d of %d holds expired exactly once (expirationCount 1, no alarm); lost 0; expired twice 0", expired, holds)
	t.Logf("the service logged %d expiry effects for %d holds and %d retried firings; %d expiries ran on the dead master and reached its replica but their replies died with it (their retry changed nothing)",
		effects, holds, retries, unlogged)
	if redone > 0 {
		// Under async, the dead master acknowledged transitions it never shipped, and their
		// effects ran again on the replica: replica durability must leave none.
		t.Errorf("%d holds' expiry effects ran twice (an expiry acknowledged by the dead master and lost with it), want none under replica durability", redone)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func holdID(i int) string { return fmt.Sprintf("hold-%05d", i) }
