package room

import (
	"bytes"
	"encoding/json"

	"github.com/vigil-dev/vigil/gateway/jsonapi"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// The practice room's JSON frames, both ways: what the socket sends is checked by type and
// becomes a JoinRequest; what the Room service sends becomes the socket's JSON.

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
	// Formation is the mark's formation in a state frame (null: none); absent on a mark frame.
	Formation json.RawMessage `json:"formation,omitempty"`
}

type roomCountInJSON struct {
	Beats int32 `json:"beats"`
	BPM   int32 `json:"bpm"`
}

type roomPlaybackJSON struct {
	Playing    bool             `json:"playing"`
	PositionMs int64            `json:"positionMs"`
	At         int64            `json:"at"`
	Rate       float64          `json:"rate"`
	CountIn    *roomCountInJSON `json:"countIn"`
}

type roomLoopJSON struct {
	Type    string `json:"type,omitempty"`
	StartMs int64  `json:"startMs"`
	EndMs   int64  `json:"endMs"`
	At      int64  `json:"at,omitempty"`
}

type roomMarkFormationJSON struct {
	Type       string          `json:"type"`
	PositionMs int64           `json:"positionMs"`
	Formation  json.RawMessage `json:"formation"`
	At         int64           `json:"at"`
}

type roomStateJSON struct {
	Type          string           `json:"type"`
	Playback      roomPlaybackJSON `json:"playback"`
	Formation     json.RawMessage  `json:"formation"`
	Marks         []roomMarkJSON   `json:"marks"`
	Loop          *roomLoopJSON    `json:"loop"`
	Video         roomVideoJSON    `json:"video"`
	Viewers       int32            `json:"viewers"`
	LeaderPresent bool             `json:"leaderPresent"`
	People        []roomPersonJSON `json:"people"`
}

// roomPersonJSON is one person present: in a state's people, or a join frame (with its type).
type roomPersonJSON struct {
	Type     string `json:"type,omitempty"`
	ClientID string `json:"clientId"`
	Name     string `json:"name"`
	Role     string `json:"role"`
	Since    int64  `json:"since"`
}

// roomLeaveJSON is a leave frame.
type roomLeaveJSON struct {
	Type     string `json:"type"`
	ClientID string `json:"clientId"`
	Role     string `json:"role"`
}

func roleName(r roomv1.Role) string {
	if r == roomv1.Role_ROLE_LEADER {
		return "leader"
	}
	return "viewer"
}

func personJSON(typ string, p *roomv1.Person) roomPersonJSON {
	return roomPersonJSON{Type: typ, ClientID: p.GetClientId(), Name: p.GetName(), Role: roleName(p.GetRole()), Since: p.GetSince()}
}

type roomSyncJSON struct {
	Type       string           `json:"type"`
	Playing    bool             `json:"playing"`
	PositionMs int64            `json:"positionMs"`
	At         int64            `json:"at"`
	Rate       float64          `json:"rate"`
	CountIn    *roomCountInJSON `json:"countIn"`
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
	// Ref is the refused control's ref, as the socket sent it (absent: it had none).
	Ref int64 `json:"ref,omitempty"`
}

func roomErrorFrame(msg string) []byte {
	return roomRefusalFrame(msg, 0)
}

// roomRefusalFrame is the error frame refusing the control the socket sent with ref (0: none).
func roomRefusalFrame(msg string, ref int64) []byte {
	b, _ := json.Marshal(roomErrorJSON{Type: "error", Error: msg, Ref: ref})
	return b
}

// roomAckJSON answers a control the socket sent with a ref: applied at (the room's clock, the
// at its relayed frame carries), or a repeat of one applied before (no at).
type roomAckJSON struct {
	Type   string `json:"type"`
	Ref    int64  `json:"ref"`
	At     int64  `json:"at,omitempty"`
	Repeat bool   `json:"repeat,omitempty"`
}

func roomAckFrame(ref int64, a *roomv1.Ack) []byte {
	b, _ := json.Marshal(roomAckJSON{Type: "ack", Ref: ref, At: a.GetAt(), Repeat: a.GetRepeat()})
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

// roomRate is a frame's rate as the pages read it (a service from before rates sends none: 1).
func roomRate(r float64) float64 {
	if r == 0 {
		return 1
	}
	return r
}

func roomCountIn(c *roomv1.CountIn) *roomCountInJSON {
	if c == nil {
		return nil
	}
	return &roomCountInJSON{Beats: c.GetBeats(), BPM: c.GetBpm()}
}

// encodeRoomFrame renders a Room service frame as the socket's JSON.
func encodeRoomFrame(resp *roomv1.JoinResponse) []byte {
	var v any
	switch f := resp.GetFrame().(type) {
	case *roomv1.JoinResponse_State:
		s := f.State
		marks := make([]roomMarkJSON, 0, len(s.GetMarks()))
		for _, m := range s.GetMarks() {
			marks = append(marks, roomMarkJSON{PositionMs: m.GetPositionMs(), Label: m.GetLabel(), At: m.GetAt(), Formation: formationJSON(m.GetFormation())})
		}
		people := make([]roomPersonJSON, 0, len(s.GetPeople()))
		for _, p := range s.GetPeople() {
			people = append(people, personJSON("", p))
		}
		var loop *roomLoopJSON
		if l := s.GetLoop(); l != nil {
			loop = &roomLoopJSON{StartMs: l.GetStartMs(), EndMs: l.GetEndMs()}
		}
		p := s.GetPlayback()
		v = roomStateJSON{
			Type: "state",
			Playback: roomPlaybackJSON{Playing: p.GetPlaying(), PositionMs: p.GetPositionMs(), At: p.GetAt(),
				Rate: roomRate(p.GetRate()), CountIn: roomCountIn(p.GetCountIn())},
			Loop:          loop,
			Formation:     formationJSON(s.GetFormation()),
			Marks:         marks,
			Video:         roomVideoJSON{Title: s.GetVideo().GetTitle(), DurationMs: s.GetVideo().GetDurationMs()},
			Viewers:       s.GetViewers(),
			LeaderPresent: s.GetLeaderPresent(),
			People:        people,
		}
	case *roomv1.JoinResponse_Join:
		v = personJSON("join", f.Join)
	case *roomv1.JoinResponse_Leave:
		v = roomLeaveJSON{Type: "leave", ClientID: f.Leave.GetClientId(), Role: roleName(f.Leave.GetRole())}
	case *roomv1.JoinResponse_Sync:
		v = roomSyncJSON{Type: "sync", Playing: f.Sync.GetPlaying(), PositionMs: f.Sync.GetPositionMs(), At: f.Sync.GetAt(),
			Rate: roomRate(f.Sync.GetRate()), CountIn: roomCountIn(f.Sync.GetCountIn())}
	case *roomv1.JoinResponse_Loop:
		v = roomLoopJSON{Type: "loop", StartMs: f.Loop.GetStartMs(), EndMs: f.Loop.GetEndMs(), At: f.Loop.GetAt()}
	case *roomv1.JoinResponse_MarkFormation:
		m := f.MarkFormation
		v = roomMarkFormationJSON{Type: "markFormation", PositionMs: m.GetPositionMs(), Formation: formationJSON(m.GetFormation()), At: m.GetAt()}
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
	Rate       json.RawMessage `json:"rate"`
	CountIn    json.RawMessage `json:"countIn"`
	StartMs    json.RawMessage `json:"startMs"`
	EndMs      json.RawMessage `json:"endMs"`
	Ref        json.RawMessage `json:"ref"`
}

// errRoomRef refuses a ref that is not a safe positive integer (up to maxRef, 2^53-1).
const (
	errRoomRef = "ref must be an integer from 1 through 9007199254740991."
	maxRef     = 1<<53 - 1
)

// frameRef reads a control frame's ref (0: none, or not one), for the error frame refusing it.
func frameRef(data []byte) int64 {
	var f struct {
		Ref json.RawMessage `json:"ref"`
	}
	if json.Unmarshal(data, &f) != nil {
		return 0
	}
	ref, ok := jsonapi.Int(f.Ref)
	if !ok || ref < 1 || ref > maxRef {
		return 0
	}
	return ref
}

const errRoomFrame = "Send a JSON object with a type: sync, formation, mark, reload, loop or markFormation."

// absent reports a field left out or null.
func absent(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// decodeFormation reads a frame's formation (absent: null).
func decodeFormation(raw json.RawMessage) (*structpb.Value, string) {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	var v structpb.Value
	if err := protojson.Unmarshal(raw, &v); err != nil {
		return nil, "formation must be a JSON value."
	}
	return &v, ""
}

// decodeRoomFrame turns a client's JSON frame into a Join request, or returns the sentence
// that refuses it. The request's Ref is the client's own ref (0: none); the room's stream
// numbers it again.
func decodeRoomFrame(data []byte) (*roomv1.JoinRequest, string) {
	var f roomClientFrame
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, errRoomFrame
	}
	var ref int64
	if !absent(f.Ref) {
		var ok bool
		if ref, ok = jsonapi.Int(f.Ref); !ok || ref < 1 || ref > maxRef {
			return nil, errRoomRef
		}
	}
	req, msg := decodeControl(f)
	if req != nil {
		req.Ref = ref
	}
	return req, msg
}

// decodeControl checks a client frame's fields by its type.
func decodeControl(f roomClientFrame) (*roomv1.JoinRequest, string) {
	switch f.Type {
	case "sync":
		playing, ok := jsonBool(f.Playing)
		if !ok {
			return nil, "playing must be true or false."
		}
		pos, ok := jsonapi.Int(f.PositionMs)
		if !ok {
			return nil, "positionMs must be an integer from 0 through 86400000."
		}
		sync := &roomv1.Sync{Playing: playing, PositionMs: pos}
		if !absent(f.Rate) {
			// The Room service checks the range and the 0.05 steps, with the sentence.
			if json.Unmarshal(f.Rate, &sync.Rate) != nil || sync.Rate == 0 {
				return nil, "rate must be a number from 0.25 to 2 in steps of 0.05."
			}
		}
		if !absent(f.CountIn) {
			var c struct {
				Beats json.RawMessage `json:"beats"`
				BPM   json.RawMessage `json:"bpm"`
			}
			if json.Unmarshal(f.CountIn, &c) != nil {
				return nil, `countIn must be {"beats": 1-16, "bpm": 40-240}.`
			}
			beats, ok1 := jsonapi.Int(c.Beats)
			bpm, ok2 := jsonapi.Int(c.BPM)
			if !ok1 || !ok2 || beats < 1 || beats > 16 || bpm < 40 || bpm > 240 {
				return nil, `countIn must be {"beats": 1-16, "bpm": 40-240}.`
			}
			sync.CountIn = &roomv1.CountIn{Beats: int32(beats), Bpm: int32(bpm)}
		}
		return &roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Sync{Sync: sync}}, ""
	case "formation":
		v, msg := decodeFormation(f.Formation)
		if msg != "" {
			return nil, msg
		}
		return &roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Formation{Formation: &roomv1.Formation{Formation: v}}}, ""
	case "loop":
		start, ok1 := jsonapi.Int(f.StartMs)
		end, ok2 := jsonapi.Int(f.EndMs)
		if !ok1 || !ok2 {
			return nil, "startMs and endMs must be integers (both 0 clears the loop)."
		}
		return &roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Loop{Loop: &roomv1.Loop{StartMs: start, EndMs: end}}}, ""
	case "markFormation":
		pos, ok := jsonapi.Int(f.PositionMs)
		if !ok {
			return nil, "positionMs must be an integer from 0 through 86400000."
		}
		v, msg := decodeFormation(f.Formation)
		if msg != "" {
			return nil, msg
		}
		return &roomv1.JoinRequest{Frame: &roomv1.JoinRequest_MarkFormation{MarkFormation: &roomv1.MarkFormation{PositionMs: pos, Formation: v}}}, ""
	case "mark":
		pos, ok := jsonapi.Int(f.PositionMs)
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
			dur, ok := jsonapi.Int(v.DurationMs)
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
