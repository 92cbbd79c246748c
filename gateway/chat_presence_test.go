package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vigil-dev/vigil/pkg/server/servertest"
)

// presenceOf reads w's frames until its next join or leave frame: "join <userId> <username>" or
// "leave <userId>".
func presenceOf(w *wsClient) string {
	w.t.Helper()
	for {
		f := w.next()
		switch f["type"] {
		case "join":
			return fmt.Sprintf("join %v %v", f["userId"], f["username"])
		case "leave":
			return fmt.Sprintf("leave %v", f["userId"])
		}
	}
}

func expectPresence(t *testing.T, w *wsClient, want string) {
	t.Helper()
	if got := presenceOf(w); got != want {
		t.Fatalf("next presence frame = %q, want %q", got, want)
	}
}

// restPresence reads GET /chat/rooms/{room}/presence as "[<userId>@<username> …]".
func restPresence(t *testing.T, gwURL, room string) string {
	t.Helper()
	res, err := http.Get(gwURL + "/chat/rooms/" + room + "/presence")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET presence = %d %s, want 200", res.StatusCode, body)
	}
	var doc struct {
		Members []struct {
			UserID   string          `json:"userId"`
			Username string          `json:"username"`
			Since    json.RawMessage `json:"since"`
		} `json:"members"`
		Version json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("GET presence body %s: %v", body, err)
	}
	var out []string
	for _, m := range doc.Members {
		if len(m.Since) == 0 || m.Since[0] == '"' {
			t.Errorf("member %s: since = %s, want a JSON number", m.UserID, m.Since)
		}
		out = append(out, m.UserID+"@"+m.Username)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// TestChatPresenceAcrossGateways: two gateways on one chat service. A socket opened with
// presence=1 gets who is here after its history, then join and leave frames; a member is a
// user id, so a user's second socket (on the other gateway) is no join and closing one of their
// two sockets is no leave. Both gateways' sockets and the REST read agree.
func TestChatPresenceAcrossGateways(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t)
	chat := env.startChat(t, "", nil)
	gw1 := startGateway(t, Backends{Chat: chat.Addr})
	gw2 := startGateway(t, Backends{Chat: chat.Addr})

	ann := dialChat(t, gw1.URL, "room=here&userId=ann&username=Ann&presence=1")
	ann.nextOfType("history")
	if f := ann.nextOfType("presence"); fmt.Sprint(f["members"]) != "[]" {
		t.Fatalf("first socket's presence = %v, want nobody", f)
	}
	expectPresence(t, ann, "join ann Ann")
	bob := dialChat(t, gw2.URL, "room=here&userId=bob&username=Bob&presence=1")
	bob.nextOfType("history")
	if f := bob.nextOfType("presence"); !strings.Contains(fmt.Sprint(f["members"]), "userId:ann") || !strings.Contains(fmt.Sprint(f["members"]), "username:Ann") {
		t.Fatalf("bob's presence = %v, want ann", f)
	}
	expectPresence(t, bob, "join bob Bob")
	expectPresence(t, ann, "join bob Bob")

	ann2 := dialChat(t, gw2.URL, "room=here&userId=ann&username=Annie") // no presence frames
	ann2.nextOfType("history")
	// ann2's session is entered on gw2's stream, which carol's below does not wait for. The
	// service applies a stream's enter before it reads the stream's next request, so the echo
	// of ann2's first post means her session is open before the test closes ann's first one.
	ann2.say("second tab")
	ann2.nextOfType("message")
	carol := dialChat(t, gw1.URL, "room=here&userId=carol&username=Carol")
	carol.nextOfType("history")
	for _, w := range []*wsClient{ann, bob} {
		expectPresence(t, w, "join carol Carol") // not ann again
	}
	if got := restPresence(t, gw1.URL, "here"); got != "[ann@Ann bob@Bob carol@Carol]" {
		t.Fatalf("GET presence = %s, want ann (as her first socket named her), bob, carol", got)
	}
	_ = ann.c.CloseNow() // ann still has ann2
	_ = carol.c.CloseNow()
	expectPresence(t, bob, "leave carol")
	if got := restPresence(t, gw2.URL, "here"); got != "[ann@Ann bob@Bob]" {
		t.Fatalf("GET presence = %s, want ann and bob", got)
	}
	_ = ann2.c.CloseNow()
	expectPresence(t, bob, "leave ann")
}

// TestChatPresenceBadInput: a bad presence parameter or room name is a 400 with a sentence.
func TestChatPresenceBadInput(t *testing.T) {
	t.Parallel()
	gw := startChatGateway(t)
	for _, tc := range []struct{ path, want string }{
		{"/chat/rooms/a%0Ab/presence", "room must be 1 to 128 bytes of UTF-8 text without control characters."},
		{"/chat/rooms/" + strings.Repeat("a", 129) + "/presence", "room must be 1 to 128 bytes of UTF-8 text without control characters."},
	} {
		res, err := http.Get(gw.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %.40s = %d %s, want 400 %q", tc.path, res.StatusCode, body, tc.want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, gw.URL+"/websocket?room=r&presence=yes", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := "presence must be 1 (who is here, with join and leave frames) or 0."; res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), want) {
		t.Errorf("upgrade with presence=yes = %d %s, want 400 %q", res.StatusCode, body, want)
	}
}

// TestChatPresenceSurvivesReplicaRestart: the chat replica holding the room's stream stops; the
// gateway re-attaches on the other one and enters its sockets again, which is no leave and no
// join: the next presence frame anyone gets is the next real change.
func TestChatPresenceSurvivesReplicaRestart(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t)
	a := env.startChat(t, "", nil)
	addrB := servertest.FreeAddr(t)
	// Only A runs, so the room's stream is on A.
	gw := startGateway(t, Backends{Chat: a.Addr + "," + addrB})
	ann := dialChat(t, gw.URL, "room=restart&userId=ann&username=Ann&presence=1")
	ann.nextOfType("history")
	ann.nextOfType("presence")
	expectPresence(t, ann, "join ann Ann")
	bob := dialChat(t, gw.URL, "room=restart&userId=bob&username=Bob")
	bob.nextOfType("history")
	expectPresence(t, ann, "join bob Bob")
	env.startChat(t, addrB, nil)

	a.Stop() // its streams end with UNAVAILABLE; the sessions stay under their leases
	carol := dialChat(t, gw.URL, "room=restart&userId=carol&username=Carol")
	carol.nextOfType("history")                // served once the room is attached to B again
	expectPresence(t, ann, "join carol Carol") // no leave or join of ann or bob before it
	if got := restPresence(t, gw.URL, "restart"); got != "[ann@Ann bob@Bob carol@Carol]" {
		t.Fatalf("GET presence after the restart = %s, want ann, bob, carol", got)
	}
	_ = bob.c.CloseNow()
	expectPresence(t, ann, "leave bob")
}
