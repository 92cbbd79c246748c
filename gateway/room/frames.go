package room

import (
	"bytes"
	"encoding/json"
	"strings"

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
		people := make([]roomPersonJSON, 0, len(s.GetPeople()))
		for _, p := range s.GetPeople() {
			people = append(people, personJSON("", p))
		}
		v = roomStateJSON{
			Type:          "state",
			Playback:      roomPlaybackJSON{Playing: s.GetPlayback().GetPlaying(), PositionMs: s.GetPlayback().GetPositionMs(), At: s.GetPlayback().GetAt()},
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
