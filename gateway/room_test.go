package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// roomSocket is a test's practice-room WebSocket; a goroutine reads its frames.
type roomSocket struct {
	t      *testing.T
	c      *websocket.Conn
	frames chan map[string]any
	closed chan error
}

// dialRoom opens GET /rooms/{code}/websocket?query; on a refusal it returns the HTTP status.
func dialRoom(t *testing.T, gwURL, code, query string) (*roomSocket, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(gwURL, "http") + "/rooms/" + code + "/websocket?" + query
	c, res, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		if res == nil {
			t.Fatalf("dial %s: %v", u, err)
		}
		return nil, res.StatusCode
	}
	s := &roomSocket{t: t, c: c, frames: make(chan map[string]any, 1000), closed: make(chan error, 1)}
	go readFrames(c, s.frames, s.closed)
	t.Cleanup(func() { _ = c.CloseNow() })
	return s, http.StatusSwitchingProtocols
}

func mustDialRoom(t *testing.T, gwURL, code, query string) *roomSocket {
	t.Helper()
	s, status := dialRoom(t, gwURL, code, query)
	if s == nil {
		t.Fatalf("dial room %s?%s: HTTP %d", code, query, status)
	}
	return s
}

func (s *roomSocket) send(frame string) {
	s.t.Helper()
	writeFrame(s.t, s.c, frame)
}

// next waits for the next frame of type typ, skipping others (occupancy frames come and go).
func (s *roomSocket) next(typ string) map[string]any {
	s.t.Helper()
	deadline := time.After(wait.Deadline)
	for {
		select {
		case f := <-s.frames:
			if f["type"] == typ {
				return f
			}
		case err := <-s.closed:
			s.t.Fatalf("socket closed (%v) while waiting for a %s frame", err, typ)
		case <-deadline:
			s.t.Fatalf("no %s frame within %v", typ, wait.Deadline)
		}
	}
}

// closedWith waits for the socket to be closed and returns the close code and reason.
func (s *roomSocket) closedWith(within time.Duration) (websocket.StatusCode, string) {
	s.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case <-s.frames:
		case err := <-s.closed:
			var ce websocket.CloseError
			if !errors.As(err, &ce) {
				s.t.Fatalf("socket ended with %v, want a close frame", err)
			}
			return ce.Code, ce.Reason
		case <-deadline:
			s.t.Fatalf("socket still open after %v", within)
		}
	}
}

func lobbyViewers(t *testing.T, gwURL, code string, viewers int64, leader bool) func() error {
	return func() error {
		r := call(t, "GET", gwURL+"/lobby/rooms/"+code, "")
		v, _ := r.body["viewers"].(json.Number).Int64()
		if r.code != http.StatusOK || v != viewers || r.body["leaderPresent"] != leader {
			return fmt.Errorf("GET room = %d %s, want %d viewers, leaderPresent %v", r.code, r.raw, viewers, leader)
		}
		return nil
	}
}

func TestPracticeRoomOverGateway(t *testing.T) {
	t.Parallel()
	gw := startRoomStack(t, time.Hour)

	created := call(t, "POST", gw+"/lobby/rooms", `{"name": "Team A", "video": {"title": "Routine", "durationMs": 180000}}`)
	if created.code != http.StatusCreated {
		t.Fatalf("POST /lobby/rooms = %d %s, want 201", created.code, created.raw)
	}
	code, _ := created.body["code"].(string)
	token, _ := created.body["leaderToken"].(string)
	room, _ := created.body["room"].(map[string]any)
	if code == "" || token == "" || room["name"] != "Team A" || room["viewers"] != json.Number("0") {
		t.Fatalf("POST /lobby/rooms body = %s", created.raw)
	}
	if _, ok := room["lastActivity"].(json.Number); !ok {
		t.Fatalf("lastActivity is not a JSON number: %s", created.raw)
	}
	list := call(t, "GET", gw+"/lobby/rooms", "")
	if rooms, _ := list.body["rooms"].([]any); list.code != http.StatusOK || len(rooms) != 1 || rooms[0].(map[string]any)["code"] != code {
		t.Fatalf("GET /lobby/rooms = %d %s, want the one room", list.code, list.raw)
	}

	// Refusals happen before the upgrade.
	if _, status := dialRoom(t, gw, code, "role=leader&clientId=lead"); status != http.StatusUnauthorized {
		t.Fatalf("leader without a token: HTTP %d, want 401", status)
	}
	if _, status := dialRoom(t, gw, code, "role=leader&clientId=lead&token=wrong"); status != http.StatusUnauthorized {
		t.Fatalf("leader with a wrong token: HTTP %d, want 401", status)
	}
	if _, status := dialRoom(t, gw, "nosuch", "role=viewer&clientId=v"); status != http.StatusNotFound {
		t.Fatalf("viewer of a missing room: HTTP %d, want 404", status)
	}
	if _, status := dialRoom(t, gw, code, "role=boss"); status != http.StatusBadRequest {
		t.Fatalf("role=boss: HTTP %d, want 400", status)
	}
	if r := call(t, "GET", gw+"/rooms/"+code+"/websocket", ""); r.code != http.StatusUpgradeRequired {
		t.Fatalf("plain GET of the socket route = %d, want 426", r.code)
	}

	lead := mustDialRoom(t, gw, code, "role=leader&clientId=lead&token="+token)
	if st := lead.next("state"); st["video"].(map[string]any)["title"] != "Routine" {
		t.Fatalf("leader's state = %v", st)
	}
	v1 := mustDialRoom(t, gw, code, "role=viewer&clientId=v1")
	v2 := mustDialRoom(t, gw, code, "role=viewer&clientId=v2")
	v1.next("state")
	v2.next("state")
	wait.For(t, "the Lobby's count", lobbyViewers(t, gw, code, 2, true))

	lead.send(`{"type": "sync", "playing": true, "positionMs": 5000}`)
	for _, v := range []*roomSocket{v1, v2} {
		f := v.next("sync")
		if f["playing"] != true || f["positionMs"] != json.Number("5000") {
			t.Fatalf("viewer's sync = %v, want playing at 5000", f)
		}
		if _, ok := f["at"].(json.Number); !ok {
			t.Fatalf("sync frame not stamped: %v", f)
		}
	}
	v1.send(`{"type": "sync", "playing": false, "positionMs": 0}`)
	if e := v1.next("error"); !strings.Contains(e["error"].(string), "leader") {
		t.Fatalf("viewer's control frame answered %v, want an error about the leader", e)
	}
	lead.send(`{"type": "sync", "playing": "yes", "positionMs": 1}`)
	lead.next("error")
	lead.send(`{"type": "formation", "formation": {"rows": [["ana", "ben"], ["cy"]]}}`)
	if f := v2.next("formation"); f["formation"].(map[string]any)["rows"] == nil {
		t.Fatalf("formation frame = %v", f)
	}

	late := mustDialRoom(t, gw, code, "role=viewer&clientId=late")
	st := late.next("state")
	if pb := st["playback"].(map[string]any); pb["playing"] != true || pb["positionMs"] != json.Number("5000") {
		t.Fatalf("late joiner's playback = %v, want playing at 5000", pb)
	}
	if st["viewers"] != json.Number("3") || st["leaderPresent"] != true || st["formation"] == nil {
		t.Fatalf("late joiner's state = %v", st)
	}
	lead.next("occupancy")

	_ = v2.c.Close(websocket.StatusNormalClosure, "bye")
	wait.For(t, "the Lobby's count", lobbyViewers(t, gw, code, 2, true))

	if r := call(t, "DELETE", gw+"/lobby/rooms/"+code, ""); r.code != http.StatusUnauthorized {
		t.Fatalf("DELETE without a token = %d %s, want 401", r.code, r.raw)
	}
	if r := call(t, "DELETE", gw+"/lobby/rooms/"+code, "", "Authorization", "Bearer wrong"); r.code != http.StatusUnauthorized {
		t.Fatalf("DELETE with a wrong token = %d %s, want 401", r.code, r.raw)
	}
	if r := call(t, "DELETE", gw+"/lobby/rooms/"+code, "", "Authorization", "Bearer "+token); r.code != http.StatusNoContent {
		t.Fatalf("DELETE with the token = %d %s, want 204", r.code, r.raw)
	}
	for _, s := range []*roomSocket{lead, v1, late} {
		if c, reason := s.closedWith(wait.Deadline); c != 4000 || reason != "ended" {
			t.Fatalf("socket closed with %d %q, want 4000 ended", c, reason)
		}
	}
	if r := call(t, "GET", gw+"/lobby/rooms/"+code, ""); r.code != http.StatusNotFound {
		t.Fatalf("GET an ended room = %d, want 404", r.code)
	}
}

func TestPracticeRoomExpiresOverGateway(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	gw := startRoomStack(t, ttl)
	code, _ := createRoom(t, gw, `{"name": "Short", "video": {"title": "Clip", "durationMs": 1000}}`)
	v := mustDialRoom(t, gw, code, "role=viewer&clientId=v")
	v.next("state")
	if c, reason := v.closedWith(ttl + wait.Deadline); c != 4000 || reason != "expired" {
		t.Fatalf("socket closed with %d %q, want 4000 expired", c, reason)
	}
	// Sockets close first, then the room leaves the Lobby.
	wait.For(t, "the expired room gone from the Lobby", func() error {
		list := call(t, "GET", gw+"/lobby/rooms", "")
		if rooms, _ := list.body["rooms"].([]any); len(rooms) != 0 {
			return fmt.Errorf("GET /lobby/rooms after expiry = %s, want no rooms", list.raw)
		}
		return nil
	})
}

func TestLobbyRESTErrors(t *testing.T) {
	t.Parallel()
	gw := startRoomStack(t, time.Hour)
	for _, tc := range []struct{ body, want string }{
		{`{"name": "", "video": {"title": "t", "durationMs": 1}}`, "name must be 1 to 80 characters."},
		{`{"name": "n"}`, "Describe the video: {\"title\", \"durationMs\"}."},
		{`{"name": "n", "video": {"title": "t", "durationMs": "12"}}`, "video.durationMs must be an integer from 1 through 86400000."},
		{`{"name": "n", "video": {"title": "t", "durationMs": 0}}`, "video.durationMs must be an integer from 1 through 86400000."},
		{``, "Send a JSON request body."},
	} {
		r := call(t, "POST", gw+"/lobby/rooms", tc.body)
		if r.code != http.StatusBadRequest || r.body["error"] != tc.want {
			t.Errorf("POST /lobby/rooms %s = %d %s, want 400 %q", tc.body, r.code, r.raw, tc.want)
		}
	}
	if r := call(t, "GET", gw+"/lobby/rooms/Not_A_Code", ""); r.code != http.StatusBadRequest {
		t.Errorf("GET a malformed code = %d %s, want 400", r.code, r.raw)
	}
	if r := call(t, "GET", gw+"/lobby/rooms/nosuch", ""); r.code != http.StatusNotFound {
		t.Errorf("GET a missing room = %d %s, want 404", r.code, r.raw)
	}
}

func TestLobbyListJSON(t *testing.T) {
	t.Parallel()
	gw := startRoomStack(t, time.Hour)
	names := []string{`Ana's "best" \ crew`, "Équipe ☃"}
	for _, n := range names {
		body, _ := json.Marshal(map[string]any{"name": n, "video": map[string]any{"title": n + " video", "durationMs": 60000}})
		if r := call(t, "POST", gw+"/lobby/rooms", string(body)); r.code != http.StatusCreated {
			t.Fatalf("POST /lobby/rooms %s = %d %s", body, r.code, r.raw)
		}
	}
	r := call(t, "GET", gw+"/lobby/rooms", "")
	rooms, _ := r.body["rooms"].([]any)
	if r.code != http.StatusOK || len(rooms) != 2 {
		t.Fatalf("GET /lobby/rooms = %d %s, want 2 rooms", r.code, r.raw)
	}
	// Most recently active first: the second room was created last (or in the same ms).
	for i, raw := range rooms {
		rm := raw.(map[string]any)
		want := []string{"code", "name", "video", "viewers", "leaderPresent", "lastActivity", "createdAt"}
		for _, k := range want {
			if _, ok := rm[k]; !ok {
				t.Fatalf("room %d lacks %q: %s", i, k, r.raw)
			}
		}
		if _, ok := rm["lastActivity"].(json.Number); !ok {
			t.Fatalf("lastActivity is not a number: %s", r.raw)
		}
		if v := rm["video"].(map[string]any); v["title"] != rm["name"].(string)+" video" || v["durationMs"] != json.Number("60000") {
			t.Fatalf("room %d video = %v", i, v)
		}
	}
	// The version is the ETag: an unchanged lobby answers 304, a changed one the new list.
	etag := getETag(t, gw+"/lobby/rooms", "")
	if etag == "" {
		t.Fatal("GET /lobby/rooms has no ETag")
	}
	if code := getStatus(t, gw+"/lobby/rooms", etag); code != http.StatusNotModified {
		t.Fatalf("GET /lobby/rooms with If-None-Match %s = %d, want 304", etag, code)
	}
	if r := call(t, "POST", gw+"/lobby/rooms", `{"name": "Third", "video": {"title": "t", "durationMs": 1}}`); r.code != http.StatusCreated {
		t.Fatalf("POST /lobby/rooms = %d", r.code)
	}
	if code := getStatus(t, gw+"/lobby/rooms", etag); code != http.StatusOK {
		t.Fatalf("GET /lobby/rooms with a stale If-None-Match = %d, want 200", code)
	}
	if r := call(t, "GET", gw+"/lobby/rooms", ""); len(r.body["rooms"].([]any)) != 3 {
		t.Fatalf("GET /lobby/rooms after a create = %s, want 3 rooms", r.raw)
	}
	got := map[string]bool{}
	for _, raw := range rooms {
		got[raw.(map[string]any)["name"].(string)] = true
	}
	for _, n := range names {
		if !got[n] {
			t.Fatalf("GET /lobby/rooms lost the name %q: %s", n, r.raw)
		}
	}
}

// createRoom creates a room with body on the gateway at gw: its code and leader token.
func createRoom(t *testing.T, gw, body string) (code, token string) {
	t.Helper()
	r := call(t, "POST", gw+"/lobby/rooms", body)
	if r.code != http.StatusCreated {
		t.Fatalf("POST /lobby/rooms = %d %s", r.code, r.raw)
	}
	return r.body["code"].(string), r.body["leaderToken"].(string)
}

// openLeaderAndViewer creates a room with body and opens its leader's socket and a viewer's
// (clientId v), each past its state.
func openLeaderAndViewer(t *testing.T, gw, body string) (code string, lead, v *roomSocket) {
	t.Helper()
	code, token := createRoom(t, gw, body)
	lead = mustDialRoom(t, gw, code, "clientId=lead&role=leader&token="+token)
	lead.next("state")
	v = mustDialRoom(t, gw, code, "clientId=v")
	v.next("state")
	return code, lead, v
}

func TestPracticeRoomBadFrames(t *testing.T) {
	t.Parallel()
	gw := startRoomStack(t, time.Hour)
	code, lead, v := openLeaderAndViewer(t, gw, `{"name": "Frames", "video": {"title": "Clip", "durationMs": 60000}}`)
	for _, tc := range []struct{ frame, want string }{
		{`not json`, "Send a JSON object with a type: sync, formation, mark, reload, loop or markFormation."},
		{`{"type": "dance"}`, "Send a JSON object with a type: sync, formation, mark, reload, loop or markFormation."},
		{`{"type": "sync", "playing": true}`, "positionMs must be an integer from 0 through 86400000."},
		{`{"type": "sync", "playing": true, "positionMs": 1.5}`, "positionMs must be an integer from 0 through 86400000."},
		{`{"type": "sync", "playing": true, "positionMs": -1}`, "positionMs must be an integer from 0 through 86400000."},
		{`{"type": "mark", "positionMs": 10, "label": 7}`, "label must be a string."},
		{`{"type": "reload", "video": {"title": "", "durationMs": 5}}`, "video.title must be 1 to 200 characters."},
		{`{"type": "reload", "video": {"title": "New", "durationMs": "5"}}`, "video.durationMs must be an integer from 1 through 86400000."},
		{`{"type": "sync", "playing": true, "positionMs": "5"}`, "positionMs must be an integer from 0 through 86400000."},
	} {
		lead.send(tc.frame)
		if e := lead.next("error"); e["error"] != tc.want {
			t.Errorf("frame %s: error %q, want %q", tc.frame, e["error"], tc.want)
		}
	}
	// The socket is still open and a good frame still goes through.
	lead.send(`{"type": "reload", "video": {"title": "New cut", "durationMs": 90000}}`)
	if f := v.next("reload"); f["video"].(map[string]any)["title"] != "New cut" {
		t.Fatalf("reload frame = %v", f)
	}
	late := mustDialRoom(t, gw, code, "clientId=late")
	if st := late.next("state"); st["video"].(map[string]any)["title"] != "New cut" || st["playback"].(map[string]any)["playing"] != false {
		t.Fatalf("state after a reload with a new video = %v", st)
	}
}

func getETag(t *testing.T, url, ifNoneMatch string) string {
	t.Helper()
	res := getWith(t, url, ifNoneMatch)
	return res.Header.Get("ETag")
}

func getStatus(t *testing.T, url, ifNoneMatch string) int {
	t.Helper()
	return getWith(t, url, ifNoneMatch).StatusCode
}

func getWith(t *testing.T, url, ifNoneMatch string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res
}

// TestPracticeRoomControlRefs: a leader's control with a ref is answered on its socket by an
// ack with that ref and the room-clock time it was applied at (the at the viewers' relayed
// frame carries), or by an error frame with that ref and the sentence, from the gateway's own
// checks or the room's; a control without a ref gets no ack, as before.
func TestPracticeRoomControlRefs(t *testing.T) {
	t.Parallel()
	gw := startRoomStack(t, time.Hour)
	_, lead, v := openLeaderAndViewer(t, gw, `{"name": "Refs", "video": {"title": "Clip", "durationMs": 60000}}`)

	lead.send(`{"type": "sync", "playing": true, "positionMs": 3000, "countIn": {"beats": 4, "bpm": 120}, "ref": 41}`)
	ack := lead.next("ack")
	sync := v.next("sync")
	if ack["ref"] != json.Number("41") || ack["at"] == nil || ack["at"] != sync["at"] || ack["repeat"] != nil {
		t.Errorf("ack = %v for the viewers' sync %v, want ref 41 and the sync's at", ack, sync)
	}
	for _, tc := range []struct {
		frame, ref, want string
	}{
		{`{"type": "loop", "startMs": 5000, "endMs": 61000, "ref": 42}`, "42", "A loop must lie within the video"},
		{`{"type": "loop", "startMs": "a", "ref": 43}`, "43", "startMs and endMs must be integers"},
		{`{"type": "mark", "positionMs": 1, "ref": -1}`, "", "ref must be an integer from 1 through 9007199254740991."},
	} {
		lead.send(tc.frame)
		e := lead.next("error")
		if got, _ := e["ref"].(json.Number); string(got) != tc.ref || !strings.Contains(fmt.Sprint(e["error"]), tc.want) {
			t.Errorf("frame %s: error frame %v, want ref %q and %q", tc.frame, e, tc.ref, tc.want)
		}
	}
	// Without a ref: applied, no ack; the next ack is the next ref's.
	lead.send(`{"type": "mark", "positionMs": 2000, "label": "no ref"}`)
	lead.send(`{"type": "mark", "positionMs": 2500, "label": "ref", "ref": 44}`)
	if ack := lead.next("ack"); ack["ref"] != json.Number("44") {
		t.Errorf("ack = %v, want ref 44 (the mark without a ref gets none)", ack)
	}
	for _, label := range []string{"no ref", "ref"} {
		if m := v.next("mark"); m["label"] != label {
			t.Errorf("viewer's mark = %v, want %q", m, label)
		}
	}
}
