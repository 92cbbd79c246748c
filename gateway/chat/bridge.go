// Package chat is the chat WebSocket route: one upstream Connect stream per room with members
// on this gateway, fanned out to its sockets, re-attached when it breaks.
package chat

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/grpc"

	"github.com/vigil-dev/vigil/gateway/bridge"
	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"github.com/vigil-dev/vigil/gateway/socket"
	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/pkg/input"
)

// The chat domain: REST history and posts through grpc-gateway, and the WebSocket bridge
// GET /websocket?room=&userId=&username=[&since=][&pack=1][&presence=1] (pack=1: a burst of frames may
// arrive as one frame of newline-separated JSON objects).
//
// Fan-out happens here, at the edge: the gateway keeps ONE Connect stream per room it has
// members in (a chatRoom), keeps the room's recent messages, and copies each message to its
// local sockets from one JSON encoding. When a stream breaks (a chat replica is killed or
// rolled), the room re-attaches to any replica from the last id it delivered; sockets stay
// open and see every message once, in order. Message ids are JSON numbers: the room's
// sequence, 1, 2, 3, … (after a store failover that lost the tail, one jump above every id
// handed out before).

// Bridge serves the chat WebSocket route.
type Bridge struct {
	client  chatv1.ChatServiceClient
	log     *slog.Logger
	sockets *socket.Registry
	lim     socket.Limits
	// postPrefix makes this gateway's post ids (and session ids) unique; postSeq numbers the
	// posts, sessionSeq the sockets.
	postPrefix string
	postSeq    atomic.Uint64
	sessionSeq atomic.Uint64
	// joinTimeout bounds how long a new socket waits for its room's history.
	joinTimeout time.Duration
	// postTimeout bounds how long a post waits for the service to store it.
	postTimeout time.Duration

	// rooms are the rooms with members on this gateway, each with its one upstream stream.
	rooms *bridge.Hub[*chatRoom]
}

// NewBridge serves chat sockets from sockets, each with lim, over conn's chat service.
func NewBridge(conn *grpc.ClientConn, log *slog.Logger, sockets *socket.Registry, lim socket.Limits) *Bridge {
	lim = lim.WithDefaults()
	b := &Bridge{
		client: chatv1.NewChatServiceClient(conn), log: log, sockets: sockets, lim: lim,
		postPrefix: randomHex(8) + "-", joinTimeout: 10 * time.Second,
		// Shorter than the pong timeout: the reader goroutine, which reads pongs, waits on a post.
		postTimeout: min(8*time.Second, lim.PongTimeout*4/5),
	}
	b.rooms = bridge.NewHub(conn, bridge.Heartbeat{}, func(string) *chatRoom { return newChatRoom(b) })
	return b
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The chat's names, as people write them (issue 12): a room is 1 to 128 bytes of UTF-8 without
// control characters, a username 1 to 64 characters, a user id 1 to 128 characters.
const (
	chatRoomMaxBytes    = 128
	chatUsernameMaxRune = 64
	chatUserIDMaxRune   = 128
	// defaultUsername is the seed's 익명: what a socket without a username is called.
	defaultUsername = "anonymous"
)

// chatQuery is a chat socket's query: room, user and where to resume.
type chatQuery struct {
	room, userID, username string
	since                  *int64
	pack                   bool
	// presence: the socket also gets who is here (a presence frame, then join and leave).
	presence bool
}

// parseChatQuery checks GET /websocket's query; the error's sentence is the 400's.
func parseChatQuery(q url.Values) (chatQuery, error) {
	c := chatQuery{room: q.Get("room"), userID: q.Get("userId"), username: q.Get("username"), pack: q.Get("pack") == "1"}
	if c.room == "" {
		c.room = "general"
	}
	if err := input.Name("room", c.room, chatRoomMaxBytes); err != nil {
		return c, err
	}
	if c.userID == "" {
		c.userID = uuid.NewString()
	}
	if err := input.Text("userId", c.userID, 1, chatUserIDMaxRune); err != nil {
		return c, err
	}
	if c.username == "" {
		c.username = defaultUsername
	}
	if err := input.Text("username", c.username, 1, chatUsernameMaxRune); err != nil {
		return c, err
	}
	switch q.Get("presence") {
	case "1":
		c.presence = true
	case "", "0":
	default:
		return c, errors.New("presence must be 1 (who is here, with join and leave frames) or 0.")
	}
	if s := q.Get("since"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > input.MaxSafeInt {
			return c, errors.New("since must be a message id: an integer from 0 through 9007199254740991.")
		}
		c.since = &n
	}
	return c, nil
}

// ServeSocket upgrades GET /websocket and hands the socket to its reader goroutine. Bad query
// parameters get 400 before the upgrade; the socket layer answers a plain HTTP request (426),
// a foreign origin (403) and a full room (429).
func (b *Bridge) ServeSocket(w http.ResponseWriter, r *http.Request) {
	if !socket.IsUpgrade(r) {
		socket.RefuseNonWebSocket(w)
		return
	}
	q, err := parseChatQuery(r.URL.Query())
	if err != nil {
		jsonapi.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	ticket, ok := b.sockets.Admit(w, r, socket.Key{Route: "chat", Name: q.room})
	if !ok {
		return
	}
	sock, err := ticket.Accept(w, r, b.lim)
	if err != nil {
		b.log.Info("websocket upgrade failed", "event", "ws_refused", "route", "chat", "err", err)
		return
	}
	if q.pack {
		sock.PackBursts()
	}
	m := &chatMember{sock: sock, userID: q.userID, username: q.username, presence: q.presence,
		session: b.postPrefix + "s" + strconv.FormatUint(b.sessionSeq.Add(1), 36)}
	// The handler returns now; the reader goroutine is the socket's only goroutine.
	go b.serveMember(q.room, q.since, m)
}

// chatMember is one socket in a room.
type chatMember struct {
	sock     *socket.Conn
	userID   string
	username string
	// session is the socket's id in the room's presence (Enter/Exit on the room's stream).
	session string
	// presence: the socket gets the presence frame and join/leave frames.
	presence bool
}

// clientFrame is what a client sends.
type clientFrame struct {
	Body *string `json:"body"`
}

// serveMember is the socket's reader goroutine: join, then read the client's frames until it
// leaves.
func (b *Bridge) serveMember(roomName string, since *int64, m *chatMember) {
	room, err := b.join(roomName, since, m)
	if err != nil {
		b.log.Warn("chat join failed", "event", "ws_join_failed", "room", roomName, "err", err)
		m.sock.Close(socket.TryAgainLater, "chat is unavailable; reconnect shortly")
		return
	}
	defer func() {
		b.leave(room, m)
		m.sock.CloseNow()
	}()
	for {
		data, err := m.sock.Read()
		if err != nil {
			return
		}
		if !m.sock.Allow() {
			m.sock.Send(errorFrame("You are sending messages too fast; wait a moment."))
			continue
		}
		var f clientFrame
		if err := json.Unmarshal(data, &f); err != nil {
			m.sock.Send(errorFrame(`Send a JSON object like {"body":"hello"}.`))
			continue
		}
		if f.Body == nil {
			m.sock.Send(errorFrame(`Send a JSON object like {"body":"hello"}.`))
			continue
		}
		if n := utf8.RuneCountInString(*f.Body); n < 1 || n > 4096 {
			m.sock.Send(errorFrame("body must be 1 to 4096 characters."))
			continue
		}
		if msg := room.post(m, *f.Body); msg != "" {
			m.sock.Send(errorFrame(msg))
		}
	}
}

// join adds m to its room, starting the room's upstream stream if it is the first member, and
// sends m its history frame before any live message.
func (b *Bridge) join(name string, since *int64, m *chatMember) (*chatRoom, error) {
	r := b.rooms.Join(name)
	if err := r.addMember(m, since); err != nil {
		b.leave(r, m)
		return nil, err
	}
	return r, nil
}

// leave removes m and closes its session; the room's upstream stream ends with its last
// member, once the service has closed that member's session (a stream cancelled first could
// leave it to its lease).
func (b *Bridge) leave(r *chatRoom, m *chatMember) {
	r.exitMember(m)
	b.rooms.Leave(r)
}
