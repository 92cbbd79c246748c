package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

// t0 is the tests' clock: every time decision of the scripts takes now as an argument.
var t0 = time.UnixMilli(1_764_000_000_000)

const lease = 15 * time.Second

func members(p domain.Presence) string {
	out := ""
	for _, m := range p.Members {
		out += fmt.Sprintf("%s(%s@%d) ", m.UserID, m.Username, m.Since)
	}
	return fmt.Sprintf("v%d [%s]", p.Version, out)
}

func presenceAt(t *testing.T, s *Store, room string, now time.Time) string {
	t.Helper()
	p, err := s.Presence(context.Background(), room, now)
	if err != nil {
		t.Fatalf("Presence = %v", err)
	}
	return members(p)
}

func enter(t *testing.T, s *Store, room, id, user, name, holder string, now time.Time) bool {
	t.Helper()
	resumed, err := s.Enter(context.Background(), room, domain.Session{ID: id, UserID: user, Username: name}, holder, now, now.Add(lease))
	if err != nil {
		t.Fatalf("Enter(%s, %s) = %v", id, user, err)
	}
	return resumed
}

// TestPresenceCountsSessionsPerUser: a member is a user id; their second session is no
// arrival (and keeps the first session's username), a re-attach is none either, and only
// their last session's exit is a departure. Exits are idempotent.
func TestPresenceCountsSessionsPerUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, 10)
	if got := presenceAt(t, s, "r", t0); got != "v0 []" {
		t.Fatalf("empty room = %s, want v0 []", got)
	}
	if enter(t, s, "r", "g1:1", "u1", "Ann", "h1", t0) {
		t.Fatal("first Enter resumed, want a new session")
	}
	enter(t, s, "r", "g1:2", "u2", "Bo", "h1", t0.Add(time.Second))
	if enter(t, s, "r", "g2:1", "u1", "Annie", "h2", t0.Add(2*time.Second)) {
		t.Fatal("a second session of u1 resumed, want a new session")
	}
	want := "v2 [u1(Ann@1764000000000) u2(Bo@1764000001000) ]"
	if got := presenceAt(t, s, "r", t0.Add(3*time.Second)); got != want {
		t.Fatalf("after u1 twice and u2 = %s, want %s", got, want)
	}
	if !enter(t, s, "r", "g1:1", "u1", "Ann", "h3", t0.Add(3*time.Second)) {
		t.Fatal("Enter of an open session did not resume")
	}
	if closed, err := s.Exit(ctx, "r", "g1:1", "", t0); err != nil || !closed {
		t.Fatalf("Exit(g1:1) = %v, %v; want closed", closed, err)
	}
	if got := presenceAt(t, s, "r", t0.Add(3*time.Second)); got != want {
		t.Fatalf("after u1's first session closed = %s, want %s (u1 has another)", got, want)
	}
	if closed, err := s.Exit(ctx, "r", "g2:1", "", t0); err != nil || !closed {
		t.Fatalf("Exit(g2:1) = %v, %v; want closed", closed, err)
	}
	if closed, err := s.Exit(ctx, "r", "g2:1", "", t0); err != nil || closed {
		t.Fatalf("Exit(g2:1) again = %v, %v; want not open", closed, err)
	}
	if got := presenceAt(t, s, "r", t0.Add(3*time.Second)); got != "v3 [u2(Bo@1764000001000) ]" {
		t.Fatalf("after u1's last session closed = %s, want v3 [u2]", got)
	}
	if got := presenceAt(t, s, "other", t0); got != "v0 []" {
		t.Errorf("another room = %s, want v0 []", got)
	}
}

// TestPresenceRefusesATakenSessionID: a session id open for one user is not re-used for
// another, and the refusal writes nothing.
func TestPresenceRefusesATakenSessionID(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, 10)
	enter(t, s, "r", "g1:1", "u1", "Ann", "h1", t0)
	_, err := s.Enter(context.Background(), "r", domain.Session{ID: "g1:1", UserID: "u2", Username: "Bo"}, "h1", t0, t0.Add(lease))
	if !errors.Is(err, domain.ErrSessionTaken) {
		t.Fatalf("Enter of u1's session id for u2 = %v, want ErrSessionTaken", err)
	}
	if got := presenceAt(t, s, "r", t0); got != "v1 [u1(Ann@1764000000000) ]" {
		t.Errorf("after the refusal = %s, want only u1 at v1", got)
	}
}

// TestPresenceLeasesAndHolders: a session whose lease ended is swept by whatever touches the
// room next (a read here); a renewal extends only the renewing holder's sessions, reports the
// lapsed ones missing and the re-attached ones moved; an exit by an old holder changes nothing.
func TestPresenceLeasesAndHolders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, 10)
	enter(t, s, "r", "a", "u1", "Ann", "h1", t0) // lease ends t0+15s
	enter(t, s, "r", "b", "u2", "Bo", "h1", t0)  // lease ends t0+15s
	enter(t, s, "r", "c", "u3", "Cy", "h1", t0)  // moves to h2 below
	enter(t, s, "r", "c", "u3", "Cy", "h2", t0.Add(time.Second))
	missing, moved, err := s.Renew(ctx, "r", "h1", []string{"a", "c", "gone"}, t0.Add(10*time.Second), t0.Add(25*time.Second))
	if err != nil || fmt.Sprint(missing, moved) != "[gone] [c]" {
		t.Fatalf("Renew(h1: a, c, gone) = %v %v, %v; want missing [gone], moved [c]", missing, moved, err)
	}
	if closed, _ := s.Exit(ctx, "r", "c", "h1", t0); closed {
		t.Error("Exit(c) by its old holder closed it, want unchanged")
	}
	// At t0+15s b's lease has ended; a's was renewed to t0+25s, c's runs to t0+16s.
	if got := presenceAt(t, s, "r", t0.Add(15*time.Second)); got != "v4 [u1(Ann@1764000000000) u3(Cy@1764000000000) ]" {
		t.Fatalf("at t0+15s = %s, want u1 and u3 (u2's lease ended: v4)", got)
	}
	if got := presenceAt(t, s, "r", t0.Add(25*time.Second)); got != "v6 []" {
		t.Fatalf("at t0+25s = %s, want nobody at v6", got)
	}
	missing, _, err = s.Renew(ctx, "r", "h1", []string{"a"}, t0.Add(26*time.Second), t0.Add(40*time.Second))
	if err != nil || fmt.Sprint(missing) != "[a]" {
		t.Errorf("Renew after a's lease ended = %v, %v; want missing [a]", missing, err)
	}
}

// TestPresenceChangesArePublished: each arrival and departure reaches the room's subscribers
// once, at consecutive versions, with the member's fields.
func TestPresenceChangesArePublished(t *testing.T) {
	t.Parallel()
	ctx, s, f := runFeed(t, 10, 64)
	sub, err := f.Subscribe(ctx, "r 日")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	enter(t, s, "r 日", "a", "user 1", "Zoë van Dijk", "h1", t0)
	enter(t, s, "r 日", "b", "user 1", "other", "h1", t0)
	if _, err := s.Exit(ctx, "r 日", "a", "", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exit(ctx, "r 日", "b", "", t0); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 2 {
		select {
		case e := <-sub.C:
			switch {
			case e.Change == nil:
				t.Fatalf("feed gave %+v, want presence changes only", e)
			case e.Change.Joined != nil:
				got = append(got, fmt.Sprintf("%d join %+v", e.Change.Version, *e.Change.Joined))
			default:
				got = append(got, fmt.Sprintf("%d leave %q", e.Change.Version, e.Change.Left))
			}
		case <-time.After(wait.Deadline):
			t.Fatalf("got %v within %v, want 2 changes", got, wait.Deadline)
		}
	}
	want := []string{`1 join {UserID:user 1 Username:Zoë van Dijk Since:1764000000000 Order:1}`, `2 leave "user 1"`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("changes = %q, want %q", got, want)
	}
}
