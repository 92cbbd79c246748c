package chat

import (
	"encoding/json"

	"github.com/vigil-dev/vigil/gateway/socket"
	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
)

// The chat's JSON frames: a message is encoded once, as an object (for history frames) and
// as a framed message frame, and shared by every socket of the room.

// encodeChatEntry encodes a message once for every socket.
func encodeChatEntry(m *chatv1.ChatMessage) chatEntry {
	obj, _ := json.Marshal(struct {
		ID     int64  `json:"id"`
		User   string `json:"user"`
		UserID string `json:"userId"`
		Body   string `json:"body"`
		TS     int64  `json:"ts"`
	}{m.GetId(), m.GetUser(), m.GetUserId(), m.GetBody(), m.GetTs()})
	payload := make([]byte, 0, len(obj)+17)
	payload = append(payload, `{"type":"message",`...)
	payload = append(payload, obj[1:]...)
	return chatEntry{id: m.GetId(), obj: obj, frame: socket.TextFrame(payload)}
}

// historyFrame is a joiner's first frame: the entries as one JSON array.
func historyFrame(entries []chatEntry) []byte {
	n := 40
	for _, e := range entries {
		n += len(e.obj) + 1
	}
	f := make([]byte, 0, n)
	f = append(f, `{"type":"history","messages":[`...)
	for i, e := range entries {
		if i > 0 {
			f = append(f, ',')
		}
		f = append(f, e.obj...)
	}
	return append(f, "]}"...)
}

// errorFrame is the error frame a member gets for a message the gateway refused.
func errorFrame(msg string) []byte { return stringFrame("error", "error", msg) }

// stringFrame is the frame {"type":typ,key:value}, as json.Marshal writes it: the frames of one
// string field. typ and key are the gateway's own names, never user input.
func stringFrame(typ, key, value string) []byte {
	v, _ := json.Marshal(value)
	f := make([]byte, 0, len(`{"type":"","":}`)+len(typ)+len(key)+len(v))
	f = append(f, `{"type":"`...)
	f = append(f, typ...)
	f = append(f, `","`...)
	f = append(f, key...)
	f = append(f, `":`...)
	f = append(f, v...)
	return append(f, '}')
}
