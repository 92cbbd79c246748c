package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestOccupancyMatchesTheRule drives the scripts with random joins, leaves, renewals and
// sweeps of lapsed sessions, and after every step compares the stored counts with the Go twin
// of the rule (domain.Occupancy) applied to a model of the open sessions.
func TestOccupancyMatchesTheRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const code = "occ-room"
	now := int64(1_800_000_000_000)
	s := openRoom(t, code, 24*time.Hour, ms(now), 1000)
	rng := rand.New(rand.NewPCG(7, 11))
	model := map[string]domain.Session{}
	lastSeq, _, _, err := s.Occupancy(ctx, code) // a room's seqs start at Redis TIME (µs)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for step := range 400 {
		var what string
		var ch Change
		var err error
		switch op := rng.IntN(10); {
		case op < 4: // join
			next++
			id := fmt.Sprintf("s%d", next)
			role := domain.Viewer
			if rng.IntN(5) == 0 {
				role = domain.Leader
			}
			client := fmt.Sprintf("c%d", rng.IntN(4))
			lease := now + int64(1+rng.IntN(5))*1000
			var j Joined
			j, err = s.Join(ctx, code, Session{ID: id, Role: role, ClientID: client, Attachment: "a-" + id, Name: "name of " + id}, ms(now), ms(lease))
			ch = j.Change
			model[id] = domain.Session{Role: role, ClientID: client, LeaseUntil: lease}
			what = fmt.Sprintf("join %s %s/%s", id, role, client)
		case op < 7: // leave, sometimes a session that is not open
			id := fmt.Sprintf("s%d", 1+rng.IntN(next+1))
			ch, err = s.Leave(ctx, code, id, "a-"+id, ms(now))
			delete(model, id)
			what = "leave " + id
		case op < 8: // renew a few sessions
			var ids []string
			for id := range model {
				if rng.IntN(2) == 0 {
					ids = append(ids, id)
				}
			}
			lease := now + 3000
			rs := []Renewal{{Code: code, IDs: ids}}
			err = s.RenewAll(ctx, rs, ms(now), ms(lease))
			if err == nil {
				err = rs[0].Err
			}
			for _, id := range ids {
				m := model[id]
				m.LeaseUntil = lease
				model[id] = m
			}
			what = fmt.Sprintf("renew %d", len(ids))
		default: // time passes; the alarm sweeps lapsed sessions
			now += int64(rng.IntN(2500))
			var out SweepOutcome
			out, _, ch, err = s.Sweep(ctx, code, ms(now))
			if out != Active {
				t.Fatalf("step %d: sweep outcome %v, want Active", step, out)
			}
			for id, m := range model {
				if m.LeaseUntil <= now {
					delete(model, id)
				}
			}
			what = fmt.Sprintf("sweep at +%d", now-1_800_000_000_000)
		}
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, what, err)
		}
		list := make([]domain.Session, 0, len(model))
		leaders := 0
		for _, m := range model {
			list = append(list, m)
			if m.Role == domain.Leader {
				leaders++
			}
		}
		wantViewers, wantLeader := domain.Occupancy(list, now-1) // every modelled session is open
		seq, viewers, storedLeaders, err := s.Occupancy(ctx, code)
		if err != nil {
			t.Fatal(err)
		}
		if int(viewers) != wantViewers || (storedLeaders > 0) != wantLeader || int(storedLeaders) != leaders {
			t.Fatalf("step %d (%s): stored %d viewers, %d leaders; rule says %d viewers, leader %v (%d sessions)",
				step, what, viewers, storedLeaders, wantViewers, wantLeader, leaders)
		}
		if ch.Seq != 0 && ch.Seq != lastSeq+1 {
			t.Fatalf("step %d (%s): change seq %d after %d, want the next one", step, what, ch.Seq, lastSeq)
		}
		if ch.Seq != 0 {
			lastSeq = ch.Seq
		}
		if seq != lastSeq {
			t.Fatalf("step %d (%s): stored seq %d, want %d", step, what, seq, lastSeq)
		}
		// The people are one per role and client id of the open sessions.
		wantPeople := map[string]bool{}
		for _, m := range model {
			wantPeople[string(m.Role)+":"+m.ClientID] = true
		}
		people, err := s.People(ctx, code)
		if err != nil {
			t.Fatal(err)
		}
		gotPeople := map[string]bool{}
		for _, p := range people {
			gotPeople[string(p.Role)+":"+p.ClientID] = true
			if !strings.HasPrefix(p.Name, "name of s") {
				t.Fatalf("step %d (%s): person %v has a name no session gave", step, what, p)
			}
		}
		if !maps.Equal(gotPeople, wantPeople) || len(people) != len(gotPeople) {
			t.Fatalf("step %d (%s): stored people %v, want %v", step, what, people, wantPeople)
		}
	}
}

func ms(t int64) time.Time { return time.UnixMilli(t) }

// openRoom is a store on the test's Redis (2 alarm shards, rooms idle out after idleTTL) holding
// the room code, created at now with a video of durationMs.
func openRoom(t *testing.T, code string, idleTTL time.Duration, now time.Time, durationMs int64) *Store {
	t.Helper()
	rdb, prefix := redistest.Client(t)
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: "room", Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(rdb, Options{Alarms: q, Prefix: prefix, IdleTTL: idleTTL})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Init(context.Background(), code, Seed{LastActivity: now, CreatedAt: now, Title: "v", DurationMs: durationMs}, now); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReattachCountsOnce: a session id joined again with the same role and client id is a
// re-attach (nothing counted, resumed), another role or client is refused, a leave from the
// replaced attachment changes nothing, and the current attachment's leave closes it.
func TestReattachCountsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const code = "reattach-room"
	now := time.UnixMilli(1_800_000_000_000)
	s := openRoom(t, code, time.Hour, now, 1000)
	lease := now.Add(time.Minute)
	first, err := s.Join(ctx, code, Session{ID: "s1", Role: domain.Viewer, ClientID: "phone", Attachment: "a1", Name: "Phone"}, now, lease)
	if err != nil || first.Resumed || first.Change.ViewersDelta != 1 || first.State.Viewers != 1 {
		t.Fatalf("first join = %+v, %v; want counted, not resumed", first, err)
	}
	again, err := s.Join(ctx, code, Session{ID: "s1", Role: domain.Viewer, ClientID: "phone", Attachment: "a2", Name: "Phone"}, now, lease)
	if err != nil || !again.Resumed || again.Change.Seq != 0 || again.State.Viewers != 1 {
		t.Fatalf("re-attach = %+v, %v; want resumed with no change and 1 viewer", again, err)
	}
	for _, ss := range []Session{
		{ID: "s1", Role: domain.Viewer, ClientID: "tablet", Attachment: "a3", Name: "X"},
		{ID: "s1", Role: domain.Leader, ClientID: "phone", Attachment: "a3", Name: "X"},
	} {
		if _, err := s.Join(ctx, code, ss, now, lease); !errors.Is(err, ErrSessionTaken) {
			t.Errorf("join %+v = %v, want ErrSessionTaken", ss, err)
		}
	}
	if ch, err := s.Leave(ctx, code, "s1", "a1", now); err != nil || ch.Seq != 0 {
		t.Fatalf("leave from the replaced attachment = %+v, %v; want no change", ch, err)
	}
	if _, viewers, _, _ := s.Occupancy(ctx, code); viewers != 1 {
		t.Fatalf("viewers after a stale leave = %d, want 1", viewers)
	}
	if ch, err := s.Leave(ctx, code, "s1", "a2", now); err != nil || ch.ViewersDelta != -1 {
		t.Fatalf("leave from the current attachment = %+v, %v; want one viewer fewer", ch, err)
	}
	// Acting needs an open session; a ref is applied once.
	lead, err := s.Join(ctx, code, Session{ID: "l1", Role: domain.Leader, ClientID: "lead", Attachment: "b1", Name: "Lead"}, now, lease)
	if err != nil || lead.LastRef != 0 {
		t.Fatalf("leader join = %+v, %v", lead, err)
	}
	act := Action{Kind: "sync", Frame: []byte("f"), Session: "l1", Ref: 7, Args: []any{1, 5000, 100, 0, 0}}
	if applied, err := s.Act(ctx, code, act, now); err != nil || !applied {
		t.Fatalf("Act(ref 7) = %v, %v; want applied", applied, err)
	}
	if applied, err := s.Act(ctx, code, act, now); err != nil || applied {
		t.Fatalf("Act(ref 7) again = %v, %v; want a repeat", applied, err)
	}
	if back, _ := s.Join(ctx, code, Session{ID: "l1", Role: domain.Leader, ClientID: "lead", Attachment: "b2", Name: "Lead"}, now, lease); back.LastRef != 7 {
		t.Fatalf("leader re-attach LastRef = %d, want 7", back.LastRef)
	}
	act.Session = "gone"
	if _, err := s.Act(ctx, code, act, now); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("Act from a session that is not open = %v, want ErrSessionClosed", err)
	}
}
