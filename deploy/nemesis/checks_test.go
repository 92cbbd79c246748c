//go:build nemesis

package nemesis

import (
	"testing"
	"time"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
)

// The checkers catch what they are for: each broken history below is one a broken service
// could produce.
func TestCheckHoldsCatchesBrokenHistories(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok := []hold{
		{resource: "r", owner: "a", token: 1, invoked: at(0), got: at(1), releasing: at(2), released: 1},
		{resource: "r", owner: "b", token: 2, invoked: at(1), got: at(3), releasing: at(4), released: 1},
	}
	for _, tc := range []struct {
		name  string
		holds []hold
		want  outcome
	}{
		{"one after the other", ok, outcome{}},
		{"two holds at once", []hold{ok[0], {resource: "r", owner: "b", token: 2, invoked: at(0), got: at(1), releasing: at(5), released: 1}}, outcome{doubled: 1}},
		{"a token granted twice", []hold{ok[0], {resource: "r", owner: "b", token: 1, invoked: at(5), got: at(6), releasing: at(7), released: 1}}, outcome{doubled: 1}},
		{"tokens against real time", []hold{{resource: "r", owner: "a", token: 2, invoked: at(0), got: at(1), releasing: at(2), released: 1},
			{resource: "r", owner: "b", token: 1, invoked: at(5), got: at(6), releasing: at(7), released: 1}}, outcome{doubled: 1}},
		{"a hold cut short", []hold{{resource: "r", owner: "a", token: 1, invoked: at(0), got: at(1), releasing: at(2), released: 0}}, outcome{lost: 1}},
		{"a release not answered", []hold{{resource: "r", owner: "a", token: 1, invoked: at(0), got: at(1), releasing: at(2), released: -1}}, outcome{}},
	} {
		if got := checkHolds(tc.holds, lockTTL); got != tc.want {
			t.Errorf("%s: checkHolds = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestCheckChatCatchesBrokenHistories(t *testing.T) {
	msg := func(id int64, body string) *chatv1.ChatMessage { return &chatv1.ChatMessage{Id: id, Body: body} }
	acked := map[string]string{"f0-w0-1": "room", "f0-w0-2": "room"}
	ids := map[string]int64{"f0-w0-1": 1, "f0-w0-2": 2}
	for _, tc := range []struct {
		name    string
		history []*chatv1.ChatMessage
		ids     map[string]int64
		want    outcome
	}{
		{"every post once", []*chatv1.ChatMessage{msg(1, "f0-w0-1"), msg(2, "f0-w0-2")}, ids, outcome{}},
		{"a post twice", []*chatv1.ChatMessage{msg(1, "f0-w0-1"), msg(2, "f0-w0-2"), msg(3, "f0-w0-2")}, ids, outcome{doubled: 1}},
		{"a gap", []*chatv1.ChatMessage{msg(1, "f0-w0-1"), msg(3, "f0-w0-2")}, ids, outcome{lost: 1}},
		// After a failover a room's ids go on from Redis's TIME in microseconds: no loss.
		{"the jump after a failover", []*chatv1.ChatMessage{msg(1, "f0-w0-1"), msg(1796475004049070, "f0-w0-2")},
			map[string]int64{"f0-w0-1": 1, "f0-w0-2": 1796475004049070}, outcome{}},
		{"an acknowledged post missing", []*chatv1.ChatMessage{msg(1, "f0-w0-1")}, ids, outcome{lost: 1}},
		// A failover that lost message 2 hands its id out again: the history holds one message
		// with id 2, and two acknowledgments named it.
		{"an id handed out twice", []*chatv1.ChatMessage{msg(1, "f0-w0-1"), msg(2, "f0-w0-2")},
			map[string]int64{"f0-w0-1": 2, "f0-w0-2": 2}, outcome{doubled: 1}},
		{"two messages with one id", []*chatv1.ChatMessage{msg(1, "f0-w0-1"), msg(1, "f0-w0-2")}, ids, outcome{doubled: 1}},
	} {
		if got := checkChat(map[string][]*chatv1.ChatMessage{"room": tc.history}, acked, tc.ids); got != tc.want {
			t.Errorf("%s: checkChat = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
