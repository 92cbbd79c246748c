package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// Two Room replicas on one Redis (with one Lobby), one of them with a clock 30s ahead (and,
// separately, 30s behind); a leader and a viewer on the skewed replica, a viewer on the other:
// no session's lease is cut short (the Lobby counts both viewers for as long as the room
// lives) and the room expires for idleness no earlier than its last activity plus the TTL, by
// Redis's clock. Without the shared clock the replica ahead expires the room at once, and the
// sessions of the replica behind are swept as lapsed by the other.
func TestSkewedReplicaCutsNoSessionShortAndExpiresNoRoomEarly(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{30 * time.Second, -30 * time.Second} {
		t.Run(fmt.Sprintf("skew %v", skew), func(t *testing.T) {
			t.Parallel()
			const idleTTL, lease = 5 * time.Second, 2 * time.Second
			e := newEnv(t, settings{idleTTL: idleTTL, grace: time.Minute, lease: lease})
			o := e.o
			o.Now, o.DisciplineClock = func() time.Time { return time.Now().Add(skew) }, true
			e.o = o
			skewed := e.startReplica().client
			opt, err := redis.ParseURL(e.url)
			if err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(opt)
			t.Cleanup(func() { _ = rdb.Close() })
			redisNow := func() time.Time {
				now, err := rdb.Time(context.Background()).Result()
				if err != nil {
					t.Fatal(err)
				}
				return now
			}

			code, token := e.createRoom()
			members := map[string]*member{
				"leader (skewed)":  join(t, skewed, code, leader, "lead", token),
				"viewer (skewed)":  join(t, skewed, code, viewer, "v-skewed", ""),
				"viewer (in step)": join(t, e.room, code, viewer, "v-in-step", ""),
			}
			wait.Until(t, "the Lobby counts 2 viewers and the leader", viewers(e, code, 2, true))
			r := e.lobbyRoom(code)
			deadline := time.UnixMilli(r.GetLastActivity()).Add(idleTTL)

			endedAt := map[string]time.Time{}
			cutShort := false
			wait.For(t, "the room expired", func() error {
				r := e.lobbyRoom(code)
				after := redisNow()
				if !cutShort && r != nil && after.Before(deadline) && (r.GetViewers() != 2 || !r.GetLeaderPresent()) {
					cutShort = true
					t.Errorf("by %v (Redis), %v before the room's idle deadline, the Lobby counts %d viewers, leader %v: a session's lease was cut short",
						after, deadline.Sub(after), r.GetViewers(), r.GetLeaderPresent())
				}
				for name, m := range members {
					if _, ok := endedAt[name]; !ok && m.hasEnded() {
						endedAt[name] = redisNow()
					}
				}
				if len(endedAt) < len(members) {
					return fmt.Errorf("%d of %d streams ended", len(endedAt), len(members))
				}
				return nil
			})
			for name, m := range members {
				if reason := m.ended(); reason != "expired" || endedAt[name].Before(deadline) {
					t.Errorf("%s: stream ended (%q) at %v (Redis) at the latest, want expired no earlier than the idle deadline %v",
						name, reason, endedAt[name], deadline)
				}
			}
		})
	}
}
