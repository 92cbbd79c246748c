//go:build composepause

package composepause

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// sock is one client WebSocket through the gateway and what it received.
type sock struct {
	name string
	c    *websocket.Conn

	mu       sync.Mutex
	closed   error     // why it closed (nil: open)
	closedAt time.Time // when
	pos      int64     // the room's playback position as last told (a sync or a state)
	states   int       // state frames (the first, then one per re-attach of the room's upstream)
	syncs    map[int64]int
	messages map[string]int // chat: message body -> times received
	errors   []string       // error frames
}

// frame is the fields of every frame the tests read.
type frame struct {
	Type       string `json:"type"`
	PositionMs int64  `json:"positionMs"`
	Playback   *struct {
		PositionMs int64 `json:"positionMs"`
	} `json:"playback"`
	Body     string `json:"body"`
	Error    string `json:"error"`
	Messages []struct {
		Body string `json:"body"`
	} `json:"messages"`
}

// dial opens a socket on the gateway and starts its reader, which runs until ctx ends.
func (s *stack) dial(ctx context.Context, t *testing.T, name, path string) *sock {
	t.Helper()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(s.base, "http")+path, nil)
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		t.Fatalf("%s: dial %s: %v (HTTP %d)", name, path, err, code)
	}
	c.SetReadLimit(1 << 20)
	k := &sock{name: name, c: c, pos: -1, syncs: map[int64]int{}, messages: map[string]int{}}
	go k.read(ctx)
	return k
}

func (k *sock) read(ctx context.Context) {
	for {
		_, b, err := k.c.Read(ctx)
		if err != nil {
			if ctx.Err() == nil {
				k.mu.Lock()
				k.closed, k.closedAt = err, time.Now()
				k.mu.Unlock()
			}
			return
		}
		var f frame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		k.mu.Lock()
		switch f.Type {
		case "state":
			k.states++
			if f.Playback != nil {
				k.pos = f.Playback.PositionMs
			}
		case "sync":
			k.syncs[f.PositionMs]++
			k.pos = f.PositionMs
		case "message":
			k.messages[f.Body]++
		case "history":
			// A socket's join answers with the room's recent messages: one posted before the
			// member's join completed (the 101 comes first) arrives here, not as a message frame.
			for _, m := range f.Messages {
				k.messages[m.Body]++
			}
		case "error":
			k.errors = append(k.errors, f.Error)
		}
		k.mu.Unlock()
	}
}

// send writes a JSON frame.
func (k *sock) send(ctx context.Context, v any) error {
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return k.c.Write(ctx, websocket.MessageText, b)
}

// closedErr reports the socket's close, if it closed.
func (k *sock) closedErr() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed == nil {
		return nil
	}
	return fmt.Errorf("%s closed at %s: %v", k.name, k.closedAt.Format("15:04:05.000"), k.closed)
}

// at reports whether the socket was told a playback position of at least pos.
func (k *sock) at(pos int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pos >= pos
}

// got is how many times the socket received the message body.
func (k *sock) got(body string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.messages[body]
}

// syncCount is how many sync frames at pos the socket received.
func (k *sock) syncCount(pos int64) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.syncs[pos]
}

// roomClients is a practice room with a leader and viewers, each on its own socket.
type roomClients struct {
	code, token string
	leader      *sock
	viewers     []*sock
}

// openRoom creates a lobby room and joins its leader and n viewers.
func (s *stack) openRoom(ctx context.Context, t *testing.T, name string, n int) *roomClients {
	t.Helper()
	c := s.call(ctx, "POST", "/lobby/rooms", `{"name": "`+name+`", "video": {"title": "routine", "durationMs": 3600000}}`, 0)
	if c.code != 201 {
		t.Fatalf("create a room: HTTP %d %s", c.code, c.body)
	}
	var created struct {
		Code        string `json:"code"`
		LeaderToken string `json:"leaderToken"`
	}
	if err := json.Unmarshal(c.body, &created); err != nil {
		t.Fatal(err)
	}
	r := &roomClients{code: created.Code, token: created.LeaderToken}
	base := "/rooms/" + r.code + "/websocket?"
	r.leader = s.dial(ctx, t, "leader", base+"role=leader&clientId=leader&token="+url.QueryEscape(r.token))
	for i := range n {
		r.viewers = append(r.viewers, s.dial(ctx, t, fmt.Sprintf("viewer %d", i+1), base+fmt.Sprintf("role=viewer&clientId=viewer-%d", i+1)))
	}
	return r
}

// sync sends the leader's sync at pos (paused: every value is one sync, told apart by it).
func (r *roomClients) sync(ctx context.Context, pos int64) error {
	return r.leader.send(ctx, map[string]any{"type": "sync", "playing": false, "positionMs": pos})
}

// sockets is every socket of the room.
func (r *roomClients) sockets() []*sock { return append([]*sock{r.leader}, r.viewers...) }

// viewerCount reads the lobby's viewer count of the room (-1 without an answer).
func (s *stack) viewerCount(ctx context.Context, code string) (int, restCall) {
	c := s.call(ctx, "GET", "/lobby/rooms/"+code, "", 0)
	if c.code != 200 {
		return -1, c
	}
	var v struct {
		Viewers *int `json:"viewers"`
		Room    *struct {
			Viewers int `json:"viewers"`
		} `json:"room"`
	}
	if json.Unmarshal(c.body, &v) != nil {
		return -1, c
	}
	if v.Room != nil {
		return v.Room.Viewers, c
	}
	if v.Viewers != nil {
		return *v.Viewers, c
	}
	return -1, c
}

// chatMembers joins n members to a chat room.
func (s *stack) chatMembers(ctx context.Context, t *testing.T, room string, n int) []*sock {
	t.Helper()
	var ks []*sock
	for i := range n {
		ks = append(ks, s.dial(ctx, t, fmt.Sprintf("chat member %d", i+1),
			fmt.Sprintf("/websocket?room=%s&userId=member-%d&username=member%d", url.QueryEscape(room), i+1, i+1)))
	}
	return ks
}

// post posts a chat message over REST, again with the same postId (stored once) while the
// answer is not 201, until ctx ends. It returns the answered call and how many were made.
func (s *stack) post(ctx context.Context, room, body string) (restCall, int) {
	js, _ := json.Marshal(map[string]string{"userId": "poster", "username": "poster", "body": body, "postId": "post-" + body})
	for n := 1; ; n++ {
		c := s.call(ctx, "POST", "/chat/rooms/"+url.PathEscape(room)+"/messages", string(js), 0)
		if c.code == 201 || ctx.Err() != nil {
			return c, n
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return c, n
		case <-t.C:
		}
	}
}
