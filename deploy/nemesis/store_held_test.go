//go:build nemesis

package nemesis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// TestStoreHeldLinkRefusesEveryWrite holds the replication link of the store's primary (the
// sentinels still see it, so nothing fails over: after each call the test checks that they
// still name it) and calls every unary write RPC of every domain under replica durability.
// Each must answer UNAVAILABLE: a write no replica has would be lost with the primary, so it
// may not be acknowledged. The calls run twice: at once (no replica confirms the write: its
// outcome is unknown) and once the primary has gone maxLag without a replica's acknowledgment
// (it refuses writes: nothing was applied).
func TestStoreHeldLinkRefusesEveryWrite(t *testing.T) {
	s := startStore(t)
	prefix := redistest.Prefix(t)
	replica := envDurability + "=replica"
	lobbyc := startCluster(t, "lobby", s.url(), prefix+"-rooms", 1, replica)
	locks := locksv1.NewLockServiceClient(startCluster(t, "locks", s.url(), prefix+"-locks", 1, replica).conn)
	res := reservationsv1.NewReservationServiceClient(startCluster(t, "reservations", s.url(), prefix+"-reservations", 1, replica).conn)
	chat := chatv1.NewChatServiceClient(startCluster(t, "chat", s.url(), prefix+"-chat", 1, replica).conn)
	lobby := lobbyv1.NewLobbyServiceClient(lobbyc.conn)
	room := roomv1.NewRoomServiceClient(startCluster(t, "rooms", s.url(), prefix+"-rooms", 1, replica,
		envLobby+"="+lobbyc.replicas[0].front.addr()).conn)

	// What the writes act on, made while the link flows: a lock held, holds to confirm and to
	// release, rooms to end and to touch, count and remove (per round).
	ctx := context.Background()
	call := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		if err := upTo3Tries(f); err != nil {
			t.Fatalf("%s before the hold: %v", what, err)
		}
	}
	ttl := int64(time.Minute / time.Millisecond)
	var tokens [2]int64
	type roomRef struct{ code, leader string }
	var endRooms, lobbyRooms [2]roomRef
	for round := range 2 {
		call("acquire", func(ctx context.Context) error {
			r, err := locks.Acquire(ctx, &locksv1.AcquireRequest{Resource: fmt.Sprintf("held-%d", round), Owner: "o", TtlMs: &ttl})
			tokens[round] = r.GetFencingToken()
			return err
		})
		for _, id := range []string{"confirm", "release"} {
			call("create "+id, func(ctx context.Context) error {
				_, err := res.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{ReservationId: fmt.Sprintf("%s-%d", id, round), TtlSeconds: 60})
				if status.Code(err) == codes.AlreadyExists {
					return nil
				}
				return err
			})
		}
		for _, r := range []*roomRef{&endRooms[round], &lobbyRooms[round]} {
			call("create room", func(ctx context.Context) error {
				c, err := lobby.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{Name: "held", Video: &lobbyv1.Video{Title: "t", DurationMs: 60000}})
				*r = roomRef{c.GetCode(), c.GetLeaderToken()}
				return err
			})
		}
	}

	p := s.primary()
	p.front.hold(fromReplica)
	held := time.Now()
	t.Cleanup(func() {
		p.front.release()
	})
	sentences := map[string]int{}
	for round, when := range []string{"at once", "after min-replicas-max-lag"} {
		if round == 1 {
			<-time.After(time.Until(held.Add(maxLag + time.Second)))
		}
		lr, er := lobbyRooms[round], endRooms[round]
		for _, w := range []struct {
			rpc  string
			call func(ctx context.Context) error
		}{
			{"locks Acquire", func(ctx context.Context) error {
				_, err := locks.Acquire(ctx, &locksv1.AcquireRequest{Resource: fmt.Sprintf("free-%d", round), Owner: "o", TtlMs: &ttl})
				return err
			}},
			{"locks Renew", func(ctx context.Context) error {
				_, err := locks.Renew(ctx, &locksv1.RenewRequest{Resource: fmt.Sprintf("held-%d", round), Owner: "o", TtlMs: &ttl, FencingToken: &tokens[round]})
				return err
			}},
			{"locks Release", func(ctx context.Context) error {
				_, err := locks.Release(ctx, &locksv1.ReleaseRequest{Resource: fmt.Sprintf("held-%d", round), Owner: "o", FencingToken: &tokens[round]})
				return err
			}},
			{"reservations CreateReservation", func(ctx context.Context) error {
				_, err := res.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{ReservationId: fmt.Sprintf("new-%d", round), TtlSeconds: 60})
				return err
			}},
			{"reservations ConfirmReservation", func(ctx context.Context) error {
				_, err := res.ConfirmReservation(ctx, &reservationsv1.ConfirmReservationRequest{ReservationId: fmt.Sprintf("confirm-%d", round)})
				return err
			}},
			{"reservations ReleaseReservation", func(ctx context.Context) error {
				_, err := res.ReleaseReservation(ctx, &reservationsv1.ReleaseReservationRequest{ReservationId: fmt.Sprintf("release-%d", round)})
				return err
			}},
			{"chat PostMessage", func(ctx context.Context) error {
				_, err := chat.PostMessage(ctx, &chatv1.PostMessageRequest{Room: "held", UserId: "u", Body: "b", PostId: fmt.Sprintf("post-%d", round)})
				return err
			}},
			{"lobby CreateRoom", func(ctx context.Context) error {
				_, err := lobby.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{Name: "held", Video: &lobbyv1.Video{Title: "t", DurationMs: 60000}})
				return err
			}},
			{"lobby TouchRoom", func(ctx context.Context) error {
				_, err := lobby.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: lr.code, At: time.Now().UnixMilli()})
				return err
			}},
			{"lobby ApplyOccupancyDelta", func(ctx context.Context) error {
				_, err := lobby.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: lr.code, Seq: 1, ViewersDelta: 1})
				return err
			}},
			{"lobby ApplyOccupancySnapshot", func(ctx context.Context) error {
				_, err := lobby.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: lr.code, Seq: 2, Viewers: 1})
				return err
			}},
			{"lobby RemoveRoom", func(ctx context.Context) error {
				_, err := lobby.RemoveRoom(ctx, &lobbyv1.RemoveRoomRequest{Code: lr.code})
				return err
			}},
			{"room EndRoom", func(ctx context.Context) error {
				_, err := room.EndRoom(ctx, &roomv1.EndRoomRequest{Code: er.code, LeaderToken: er.leader})
				return err
			}},
		} {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			err := w.call(cctx)
			cancel()
			// The answer says something of a held link only if the held primary served it:
			// after a failover the services write to a primary whose link flows.
			if now, perr := s.agreedPrimary(); perr != nil || now != p {
				t.Fatalf("%s (%s): the sentinels no longer agree on %s as the primary (%v, %v): the hold "+
					"reached their links to it, or it looked down to them; the answer %v tests nothing",
					w.rpc, when, p.name, nodeName(now), perr, err)
			}
			st := status.Convert(err)
			if st.Code() != codes.Unavailable {
				t.Errorf("%s, replication held (%s): %v, want UNAVAILABLE (acknowledged while no replica has it)", w.rpc, when, err)
				continue
			}
			sentences[st.Message()]++
			t.Logf("%s (%s): UNAVAILABLE %q", w.rpc, when, st.Message())
		}
	}
	// Both refusals are reached: a write whose replica did not confirm it, and one the
	// fenced primary did not apply.
	for _, want := range []*usererr.Error{usererr.ErrOutcomeUnknown, usererr.ErrNotApplied} {
		if sentences[want.Msg] == 0 {
			t.Errorf("no answer said %q; answers: %v", want.Msg, keys(sentences))
		}
	}
	p.front.release()
	if np := s.waitHealed(); np != p {
		t.Errorf("healed after the release around %s, want the held primary %s (nothing was to fail over)", np.name, p.name)
	}
}

func nodeName(n *storeNode) string {
	if n == nil {
		return "none"
	}
	return n.name
}

func keys(m map[string]int) string {
	var out []string
	for k, n := range m {
		out = append(out, fmt.Sprintf("%dx %q", n, k))
	}
	return strings.Join(out, "; ")
}
