package gateway

import (
	"net/url"
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
	locksservice "github.com/vigil-dev/vigil/services/locks/service"
	"github.com/vigil-dev/vigil/services/reservations/service"
)

// TestNamesInPaths: lock resources and chat rooms are names as people write them, sent
// percent-encoded in the path and read back as written; reservation ids keep the seed's
// pattern and anything else is a 400 with its sentence.
func TestNamesInPaths(t *testing.T) {
	t.Parallel()
	rurl, prefix := redistest.URL(t), redistest.Prefix(t)
	log := testLogger(t)
	res := startReservations(t, service.Options{Core: testCore(rurl, prefix+"-r", nil)})
	locks := startLocks(t, locksservice.Options{Core: testCore(rurl, prefix+"-k", log)})
	chat := newChatEnv(t).startChat(t, "", log)
	srv := startGateway(t, Backends{Reservations: res.Addr, Locks: locks.Addr, Chat: chat.Addr}).URL

	names := []string{"orders/42", "Order:42", "report.daily", "user@example.com", "日報", "a b", "{team}", "100%", "a/b/c", "x?y#z", "replay-job"}
	for _, name := range names {
		p := srv + "/locks/" + url.PathEscape(name)
		r := call(t, "POST", p+"/acquire", `{"owner": "worker 7/日", "ttlMs": 10000}`)
		if r.code != 200 || r.body["acquired"] != true {
			t.Errorf("POST /locks/%s/acquire = %d %s, want acquired by the owner as written", url.PathEscape(name), r.code, r.raw)
			continue
		}
		if r = call(t, "GET", p, ""); r.code != 200 || r.body["resource"] != name || r.body["held"] != true || r.body["owner"] != "worker 7/日" {
			t.Errorf("GET /locks/%s = %d %s, want resource %q held by the owner as written", url.PathEscape(name), r.code, r.raw, name)
		}
		if r = call(t, "POST", p+"/release", `{"owner": "worker 7/日"}`); r.code != 200 || r.body["released"] != true {
			t.Errorf("POST /locks/%s/release = %d %s, want released", url.PathEscape(name), r.code, r.raw)
		}

		c := srv + "/chat/rooms/" + url.PathEscape(name) + "/messages"
		if r = call(t, "POST", c, `{"username": "익명", "body": "hi"}`); r.code != 201 || r.body["user"] != "익명" || r.body["userId"] == "" {
			t.Errorf("POST /chat/rooms/%s/messages = %d %s, want 201 with a user id", url.PathEscape(name), r.code, r.raw)
		}
		if r = call(t, "GET", c, ""); r.code != 200 || len(r.body["messages"].([]any)) != 1 {
			t.Errorf("GET /chat/rooms/%s/messages = %d %s, want its one message", url.PathEscape(name), r.code, r.raw)
		}
	}
	if r := call(t, "POST", srv+"/chat/rooms/general/messages", `{"body": "who am i"}`); r.code != 201 || r.body["user"] != "anonymous" {
		t.Errorf("a post without a username = %d %s, want user anonymous", r.code, r.raw)
	}

	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/locks/" + url.PathEscape(string(make([]byte, 257))) + "/acquire", `{"owner": "o"}`, "resource must be 1 to 256 bytes of UTF-8 text without control characters."},
		{"POST", "/locks/a%0Ab/acquire", `{"owner": "o"}`, "resource must be 1 to 256 bytes of UTF-8 text without control characters."},
		{"POST", "/locks/ok/acquire", `{"owner": "a\tb"}`, "owner must be 1 to 256 bytes of UTF-8 text without control characters."},
		{"POST", "/locks/ok/acquire", `{"owner": 7}`, "owner must be 1 to 256 bytes of UTF-8 text without control characters."},
		{"POST", "/reservations/orders%2F42", `{"ttlSeconds": 60}`, "Use a lowercase reservation ID containing 3-40 letters, digits, or hyphens."},
		{"POST", "/chat/rooms/a%09b/messages", `{"body": "x"}`, "room must be 1 to 128 bytes of UTF-8 text without control characters."},
	} {
		if r := call(t, c.method, srv+c.path, c.body); r.code != 400 || r.body["error"] != c.want {
			t.Errorf("%s %s %s = %d %s, want 400 %q", c.method, c.path, c.body, r.code, r.raw, c.want)
		}
	}
}
