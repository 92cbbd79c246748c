package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
)

// The room domain: the practice-room WebSocket GET /rooms/{code}/websocket?role=&clientId=
// [&token=], and DELETE /lobby/rooms/{code} (RoomService.EndRoom, through grpc-gateway, with
// the leader token as "Authorization: Bearer"). Ending a room is the Room service's job: it
// checks the token with the Lobby, closes every socket (4000 "ended"), removes the room from
// the Lobby and deletes its state, the same clean-up its inactivity alarm runs.
//
// Each socket is one Join stream: a socket is a session that the Room service counts (viewers
// are distinct client ids), so sessions are the unit the service leases and sweeps. The hello
// is answered before the upgrade, so a wrong or missing leader token is a plain 401 and a
// missing room a 404, never an upgraded socket that closes at once.

// roomCloseCode closes a socket whose room ended ("ended") or expired ("expired").
const roomCloseCode websocket.StatusCode = 4000

// roomHelloTimeout bounds the Room service's answer to a hello, before the upgrade.
const roomHelloTimeout = 10 * time.Second

func roomDomain(addr string) domain {
	return domain{
		name: "room",
		addr: backendTarget(addr),
		rest: func(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
			return roomv1.RegisterRoomServiceHandler(ctx, mux, conn)
		},
		sockets: func(g *Gateway, mux *router, conn *grpc.ClientConn) {
			b := &roomBridge{client: roomv1.NewRoomServiceClient(conn), lim: g.socketLimits(24 << 10)}
			b.log = g.log
			mux.HandleFunc("GET /rooms/{code}/websocket", b.serveSocket)
		},
		created: map[string]int{
			"/vigil.room.v1.RoomService/EndRoom": http.StatusNoContent,
		},
		allowEmpty: []protoreflect.FullName{"vigil.room.v1.EndRoomRequest"},
	}
}

// roomBridge bridges practice-room sockets to RoomService.Join streams.
type roomBridge struct {
	client roomv1.RoomServiceClient
	lim    wsLimits
	log    *slog.Logger
}

func (b *roomBridge) serveSocket(w http.ResponseWriter, r *http.Request) {
	if !isWebSocketUpgrade(r) {
		refuseNonWebSocket(w)
		return
	}
	q := r.URL.Query()
	var role roomv1.Role
	switch q.Get("role") {
	case "", "viewer":
		role = roomv1.Role_ROLE_VIEWER
	case "leader":
		role = roomv1.Role_ROLE_LEADER
	default:
		writeError(w, http.StatusBadRequest, "role must be leader or viewer.")
		return
	}
	clientID := q.Get("clientId")
	if clientID == "" {
		clientID = "c-" + newRoomClientID()
	}
	token := q.Get("token")
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && token == "" {
		token = strings.TrimSpace(t)
	}

	// The stream outlives this handler: it ends with the socket.
	ctx, cancel := context.WithCancel(context.Background())
	helloTimer := time.AfterFunc(roomHelloTimeout, cancel)
	stream, err := b.client.Join(ctx)
	if err == nil {
		err = stream.Send(&roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Hello{Hello: &roomv1.Hello{
			Code: r.PathValue("code"), Role: role, ClientId: clientID, LeaderToken: token,
		}}})
	}
	var first *roomv1.JoinResponse
	if err == nil {
		first, err = stream.Recv()
	}
	if !helloTimer.Stop() && err == nil {
		err = status.Error(codes.DeadlineExceeded, "hello timed out")
	}
	if err != nil {
		cancel()
		refuseRoomSocket(w, err)
		return
	}
	sock, err := acceptSocket(w, r, &b.lim)
	if err != nil {
		cancel()
		b.log.Info("websocket upgrade failed", "event", "ws_refused", "route", "room", "err", err)
		return
	}
	sock.Send(encodeRoomFrame(first))
	go roomDownstream(stream, sock, cancel)
	// The handler's goroutine becomes the socket's reader.
	roomUpstream(stream, sock, cancel)
}

// refuseRoomSocket answers a refused hello before any upgrade.
func refuseRoomSocket(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	code, msg := runtime.HTTPStatusFromCode(st.Code()), st.Message()
	switch st.Code() {
	case codes.InvalidArgument, codes.NotFound, codes.Unauthenticated, codes.PermissionDenied:
	case codes.DeadlineExceeded:
		msg = "The room service did not answer in time; try again."
	default:
		code, msg = http.StatusServiceUnavailable, "The room service is unavailable; try again shortly."
	}
	writeError(w, code, msg)
}

// roomDownstream copies the Room service's frames to the socket and closes the socket when the
// room ends (4000 with the reason) or the stream breaks.
func roomDownstream(stream roomv1.RoomService_JoinClient, sock *wsSocket, cancel context.CancelFunc) {
	defer cancel()
	for {
		resp, err := stream.Recv()
		if err != nil {
			switch status.Code(err) {
			case codes.Canceled:
				// The client left: the socket is already closed.
			case codes.Aborted:
				sock.Close(websocket.StatusTryAgainLater, status.Convert(err).Message())
			default:
				sock.Close(websocket.StatusServiceRestart, "The room service is restarting; reconnect.")
			}
			return
		}
		if e := resp.GetEnded(); e != nil {
			sock.Close(roomCloseCode, e.GetReason())
			return
		}
		sock.Send(encodeRoomFrame(resp))
	}
}

// roomUpstream reads the client's frames, checks their JSON and sends them up the stream; a bad
// frame gets an error frame and the socket stays open.
func roomUpstream(stream roomv1.RoomService_JoinClient, sock *wsSocket, cancel context.CancelFunc) {
	defer cancel()
	for {
		data, err := sock.Read()
		if err != nil {
			return
		}
		if !sock.Allow() {
			sock.Send(roomErrorFrame("Too many frames; slow down."))
			continue
		}
		req, msg := decodeRoomFrame(data)
		if msg != "" {
			sock.Send(roomErrorFrame(msg))
			continue
		}
		if err := stream.Send(req); err != nil {
			return
		}
	}
}

func newRoomClientID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// JSON frames, as docs/API.md gives them.

type roomVideoJSON struct {
	Title      string `json:"title"`
	DurationMs int64  `json:"durationMs"`
}

type roomMarkJSON struct {
	Type       string `json:"type,omitempty"`
	PositionMs int64  `json:"positionMs"`
	Label      string `json:"label"`
	At         int64  `json:"at"`
}

type roomPlaybackJSON struct {
	Playing    bool  `json:"playing"`
	PositionMs int64 `json:"positionMs"`
	At         int64 `json:"at"`
}

type roomStateJSON struct {
	Type          string           `json:"type"`
	Playback      roomPlaybackJSON `json:"playback"`
	Formation     json.RawMessage  `json:"formation"`
	Marks         []roomMarkJSON   `json:"marks"`
	Video         roomVideoJSON    `json:"video"`
	Viewers       int32            `json:"viewers"`
	LeaderPresent bool             `json:"leaderPresent"`
}

type roomSyncJSON struct {
	Type       string `json:"type"`
	Playing    bool   `json:"playing"`
	PositionMs int64  `json:"positionMs"`
	At         int64  `json:"at"`
}

type roomFormationJSON struct {
	Type      string          `json:"type"`
	Formation json.RawMessage `json:"formation"`
	At        int64           `json:"at"`
}

type roomReloadJSON struct {
	Type  string         `json:"type"`
	Video *roomVideoJSON `json:"video"`
	At    int64          `json:"at"`
}

type roomOccupancyJSON struct {
	Type          string `json:"type"`
	Viewers       int32  `json:"viewers"`
	LeaderPresent bool   `json:"leaderPresent"`
}

type roomErrorJSON struct {
	Type  string `json:"type"`
	Error string `json:"error"`
}

func roomErrorFrame(msg string) []byte {
	b, _ := json.Marshal(roomErrorJSON{Type: "error", Error: msg})
	return b
}

func formationJSON(v *structpb.Value) json.RawMessage {
	if v == nil {
		return json.RawMessage("null")
	}
	b, err := protojson.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// encodeRoomFrame renders a Room service frame as the socket's JSON.
func encodeRoomFrame(resp *roomv1.JoinResponse) []byte {
	var v any
	switch f := resp.GetFrame().(type) {
	case *roomv1.JoinResponse_State:
		s := f.State
		marks := make([]roomMarkJSON, 0, len(s.GetMarks()))
		for _, m := range s.GetMarks() {
			marks = append(marks, roomMarkJSON{PositionMs: m.GetPositionMs(), Label: m.GetLabel(), At: m.GetAt()})
		}
		v = roomStateJSON{
			Type:          "state",
			Playback:      roomPlaybackJSON{Playing: s.GetPlayback().GetPlaying(), PositionMs: s.GetPlayback().GetPositionMs(), At: s.GetPlayback().GetAt()},
			Formation:     formationJSON(s.GetFormation()),
			Marks:         marks,
			Video:         roomVideoJSON{Title: s.GetVideo().GetTitle(), DurationMs: s.GetVideo().GetDurationMs()},
			Viewers:       s.GetViewers(),
			LeaderPresent: s.GetLeaderPresent(),
		}
	case *roomv1.JoinResponse_Sync:
		v = roomSyncJSON{Type: "sync", Playing: f.Sync.GetPlaying(), PositionMs: f.Sync.GetPositionMs(), At: f.Sync.GetAt()}
	case *roomv1.JoinResponse_Formation:
		v = roomFormationJSON{Type: "formation", Formation: formationJSON(f.Formation.GetFormation()), At: f.Formation.GetAt()}
	case *roomv1.JoinResponse_Mark:
		v = roomMarkJSON{Type: "mark", PositionMs: f.Mark.GetPositionMs(), Label: f.Mark.GetLabel(), At: f.Mark.GetAt()}
	case *roomv1.JoinResponse_Reload:
		r := roomReloadJSON{Type: "reload", At: f.Reload.GetAt()}
		if vid := f.Reload.Video; vid != nil {
			r.Video = &roomVideoJSON{Title: vid.GetTitle(), DurationMs: vid.GetDurationMs()}
		}
		v = r
	case *roomv1.JoinResponse_Occupancy:
		v = roomOccupancyJSON{Type: "occupancy", Viewers: f.Occupancy.GetViewers(), LeaderPresent: f.Occupancy.GetLeaderPresent()}
	case *roomv1.JoinResponse_Error:
		v = roomErrorJSON{Type: "error", Error: f.Error.GetMessage()}
	default:
		return roomErrorFrame("Unknown frame from the room service.")
	}
	b, _ := json.Marshal(v)
	return b
}

// roomClientFrame is what a client sends; fields are checked by type before use.
type roomClientFrame struct {
	Type       string          `json:"type"`
	Playing    json.RawMessage `json:"playing"`
	PositionMs json.RawMessage `json:"positionMs"`
	Formation  json.RawMessage `json:"formation"`
	Label      json.RawMessage `json:"label"`
	Video      json.RawMessage `json:"video"`
}

const errRoomFrame = "Send a JSON object with a type: sync, formation, mark or reload."

// decodeRoomFrame turns a client's JSON frame into a Join request, or returns the sentence
// that refuses it.
func decodeRoomFrame(data []byte) (*roomv1.JoinRequest, string) {
	var f roomClientFrame
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, errRoomFrame
	}
	switch f.Type {
	case "sync":
		playing, ok := jsonBool(f.Playing)
		if !ok {
			return nil, "playing must be true or false."
		}
		pos, ok := jsonInt(f.PositionMs)
		if !ok {
			return nil, "positionMs must be an integer from 0 through 86400000."
		}
		return &roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Sync{Sync: &roomv1.Sync{Playing: playing, PositionMs: pos}}}, ""
	case "formation":
		raw := f.Formation
		if len(raw) == 0 {
			raw = json.RawMessage("null")
		}
		var v structpb.Value
		if err := protojson.Unmarshal(raw, &v); err != nil {
			return nil, "formation must be a JSON value."
		}
		return &roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Formation{Formation: &roomv1.Formation{Formation: &v}}}, ""
	case "mark":
		pos, ok := jsonInt(f.PositionMs)
		if !ok {
			return nil, "positionMs must be an integer from 0 through 86400000."
		}
		label := ""
		if len(f.Label) > 0 && !bytes.Equal(f.Label, []byte("null")) {
			if json.Unmarshal(f.Label, &label) != nil {
				return nil, "label must be a string."
			}
		}
		return &roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Mark{Mark: &roomv1.Mark{PositionMs: pos, Label: label}}}, ""
	case "reload":
		r := &roomv1.Reload{}
		if len(f.Video) > 0 && !bytes.Equal(f.Video, []byte("null")) {
			var v struct {
				Title      json.RawMessage `json:"title"`
				DurationMs json.RawMessage `json:"durationMs"`
			}
			var title string
			if json.Unmarshal(f.Video, &v) != nil || json.Unmarshal(v.Title, &title) != nil {
				return nil, "video must be {\"title\": string, \"durationMs\": integer}."
			}
			dur, ok := jsonInt(v.DurationMs)
			if !ok {
				return nil, "video.durationMs must be an integer from 1 through 86400000."
			}
			r.Video = &roomv1.Video{Title: title, DurationMs: dur}
		}
		return &roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Reload{Reload: r}}, ""
	}
	return nil, errRoomFrame
}

func jsonBool(raw json.RawMessage) (bool, bool) {
	var b bool
	if len(raw) == 0 || json.Unmarshal(raw, &b) != nil {
		return false, false
	}
	return b, true
}

// jsonInt accepts only a JSON integer (no string, fraction or exponent).
func jsonInt(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false // json.Number would also take "5", a string
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil || strings.ContainsAny(n.String(), ".eE") {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}
