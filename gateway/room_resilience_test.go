package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// roomProcess runs the Room service as a child process on the stack's address, so the test
// can SIGKILL or pause it. It returns once the process listens.
func (s *roomStack) roomProcess(t *testing.T) *servertest.Process {
	t.Helper()
	return servertest.StartProcess(t, "room", s.roomAddr, "-redis-url", s.url, "-prefix", s.prefix+"-room", "-shards", "4",
		"-lobby-addr", s.lobbyAddr, "-idle-ttl", "1h", "-session-lease", s.lease.String())
}

func (s *roomStack) createRoom(t *testing.T) (code, token string) {
	t.Helper()
	return createRoom(t, s.gw, `{"name": "Resilient", "video": {"title": "Routine", "durationMs": 180000}}`)
}

// lobbySampler reads the room's Lobby entry over and over until finished, for as long as a
// fault lasts. The Lobby is not the service the fault hits, so every read must answer 200 with
// the count the test expects: a read that fails (no answer, another status, a body that is not
// the entry) fails the test as surely as a wrong count. A sampler that stalled would check
// nothing, so the test names the moments a read must cover (await) and finish waits for one
// more read before it stops.
type lobbySampler struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	epoch  int // counts await and finish calls
	read   int // the latest epoch a read began in and answered
	n      int // reads answered with the entry
	wrong  []string
	failed []string
}

func sampleLobby(t *testing.T, gw, code string, viewers int64, leader bool) *lobbySampler {
	l := &lobbySampler{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: wait.Deadline}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			l.mu.Lock()
			epoch := l.epoch
			l.mu.Unlock()
			body, err := readLobbyEntry(client, gw+"/lobby/rooms/"+code)
			l.mu.Lock()
			switch {
			case err != nil:
				l.failed = append(l.failed, err.Error())
			case body.Viewers != viewers || body.LeaderPresent != leader:
				l.wrong = append(l.wrong, fmt.Sprintf("%d viewers, leader %v", body.Viewers, body.LeaderPresent))
				fallthrough
			default:
				l.n++
				l.read = max(l.read, epoch)
			}
			l.mu.Unlock()
			time.Sleep(10 * time.Millisecond) // a sampling pace, not a wait for a condition
		}
	}()
	return l
}

// lobbyEntry is the part of GET /lobby/rooms/{code} the sampler checks.
type lobbyEntry struct {
	Viewers       int64 `json:"viewers"`
	LeaderPresent bool  `json:"leaderPresent"`
}

// readLobbyEntry reads a room's Lobby entry; anything but a 200 with a JSON body is an error.
func readLobbyEntry(client *http.Client, url string) (lobbyEntry, error) {
	var body lobbyEntry
	res, err := client.Get(url)
	if err != nil {
		return body, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(res.Body)
		return body, fmt.Errorf("GET %s = %d %s", url, res.StatusCode, raw)
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return body, fmt.Errorf("GET %s: %v", url, err)
	}
	return body, nil
}

// await waits until a read that began after this call has answered: the Lobby was read at
// this moment of the test (while the room service is away, say).
func (l *lobbySampler) await(t *testing.T, what string) {
	t.Helper()
	l.mu.Lock()
	l.epoch++
	want := l.epoch
	l.mu.Unlock()
	wait.For(t, "a Lobby read "+what, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.read < want {
			if len(l.failed) > 0 {
				return fmt.Errorf("%d reads answered so far, none since; %d failed, the last: %s", l.n, len(l.failed), l.failed[len(l.failed)-1])
			}
			return fmt.Errorf("%d reads answered so far, none since", l.n)
		}
		return nil
	})
}

// finish waits for one more read, stops the sampler and fails the test if any read failed or
// saw a count other than the one expected.
func (l *lobbySampler) finish(t *testing.T) {
	t.Helper()
	l.await(t, "at the end of the fault")
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failed) > 0 {
		t.Errorf("%d of %d Lobby reads failed while the room service was replaced (the Lobby was not); the first: %v", len(l.failed), len(l.failed)+l.n, l.failed[:min(len(l.failed), 5)])
	}
	if len(l.wrong) > 0 {
		t.Errorf("the Lobby's count moved while the room service was replaced: %d of %d reads were %v", len(l.wrong), l.n, l.wrong)
	}
	t.Logf("%d Lobby reads, all with the expected count", l.n)
}

// assertOpen fails if any socket was closed.
func assertOpen(t *testing.T, socks ...*roomSocket) {
	t.Helper()
	for i, s := range socks {
		select {
		case err := <-s.closed:
			t.Fatalf("socket %d closed: %v", i, err)
		default:
		}
	}
}

// roomReplaced runs the restart scenario: a leader and viewers in a room, the Room service
// stopped, a leader's mark sent while it is away, the service started again, and then: no
// socket closed, every socket got a fresh state, the mark sent in the gap reached every
// viewer, the Lobby's count never moved, the leader's next sync reaches every viewer, and a
// viewer who leaves is counted.
func roomReplaced(t *testing.T, s *roomStack, stop, start func()) {
	const viewers = 5
	code, lead, vs := s.openRoom(t, viewers)

	sampler := sampleLobby(t, s.gw, code, viewers, true)
	stop()
	lead.send(`{"type": "mark", "positionMs": 1000, "label": "in the gap"}`)
	sampler.await(t, "while the room service is away")
	start()
	// Each socket's session re-attaches and the socket gets the room's state again; the mark
	// sent in the gap reaches every viewer, as a mark frame or in that state.
	if st := lead.nextWithin("state", wait.Deadline); st["viewers"] != json.Number(fmt.Sprint(viewers)) || st["leaderPresent"] != true {
		t.Fatalf("leader's state after the re-attach = %v, want %d viewers and the leader", st, viewers)
	}
	for _, v := range vs {
		gotState, gotMark := false, false
		for !gotState || !gotMark {
			f := v.nextWithin("", wait.Deadline)
			switch f["type"] {
			case "state":
				gotState = true
				gotMark = gotMark || strings.Contains(fmt.Sprint(f["marks"]), "in the gap")
			case "mark":
				gotMark = gotMark || f["label"] == "in the gap"
			}
		}
	}
	lead.send(`{"type": "sync", "playing": true, "positionMs": 4242}`)
	for i, v := range vs {
		if f := v.nextWithin("sync", wait.Deadline); f["positionMs"] != json.Number("4242") {
			t.Fatalf("viewer %d's sync = %v, want positionMs 4242", i, f)
		}
	}
	sampler.finish(t)
	assertOpen(t, append([]*roomSocket{lead}, vs...)...)

	_ = vs[0].c.Close(websocket.StatusNormalClosure, "bye")
	wait.For(t, "the Lobby counts the viewer who left", lobbyViewers(t, s.gw, code, viewers-1, true))
	assertOpen(t, append([]*roomSocket{lead}, vs[1:]...)...)
	if errs := s.logs.Events(map[string]any{"level": "ERROR", "service": "gateway"}); len(errs) > 0 {
		t.Errorf("the gateway logged %d ERROR lines, want none; first: %v", len(errs), errs[0])
	}
}

// openRoom creates a room and opens its leader's socket and viewers viewers' sockets, each
// past its state, once the Lobby counts them.
func (s *roomStack) openRoom(t *testing.T, viewers int) (code string, lead *roomSocket, vs []*roomSocket) {
	t.Helper()
	code, token := s.createRoom(t)
	lead = mustDialRoom(t, s.gw, code, "role=leader&clientId=lead&token="+token)
	lead.next("state")
	for i := range viewers {
		v := mustDialRoom(t, s.gw, code, fmt.Sprintf("role=viewer&clientId=v%d", i))
		v.next("state")
		vs = append(vs, v)
	}
	wait.For(t, "the Lobby counts the viewers and the leader", lobbyViewers(t, s.gw, code, int64(viewers), true))
	return code, lead, vs
}

// assertNoErrors fails on any ERROR line in the stack's logs.
func (s *roomStack) assertNoErrors(t *testing.T) {
	t.Helper()
	if errs := s.logs.Events(map[string]any{"level": "ERROR"}); len(errs) > 0 {
		t.Errorf("%d ERROR log lines, want none; first: %v", len(errs), errs[0])
	}
}

// TestPracticeRoomSurvivesGracefulRestart: the Room service drains and a new one starts on the
// same address; no socket closes and the Lobby's count never moves.
func TestPracticeRoomSurvivesGracefulRestart(t *testing.T) {
	t.Parallel()
	s := newRoomStack(t, 15*time.Second)
	room := s.startRoom(t)
	s.startGateway(t)
	roomReplaced(t, s, func() { room.Stop() }, func() { s.startRoom(t) })
}

// TestPracticeRoomSurvivesKill: the Room service is SIGKILLed and started again on the same
// address; the sessions, still leased, re-attach: no socket closes and the Lobby's count never
// moves.
func TestPracticeRoomSurvivesKill(t *testing.T) {
	t.Parallel()
	s := newRoomStack(t, 15*time.Second)
	room := s.roomProcess(t)
	s.startGateway(t)
	roomReplaced(t, s, func() { room.End(syscall.SIGKILL) }, func() { s.roomProcess(t) })
}

// nextWithin is next with a deadline of its own; typ "" takes any frame.
func (s *roomSocket) nextWithin(typ string, within time.Duration) map[string]any {
	s.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case f := <-s.frames:
			if typ == "" || f["type"] == typ {
				return f
			}
		case err := <-s.closed:
			s.t.Fatalf("socket closed (%v) while waiting for a %q frame", err, typ)
		case <-deadline:
			s.t.Fatalf("no %q frame within %v", typ, within)
		}
	}
}

// TestPracticeRoomLeaveIsNotAnError: viewers and a leader who leave normally (closing their
// sockets, or just dropping the connection) write no ERROR line, in the gateway or the
// services, and are uncounted.
func TestPracticeRoomLeaveIsNotAnError(t *testing.T) {
	t.Parallel()
	s := newRoomStack(t, 15*time.Second)
	s.startRoom(t)
	s.startGateway(t)
	code, token := s.createRoom(t)
	lead := mustDialRoom(t, s.gw, code, "role=leader&clientId=lead&token="+token)
	lead.next("state")
	a := mustDialRoom(t, s.gw, code, "role=viewer&clientId=a")
	b := mustDialRoom(t, s.gw, code, "role=viewer&clientId=b")
	a.next("state")
	b.next("state")
	wait.For(t, "two viewers counted", lobbyViewers(t, s.gw, code, 2, true))
	_ = a.c.Close(websocket.StatusNormalClosure, "bye")
	_ = b.c.CloseNow()
	_ = lead.c.Close(websocket.StatusGoingAway, "tab closed")
	wait.For(t, "everyone uncounted", lobbyViewers(t, s.gw, code, 0, false))
	wait.Until(t, "the gateway logged the leaves", func() bool {
		return len(s.logs.Events(map[string]any{"event": "ws_left"})) >= 3
	})
	s.assertNoErrors(t)
}

// TestChatLeaveIsNotAnError: chat members who leave (closing their sockets, or dropping the
// connection) write no ERROR line in the gateway or the chat service, and the room's
// upstream stream ends with its last member.
func TestChatLeaveIsNotAnError(t *testing.T) {
	t.Parallel()
	env := newChatEnv(t)
	logs := &servertest.LogBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	chat := env.startChat(t, "", log.With("service", "chat"))
	g, err := New(context.Background(), Options{Backends: Backends{Chat: chat.Addr}, Logger: log.With("service", "gateway")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	a := dialChat(t, srv.URL, "room=leaving&username=A")
	b := dialChat(t, srv.URL, "room=leaving&username=B")
	a.nextOfType("history")
	b.nextOfType("history")
	a.say("bye")
	a.nextOfType("message")
	b.nextOfType("message")
	_ = a.c.Close(websocket.StatusNormalClosure, "bye")
	_ = b.c.CloseNow()
	wait.Until(t, "the room's members gone", func() bool { return g.sockets.Open() == 0 })
	wait.Until(t, "the chat stream ended", func() bool {
		return len(logs.Events(map[string]any{"service": "chat", "grpc.method": "Connect"})) > 0
	})
	if errs := logs.Events(map[string]any{"level": "ERROR"}); len(errs) > 0 {
		t.Errorf("%d ERROR log lines, want none; first: %v", len(errs), errs[0])
	}
}
