package gateway

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestPracticeRoomPeopleOverGateway: name= names a socket's person, the first state lists the
// people, join and leave frames follow, GET /lobby/rooms/{code}/people answers the list, and
// a bad name is a 400 with the service's sentence before any upgrade.
func TestPracticeRoomPeopleOverGateway(t *testing.T) {
	t.Parallel()
	gw := startRoomStack(t, time.Hour)
	code, token := createRoom(t, gw, `{"name": "Salsa Tuesday", "video": {"title": "Routine", "durationMs": 180000}}`)
	if r := call(t, "GET", gw+"/lobby/rooms/"+code+"/people", ""); r.code != http.StatusOK || r.raw != `{"people":[]}` {
		t.Fatalf("people of a room nobody joined = %d %s, want 200 {\"people\":[]}", r.code, r.raw)
	}
	const sentence = "name must be 1 to 80 bytes of UTF-8 text without control characters."
	for _, bad := range []string{strings.Repeat("x", 300), "a%0Ab", "bad%FFutf8", ""} {
		_, status := dialRoom(t, gw, code, "role=viewer&clientId=bad&name="+bad)
		if status != http.StatusBadRequest {
			t.Errorf("name=%s: HTTP %d, want 400", bad, status)
		}
	}
	if r := call(t, "GET", gw+"/rooms/"+code+"/websocket?name=a%0Ab", "", "Connection", "Upgrade", "Upgrade", "websocket",
		"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="); r.code != http.StatusBadRequest || r.body["error"] != sentence {
		t.Errorf("a bad name answers %d %s, want 400 %q", r.code, r.raw, sentence)
	}

	lead := mustDialRoom(t, gw, code, "role=leader&clientId=lead&name="+url.QueryEscape("Ana Lía")+"&token="+token)
	st := lead.next("state")
	if people, _ := st["people"].([]any); len(people) != 1 || people[0].(map[string]any)["name"] != "Ana Lía" || people[0].(map[string]any)["role"] != "leader" {
		t.Fatalf("leader's state people = %v, want Ana Lía the leader", st["people"])
	}
	v := mustDialRoom(t, gw, code, "role=viewer&clientId=ben&name=Ben")
	if people, _ := v.next("state")["people"].([]any); len(people) != 2 {
		t.Fatalf("viewer's state people = %v, want the leader and ben", people)
	}
	if j := lead.next("join"); j["clientId"] != "ben" || j["name"] != "Ben" || j["role"] != "viewer" {
		t.Fatalf("leader's join frame = %v, want ben", j)
	}
	r := call(t, "GET", gw+"/lobby/rooms/"+code+"/people", "")
	if people, _ := r.body["people"].([]any); r.code != http.StatusOK || len(people) != 2 || !strings.Contains(r.raw, `"name":"Ben"`) {
		t.Fatalf("GET people = %d %s, want the leader and Ben", r.code, r.raw)
	}
	_ = v.c.CloseNow()
	if l := lead.next("leave"); l["clientId"] != "ben" || l["role"] != "viewer" {
		t.Fatalf("leader's leave frame = %v, want ben", l)
	}
	if r := call(t, "GET", gw+"/lobby/rooms/nosuch/people", ""); r.code != http.StatusNotFound {
		t.Fatalf("GET people of a missing room = %d %s, want 404", r.code, r.raw)
	}
}
