package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/lobby/service"
)

// Two Lobby replicas on one Redis, one of them with a clock 30s ahead (and, separately, 30s
// behind): a room created on either stays listed on both until its last activity plus the idle
// TTL and grace, by Redis's clock. Without the shared clock the replica ahead prunes rooms 30s
// early, and rooms the replica behind creates are pruned at once by the other.
func TestSkewedReplicaPrunesNoRoomEarly(t *testing.T) {
	t.Parallel()
	rdb, _ := redistest.Client(t)
	redisNow := func() time.Time { return redistest.Time(t, rdb) }
	const idleTTL, grace = 2 * time.Second, time.Second
	for _, skew := range []time.Duration{30 * time.Second, -30 * time.Second} {
		t.Run(fmt.Sprintf("skew %v", skew), func(t *testing.T) {
			t.Parallel()
			prefix := redistest.Prefix(t)
			start := func(base func() time.Time) lobbyv1.LobbyServiceClient {
				return serve(t, service.Options{
					Core:    server.Core{Prefix: prefix, Now: base, DisciplineClock: true},
					IdleTTL: idleTTL, PruneGrace: grace,
				})
			}
			replicas := map[string]lobbyv1.LobbyServiceClient{"in step": start(time.Now), "skewed": start(func() time.Time { return time.Now().Add(skew) })}
			deadlines := map[string]time.Time{} // room code → last activity + TTL + grace
			for name, c := range replicas {
				before := redisNow()
				res, err := c.CreateRoom(context.Background(), &lobbyv1.CreateRoomRequest{Name: "by " + name, Video: &lobbyv1.Video{Title: "Routine", DurationMs: 60_000}})
				if err != nil {
					t.Fatalf("CreateRoom on %s: %v", name, err)
				}
				after := redisNow()
				got, err := c.GetRoom(context.Background(), &lobbyv1.GetRoomRequest{Code: res.GetCode()})
				if err != nil {
					t.Fatal(err)
				}
				// Stamped during the create, by Redis's clock give or take the replica's error
				// bound (well under 50ms on one host).
				last := time.UnixMilli(got.GetRoom().GetLastActivity())
				if last.Before(before.Add(-50*time.Millisecond)) || last.After(after.Add(50*time.Millisecond)) {
					t.Errorf("room by %s: last activity %v, outside the create's [%v, %v] by Redis's clock", name, last, before, after)
				}
				deadlines[res.GetCode()] = last.Add(idleTTL + grace)
			}
			// Each poll lists on both replicas; a room missing from a listing that ended before
			// its deadline was pruned early.
			gone := map[string]bool{}
			wait.For(t, "every room pruned from both listings", func() error {
				for name, c := range replicas {
					res, err := c.ListRooms(context.Background(), &lobbyv1.ListRoomsRequest{})
					if err != nil {
						return err
					}
					after := redisNow()
					listed := map[string]bool{}
					for _, r := range res.GetRooms() {
						listed[r.GetCode()] = true
					}
					for code, deadline := range deadlines {
						key := code + " on " + name
						if listed[code] || gone[key] {
							continue
						}
						if after.Before(deadline) {
							t.Errorf("room %s missing from %s's listing by %v (Redis), %v before its deadline %v", code, name, after, deadline.Sub(after), deadline)
						}
						gone[key] = true
					}
				}
				if len(gone) < 2*len(deadlines) {
					return fmt.Errorf("%d of %d listings pruned", len(gone), 2*len(deadlines))
				}
				return nil
			})
		})
	}
}
