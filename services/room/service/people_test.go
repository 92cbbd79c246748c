package service_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// The people list (issue 26 item 4): a person is a role and a client id, present while one of
// their sessions is open, under the name their first session gave. These tests hold the list
// to the same rules as the occupancy count: a re-attach is not a join, and a lost replica's
// sessions leave when their leases end.

// named is a hello with a display name.
func named(code string, role roomv1.Role, clientID, token, session, name string) *roomv1.Hello {
	h := hello(code, role, clientID, token, session)
	h.Name = name
	return h
}

// who renders people as "role/clientId/name" lines, sorted by client id, for comparisons.
func who(people []*roomv1.Person) []string {
	out := make([]string, 0, len(people))
	for _, p := range people {
		role := "viewer"
		if p.GetRole() == roomv1.Role_ROLE_LEADER {
			role = "leader"
		}
		out = append(out, role+"/"+p.GetClientId()+"/"+p.GetName())
	}
	slices.Sort(out)
	return out
}

// listPeople answers GET …/people's RPC, failing the test on an error.
func (e *env) listPeople(code string) []string {
	e.t.Helper()
	res, err := e.room.ListPeople(context.Background(), &roomv1.ListPeopleRequest{Code: code})
	if err != nil {
		e.t.Fatalf("ListPeople(%s): %v", code, err)
	}
	return who(res.GetPeople())
}

// people replays what a member saw: its State's list, then every join and leave frame.
func (m *member) people() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := map[string]*roomv1.Person{}
	key := func(role roomv1.Role, id string) string { return fmt.Sprint(role, "/", id) }
	for _, p := range m.state.GetPeople() {
		cur[key(p.GetRole(), p.GetClientId())] = p
	}
	for _, f := range m.frames {
		if j := f.GetJoin(); j != nil {
			cur[key(j.GetRole(), j.GetClientId())] = j
		}
		if l := f.GetLeave(); l != nil {
			delete(cur, key(l.GetRole(), l.GetClientId()))
		}
	}
	list := make([]*roomv1.Person, 0, len(cur))
	for _, p := range cur {
		list = append(list, p)
	}
	return who(list)
}

// count counts the member's join (or leave) frames for clientID.
func (m *member) count(join bool, clientID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, f := range m.frames {
		if join && f.GetJoin().GetClientId() == clientID || !join && f.GetLeave().GetClientId() == clientID {
			n++
		}
	}
	return n
}

func sees(m *member, want ...string) func() bool {
	slices.Sort(want)
	return func() bool { return slices.Equal(m.people(), want) }
}

func TestPeopleFollowJoinsAndLeaves(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	if got := e.listPeople(code); len(got) != 0 {
		t.Fatalf("people of a room nobody joined = %v, want none", got)
	}
	l := mustHello(t, e.room, named(code, leader, "lead", token, "lead-1", "Ana Lía"))
	if got, want := who(l.state.GetPeople()), []string{"leader/lead/Ana Lía"}; !slices.Equal(got, want) {
		t.Fatalf("leader's first state lists %v, want %v", got, want)
	}
	phone := mustHello(t, e.room, named(code, viewer, "ben", "", "ben-phone", "Ben 日本"))
	if got, want := who(phone.state.GetPeople()), []string{"leader/lead/Ana Lía", "viewer/ben/Ben 日本"}; !slices.Equal(got, want) {
		t.Fatalf("viewer's first state lists %v, want %v", got, want)
	}
	// A second session of the same viewer is the same person: no join, and the first name stays.
	laptop := mustHello(t, e.room, named(code, viewer, "ben", "", "ben-laptop", "Benjamin"))
	anon := mustHello(t, e.room, hello(code, viewer, "cleo", "", "cleo-1"))
	dancer := ""
	for _, p := range anon.state.GetPeople() {
		if p.GetClientId() == "cleo" {
			dancer = p.GetName()
		}
	}
	if !strings.HasPrefix(dancer, "Dancer ") || len(dancer) > len("Dancer 1000") {
		t.Fatalf("a viewer without a name is called %q, want Dancer and a short number", dancer)
	}
	want := []string{"leader/lead/Ana Lía", "viewer/ben/Ben 日本", "viewer/cleo/" + dancer}
	wait.Until(t, "the leader sees ben and cleo join", sees(l, want...))
	if got := e.listPeople(code); !slices.Equal(got, want) {
		t.Fatalf("ListPeople = %v, want %v", got, want)
	}

	// Closing one of ben's two sessions is no leave; closing the other is.
	phone.leave()
	wait.Until(t, "the lobby still counts ben and cleo", viewers(e, code, 2, true))
	if n := l.count(false, "ben"); n != 0 {
		t.Fatalf("leader got %d leave frames for ben while his laptop is open, want 0", n)
	}
	laptop.leave()
	want = []string{"leader/lead/Ana Lía", "viewer/cleo/" + dancer}
	wait.Until(t, "the leader sees ben leave", sees(l, want...))
	wait.Until(t, "cleo sees ben leave", sees(anon, want...))
	if got := e.listPeople(code); !slices.Equal(got, want) {
		t.Fatalf("ListPeople after ben left = %v, want %v", got, want)
	}
	if j, lv := l.count(true, "ben"), l.count(false, "ben"); j != 1 || lv != 1 {
		t.Fatalf("leader got %d join and %d leave frames for ben, want 1 and 1", j, lv)
	}
	// The leader leaving is a leave too, seen by the viewers.
	l.leave()
	wait.Until(t, "cleo sees the leader leave", sees(anon, "viewer/cleo/"+dancer))
}

// TestPeopleSurviveARestart: sessions re-attached after their replica's graceful stop are no
// join and no leave for anyone watching from another replica, and the list stays the same.
func TestPeopleSurviveARestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, token := e.createRoom()
	watcher := mustHello(t, e.room, named(code, viewer, "watcher", "", "watcher-1", "Watcher"))
	r1 := e.startReplica()
	lh := named(code, leader, "lead", token, "lead-1", "Lead")
	vh := named(code, viewer, "dan", "", "dan-1", "Dan")
	mustHello(t, r1.client, lh)
	v := mustHello(t, r1.client, vh)
	want := []string{"leader/lead/Lead", "viewer/dan/Dan", "viewer/watcher/Watcher"}
	wait.Until(t, "the watcher sees lead and dan", sees(watcher, want...))

	r1.stop()
	if err := v.streamErr(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream of a stopped replica ended with %v, want UNAVAILABLE", err)
	}
	r2 := e.startReplica()
	// A re-attach with another name keeps the first: it is the same session.
	vh.Name = "Someone Else"
	v2 := mustHello(t, r2.client, vh)
	mustHello(t, r2.client, lh)
	if got := who(v2.state.GetPeople()); !slices.Equal(got, want) {
		t.Fatalf("re-attached state lists %v, want %v", got, want)
	}
	// A frame sent after the re-attaches is seen after them: by then any join or leave they
	// caused would have reached the watcher too.
	late := mustHello(t, e.room, named(code, viewer, "late", "", "late-1", "Late"))
	wait.Until(t, "the watcher sees the late viewer", func() bool { return watcher.count(true, "late") == 1 })
	for _, id := range []string{"lead", "dan"} {
		if j, lv := watcher.count(true, id), watcher.count(false, id); j != 1 || lv != 0 {
			t.Fatalf("watcher got %d join and %d leave frames for %s across the restart, want 1 and 0", j, lv, id)
		}
	}
	want = append(want, "viewer/late/Late")
	slices.Sort(want)
	if got := e.listPeople(code); !slices.Equal(got, want) {
		t.Fatalf("ListPeople after the restart = %v, want %v", got, want)
	}
	late.leave()
}

// TestLostReplicaPeopleLeaveWhenLeasesEnd: sessions of a replica that stops and whose caller
// never re-attaches (the gateway holding them is gone too) leave when their leases end.
func TestLostReplicaPeopleLeaveWhenLeasesEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{lease: time.Second})
	code, _ := e.createRoom()
	watcher := mustHello(t, e.room, named(code, viewer, "watcher", "", "watcher-1", "Watcher"))
	r1 := e.startReplica()
	v := mustHello(t, r1.client, named(code, viewer, "gone", "", "gone-1", "Gone"))
	wait.Until(t, "the watcher sees gone join", sees(watcher, "viewer/gone/Gone", "viewer/watcher/Watcher"))
	r1.stop()
	if err := v.streamErr(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream of a stopped replica ended with %v, want UNAVAILABLE", err)
	}
	wait.Until(t, "the watcher sees gone leave at its lease end", sees(watcher, "viewer/watcher/Watcher"))
	if got, want := e.listPeople(code), []string{"viewer/watcher/Watcher"}; !slices.Equal(got, want) {
		t.Fatalf("ListPeople after the lease ended = %v, want %v", got, want)
	}
	wait.Until(t, "the lobby counts only the watcher", viewers(e, code, 1, false))
}

func TestBadNamesAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, _ := e.createRoom()
	watcher := mustHello(t, e.room, named(code, viewer, "watcher", "", "watcher-1", "Watcher"))
	const sentence = "name must be 1 to 80 bytes of UTF-8 text without control characters."
	for _, name := range []string{strings.Repeat("x", 81), strings.Repeat("日", 27), "tab\there", "new\nline", strings.Repeat("n", 300)} {
		_, err := tryHello(t, e.room, named(code, viewer, "bad", "", "", name))
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != sentence {
			t.Errorf("hello named %q: %v, want INVALID_ARGUMENT %q", name, err, sentence)
		}
	}
	// (Invalid UTF-8 cannot cross gRPC: a proto3 string refuses it. The gateway refuses it with
	// the same sentence.) 80 bytes is the most a name holds.
	ok := mustHello(t, e.room, named(code, viewer, "ok", "", "ok-1", strings.Repeat("é", 40)))
	ok.leave()
	// Nothing of the refused hellos was written: no person, no count, no frame.
	wait.Until(t, "the watcher sees ok leave", func() bool { return watcher.count(false, "ok") == 1 })
	if got, want := e.listPeople(code), []string{"viewer/watcher/Watcher"}; !slices.Equal(got, want) {
		t.Fatalf("ListPeople after refused names = %v, want %v", got, want)
	}
	if n := watcher.count(true, "bad"); n != 0 {
		t.Fatalf("watcher got %d join frames for a refused name", n)
	}
	// The Lobby hears of ok's leave as a delta after the watcher's frame, so its count is
	// waited for; a refused hello that had counted would keep it above 1.
	wait.Until(t, "the lobby counts only the watcher after refused names", viewers(e, code, 1, false))
}

func TestListPeopleOfAnUnknownRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	for code, want := range map[string]codes.Code{"no-such-room": codes.NotFound, "Bad Code": codes.InvalidArgument} {
		_, err := e.room.ListPeople(context.Background(), &roomv1.ListPeopleRequest{Code: code})
		if status.Code(err) != want {
			t.Errorf("ListPeople(%q) = %v, want %v", code, err, want)
		}
	}
}
