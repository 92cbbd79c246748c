package chat

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestChatQueryNames: chat room names and usernames are written as people write them (any
// UTF-8 without control characters: a room of 1-128 bytes, a username of 1-64 characters);
// a socket without a username is "anonymous" and one without a userId gets a random UUID.
func TestChatQueryNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ query, room, username string }{
		{"", "general", "anonymous"},
		{"room=&username=", "general", "anonymous"},
		{"room=orders%2F42&username=Ann", "orders/42", "Ann"},
		{"room=Salsa+Night&username=%ED%95%9C%EA%B5%AD", "Salsa Night", "한국"},
		{"room=%7Bhash%7D&username=" + strings.Repeat("ü", 64), "{hash}", strings.Repeat("ü", 64)},
		{"room=" + strings.Repeat("r", 128), strings.Repeat("r", 128), "anonymous"},
	} {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseChatQuery(q)
		if err != nil || got.room != c.room || got.username != c.username {
			t.Errorf("parseChatQuery(%q) = room %q, username %q, %v; want %q, %q", c.query, got.room, got.username, err, c.room, c.username)
		}
		if _, err := uuid.Parse(got.userID); err != nil {
			t.Errorf("parseChatQuery(%q): userId %q is not a UUID", c.query, got.userID)
		}
	}
	q, _ := url.ParseQuery("userId=u-7")
	if got, err := parseChatQuery(q); err != nil || got.userID != "u-7" {
		t.Errorf("parseChatQuery(userId=u-7) = %q, %v; want u-7 kept", got.userID, err)
	}
	for _, bad := range []string{"room=" + strings.Repeat("r", 129), "room=a%0Ab", "username=a%09b", "userId=%00"} {
		q, _ := url.ParseQuery(bad)
		if _, err := parseChatQuery(q); err == nil || !strings.Contains(err.Error(), "must be") {
			t.Errorf("parseChatQuery(%q) = %v, want a sentence saying what the field must be", bad, err)
		}
	}
}

// TestStringFrameIsJSONMarshal: the one-string frames are byte for byte what json.Marshal of
// their struct wrote before, for any value.
func TestStringFrameIsJSONMarshal(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "hello", `quote " and \ back`, "<script>&", "é 🙂", "bad \xff utf-8", "line\nbreak\u2028"} {
		want, _ := json.Marshal(struct {
			Type   string `json:"type"`
			UserID string `json:"userId"`
		}{"leave", v})
		if got := leaveFrame(v); string(got) != string(want) {
			t.Errorf("leaveFrame(%q) = %s, want %s", v, got, want)
		}
	}
}
