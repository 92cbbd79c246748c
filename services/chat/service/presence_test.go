package service

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/chat/internal/app"
)

// testClock is a replica's injected clock: the wall clock plus an offset the test moves, so a
// lease ends when the test says, not after a wait.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time             { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) Advance(d time.Duration)    { c.offset.Add(int64(d)) }
func withClock(c *testClock, o Options) Options { o.Core = server.Core{Now: c.Now}; return o }

// pstream is a Connect stream whose presence frames, read while waiting for another answer,
// are kept for nextChange.
type pstream struct {
	chatv1.ChatService_ConnectClient
	changes []string
}

// attach opens a Connect stream on room (with presence when asked) and returns it with its
// History; cancel ends it as a broken connection would.
func attach(t *testing.T, c chatv1.ChatServiceClient, room string, presence bool) (*pstream, *chatv1.History, context.CancelFunc) {
	t.Helper()
	s, h, cancel := openStream(t, c, &chatv1.Join{Room: room, Presence: presence})
	return &pstream{ChatService_ConnectClient: s}, h, cancel
}

// enterOn announces a session on s and returns its answer.
func enterOn(t *testing.T, s *pstream, id, user, name string) *chatv1.Entered {
	t.Helper()
	if err := s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Enter{Enter: &chatv1.Enter{SessionId: id, UserId: user, Username: name}}}); err != nil {
		t.Fatal(err)
	}
	for {
		r := s.next(t)
		if e := r.GetEntered(); e != nil {
			if e.GetSessionId() != id {
				t.Fatalf("Enter(%s) answered for %q", id, e.GetSessionId())
			}
			return e
		}
	}
}

// exitOn closes a session on s and returns its answer.
func exitOn(t *testing.T, s *pstream, id string) *chatv1.Exited {
	t.Helper()
	if err := s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Exit{Exit: id}}); err != nil {
		t.Fatal(err)
	}
	for {
		if e := s.next(t).GetExited(); e != nil {
			return e
		}
	}
}

// next reads the stream's next frame, keeping a presence frame for nextChange.
func (s *pstream) next(t *testing.T) *chatv1.ConnectResponse {
	t.Helper()
	r := recv(t, s)
	switch {
	case r.GetJoined() != nil:
		j := r.GetJoined()
		s.changes = append(s.changes, fmt.Sprintf("v%d join %s %s", j.GetVersion(), j.GetMember().GetUserId(), j.GetMember().GetUsername()))
	case r.GetLeft() != nil:
		s.changes = append(s.changes, fmt.Sprintf("v%d leave %s", r.GetLeft().GetVersion(), r.GetLeft().GetUserId()))
	case r.GetPresence() != nil:
		s.changes = append(s.changes, fmt.Sprintf("v%d all %s", r.GetPresence().GetVersion(), users(r.GetPresence().GetMembers())))
	}
	return r
}

// nextChange is the stream's next presence frame, written as "v<version> join <user> <name>",
// "v<version> leave <user>" or "v<version> all [<users>]".
func nextChange(t *testing.T, s *pstream) string {
	t.Helper()
	for len(s.changes) == 0 {
		s.next(t)
	}
	c := s.changes[0]
	s.changes = s.changes[1:]
	return c
}

func users(ms []*chatv1.Member) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GetUserId()
	}
	return "[" + strings.Join(out, " ") + "]"
}

func listPresence(t *testing.T, c chatv1.ChatServiceClient, room string) string {
	t.Helper()
	res, err := c.ListPresence(context.Background(), &chatv1.ListPresenceRequest{Room: room})
	if err != nil {
		t.Fatalf("ListPresence(%s) = %v", room, err)
	}
	return fmt.Sprintf("v%d %s", res.GetVersion(), users(res.GetMembers()))
}

func expectChange(t *testing.T, s *pstream, want string) {
	t.Helper()
	if got := nextChange(t, s); got != want {
		t.Fatalf("next presence change = %q, want %q", got, want)
	}
}

// TestPresenceJoinsAndLeaves: a member is a user id counted by open sessions. A second session
// of the same user is no join, closing one of two is no leave, the last one's exit is, and a
// stream the client closes (CloseSend) exits the sessions it holds.
func TestPresenceJoinsAndLeaves(t *testing.T) {
	t.Parallel()
	c := replicaClient(t, Options{})
	obs, h, _ := attach(t, c, "lobby 1", true)
	if p := h.GetPresence(); p == nil || p.GetVersion() != 0 || len(p.GetMembers()) != 0 {
		t.Fatalf("History.presence of an empty room = %v, want none at v0", p)
	}
	gw, h, _ := attach(t, c, "lobby 1", false)
	if h.GetPresence() != nil {
		t.Errorf("History.presence without presence asked = %v, want none", h.GetPresence())
	}
	if e := enterOn(t, gw, "g1.1", "u1", "Ann"); e.GetResumed() || e.GetError() != "" {
		t.Fatalf("Enter(g1.1) = %v, want a new session", e)
	}
	expectChange(t, obs, "v1 join u1 Ann")
	enterOn(t, gw, "g1.2", "u1", "Annie") // u1's second socket: no join
	enterOn(t, gw, "g1.3", "u2", "")      // no username: anonymous
	expectChange(t, obs, "v2 join u2 anonymous")
	exitOn(t, gw, "g1.1") // u1 still has g1.2: no leave
	exitOn(t, gw, "g1.3")
	expectChange(t, obs, "v3 leave u2")
	if got := listPresence(t, c, "lobby 1"); got != "v3 [u1]" {
		t.Fatalf("ListPresence = %s, want v3 [u1]", got)
	}
	res, _ := c.ListPresence(context.Background(), &chatv1.ListPresenceRequest{Room: "lobby 1"})
	if m := res.GetMembers()[0]; m.GetUsername() != "Ann" || m.GetSince() <= 0 {
		t.Errorf("member = %v, want Ann (her first socket's name) with a since", m)
	}
	exitOn(t, gw, "g1.2")
	expectChange(t, obs, "v4 leave u1")
	enterOn(t, gw, "g1.4", "u3", "Cy")
	expectChange(t, obs, "v5 join u3 Cy")
	if err := gw.CloseSend(); err != nil {
		t.Fatal(err)
	}
	expectChange(t, obs, "v6 leave u3")
	// A late joiner's history carries who is here, in order of arrival.
	enterOn(t, obs, "o.1", "u5", "Eve")
	enterOn(t, obs, "o.2", "u4", "Dan")
	_, h, _ = attach(t, c, "lobby 1", true)
	if got := users(h.GetPresence().GetMembers()); got != "[u5 u4]" || h.GetPresence().GetVersion() != 8 {
		t.Errorf("late joiner's presence = %s at v%d, want [u5 u4] at v8", got, h.GetPresence().GetVersion())
	}
}

// TestPresenceBadInput: a malformed enter or exit is answered with a sentence and writes
// nothing; the stream stays open. A bad room name is INVALID_ARGUMENT.
func TestPresenceBadInput(t *testing.T) {
	t.Parallel()
	c := replicaClient(t, Options{})
	gw, _, _ := attach(t, c, "r", true)
	for _, tc := range []struct{ id, user, name, want string }{
		{"", "u1", "Ann", "sessionId must be 1 to 128 characters of letters, digits, '_', '.', ':' or '-'."},
		{"a\tb", "u1", "Ann", "sessionId must be 1 to 128 characters of letters, digits, '_', '.', ':' or '-'."},
		{"s1", "", "Ann", "userId must be 1 to 128 characters."},
		{"s1", "u1", strings.Repeat("é", 65), "username must be 1 to 64 characters."},
		{"s1", "u\n1", "Ann", "userId must be UTF-8 text without control characters."},
	} {
		if e := enterOn(t, gw, tc.id, tc.user, tc.name); e.GetError() != tc.want {
			t.Errorf("Enter(%q, %q, %q) error = %q, want %q", tc.id, tc.user, tc.name, e.GetError(), tc.want)
		}
	}
	enterOn(t, gw, "s1", "u1", "Ann")
	expectChange(t, gw, "v1 join u1 Ann")
	if e := enterOn(t, gw, "s1", "u2", "Bo"); !strings.Contains(e.GetError(), "open for another user") {
		t.Errorf("Enter of u1's session id for u2 = %q, want the taken-session sentence", e.GetError())
	}
	if e := exitOn(t, gw, "bad id"); !strings.HasPrefix(e.GetError(), "sessionId must be") {
		t.Errorf("Exit(bad id) error = %q, want the sessionId sentence", e.GetError())
	}
	if got := listPresence(t, c, "r"); got != "v1 [u1]" {
		t.Errorf("after the refusals ListPresence = %s, want v1 [u1] (nothing written)", got)
	}
	for _, room := range []string{"", "a\nb", strings.Repeat("a", 129)} {
		_, err := c.ListPresence(context.Background(), &chatv1.ListPresenceRequest{Room: room})
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "room must be 1 to 128 bytes of UTF-8 text without control characters." {
			t.Errorf("ListPresence(%q) = %v, want INVALID_ARGUMENT with the room sentence", room, err)
		}
	}
}

// TestPresenceReattachAfterReplicaRestart: a replica that stops ends its streams but not their
// sessions; entering them again on another replica resumes them, and nobody sees a leave or
// a join. Two gateways' streams (on two replicas) see the same changes.
func TestPresenceReattachAfterReplicaRestart(t *testing.T) {
	t.Parallel()
	prefix := redistest.Prefix(t)
	a, b := start(t, prefix, Options{}), start(t, prefix, Options{})
	ca, cb := client(t, a.Addr), client(t, b.Addr)
	gw1, _, _ := attach(t, ca, "r", true) // gateway 1 on replica a
	gw2, _, _ := attach(t, cb, "r", true) // gateway 2 on replica b
	enterOn(t, gw1, "g1.1", "u1", "Ann")
	enterOn(t, gw1, "g1.2", "u2", "Bo")
	enterOn(t, gw2, "g2.1", "u2", "Bo") // u2 on both gateways: one member
	enterOn(t, gw2, "g2.2", "u3", "Cy")
	want := []string{"v1 join u1 Ann", "v2 join u2 Bo", "v3 join u3 Cy"}
	for _, s := range []*pstream{gw1, gw2} {
		for _, w := range want {
			expectChange(t, s, w)
		}
	}
	// Replica a stops: gateway 1's stream ends with UNAVAILABLE, its sessions stay.
	a.Drain(t)
	for {
		if _, err := gw1.Recv(); err != nil {
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("gateway 1's stream ended with %v, want UNAVAILABLE", err)
			}
			break
		}
	}
	if got := listPresence(t, cb, "r"); got != "v3 [u1 u2 u3]" {
		t.Fatalf("after replica a stopped ListPresence = %s, want v3 [u1 u2 u3]", got)
	}
	gw1, h, _ := attach(t, cb, "r", true)
	if got := users(h.GetPresence().GetMembers()); got != "[u1 u2 u3]" {
		t.Fatalf("gateway 1's re-attach sees %s, want [u1 u2 u3]", got)
	}
	for _, id := range []string{"g1.1", "g1.2"} {
		if e := enterOn(t, gw1, id, map[string]string{"g1.1": "u1", "g1.2": "u2"}[id], "x"); !e.GetResumed() {
			t.Errorf("Enter(%s) again = %v, want resumed", id, e)
		}
	}
	// The next change both gateways see is the one made now: no leave or join in between.
	exitOn(t, gw1, "g1.2") // u2 still on gateway 2: no leave
	exitOn(t, gw2, "g2.2")
	for _, s := range []*pstream{gw1, gw2} {
		expectChange(t, s, "v4 leave u3")
	}
	if got := listPresence(t, cb, "r"); got != "v4 [u1 u2]" {
		t.Errorf("ListPresence = %s, want v4 [u1 u2]", got)
	}
}

// TestPresenceKilledGatewayLeavesAtLeaseEnd: a gateway whose connection breaks (killed) leaves
// its sessions open until their leases end; then the next sweep (here: a read) closes them and
// every other stream sees the leaves. The dead gateway's renewals stopped; the live one's
// sessions stay.
func TestPresenceKilledGatewayLeavesAtLeaseEnd(t *testing.T) {
	t.Parallel()
	clock := &testClock{}
	// A lease of an hour: no renewal tick (every 20 min) comes during the test, so the clock
	// alone decides when the dead gateway's lease ends.
	r := start(t, redistest.Prefix(t), withClock(clock, Options{PresenceLease: time.Hour}))
	c := client(t, r.Addr)
	conn := servertest.Dial(t, r.Addr)
	doomed, _, _ := attach(t, chatv1.NewChatServiceClient(conn), "r", false)
	obs, _, _ := attach(t, c, "r", true)
	enterOn(t, doomed, "d.1", "u1", "Ann")
	expectChange(t, obs, "v1 join u1 Ann")
	_ = conn.Close() // the gateway dies: no CloseSend, no exits
	clock.Advance(40 * time.Minute)
	enterOn(t, obs, "o.1", "u2", "Bo") // its lease ends 100 min from the start
	expectChange(t, obs, "v2 join u2 Bo")
	if got := listPresence(t, c, "r"); got != "v2 [u1 u2]" {
		t.Fatalf("40 min after the gateway died ListPresence = %s, want v2 [u1 u2] (u1's lease runs to 60 min)", got)
	}
	clock.Advance(20 * time.Minute)
	if got := listPresence(t, c, "r"); got != "v3 [u2]" {
		t.Fatalf("at u1's lease end ListPresence = %s, want v3 [u2]", got)
	}
	expectChange(t, obs, "v3 leave u1")
}

// TestPresenceRenewalKeepsSessions: the replica holding a stream renews its sessions, so they
// outlive many leases while the stream is open.
func TestPresenceRenewalKeepsSessions(t *testing.T) {
	t.Parallel()
	const lease = 600 * time.Millisecond
	c := replicaClient(t, Options{PresenceLease: lease})
	gw, _, _ := attach(t, c, "r", false)
	enterOn(t, gw, "g.1", "u1", "Ann")
	until := time.Now().Add(5 * lease)
	wait.For(t, "five leases to pass with u1 present throughout", func() error {
		if got := listPresence(t, c, "r"); got != "v1 [u1]" {
			t.Fatalf("ListPresence = %s with the stream open, want v1 [u1]", got)
		}
		if time.Now().Before(until) {
			return fmt.Errorf("%v to go", time.Until(until))
		}
		return nil
	})
}

// TestConnectPing: a ping is answered by a pong with its number, on a stream that carries
// nothing else.
func TestConnectPing(t *testing.T) {
	t.Parallel()
	s, _, _ := attach(t, replicaClient(t, Options{}), "r", false)
	for _, n := range []int64{1, 2, -7} {
		if err := s.Send(&chatv1.ConnectRequest{Kind: &chatv1.ConnectRequest_Ping{Ping: n}}); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, s); got.GetPong() != n || got.GetKind() == nil {
			t.Fatalf("ping %d answered %v, want pong %d", n, got, n)
		}
	}
}

// TestPresenceRenewalKeepsLargeRooms: a stream holding more sessions than one renewal script
// carries (app.RenewBatch) renews every batch, so none of its members lapses.
func TestPresenceRenewalKeepsLargeRooms(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	c := replicaClient(t, Options{PresenceLease: lease})
	gw, _, _ := attach(t, c, "big", false)
	n := 2*app.RenewBatch + 1
	for i := range n {
		enterOn(t, gw, fmt.Sprintf("g.%d", i), fmt.Sprintf("u%d", i), "Dancer")
	}
	until := time.Now().Add(3 * lease)
	wait.For(t, "three leases to pass with every member present", func() error {
		res, err := c.ListPresence(context.Background(), &chatv1.ListPresenceRequest{Room: "big"})
		if err != nil {
			t.Fatalf("ListPresence = %v", err)
		}
		if got := len(res.GetMembers()); got != n {
			t.Fatalf("ListPresence has %d members with the stream open, want %d", got, n)
		}
		if time.Now().Before(until) {
			return fmt.Errorf("%v to go", time.Until(until))
		}
		return nil
	})
}
