package room

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
)

// TestPracticeFrames: the practice tools' client frames become their requests, or a sentence
// when a field has the wrong type; the service's frames render as docs/API.md gives them.
func TestPracticeFrames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want string // want: the request as protojson, or the refusal
	}{
		{`{"type":"sync","playing":true,"positionMs":5,"rate":0.5,"countIn":{"beats":4,"bpm":120}}`, `{"sync":{"playing":true,"positionMs":"5","rate":0.5,"countIn":{"beats":4,"bpm":120}}}`},
		{`{"type":"sync","playing":false,"positionMs":5,"rate":null,"countIn":null}`, `{"sync":{"positionMs":"5"}}`},
		{`{"type":"sync","playing":true,"positionMs":5,"rate":"1"}`, "rate must be a number from 0.25 to 2 in steps of 0.05."},
		{`{"type":"sync","playing":true,"positionMs":5,"countIn":{"beats":4.5,"bpm":120}}`, `countIn must be {"beats": 1-16, "bpm": 40-240}.`},
		{`{"type":"sync","playing":true,"positionMs":5,"countIn":4}`, `countIn must be {"beats": 1-16, "bpm": 40-240}.`},
		{`{"type":"loop","startMs":1000,"endMs":2000}`, `{"loop":{"startMs":"1000","endMs":"2000"}}`},
		{`{"type":"loop","startMs":0,"endMs":0}`, `{"loop":{}}`},
		{`{"type":"loop","startMs":1000}`, "startMs and endMs must be integers (both 0 clears the loop)."},
		{`{"type":"markFormation","positionMs":7,"formation":{"dancers":[]}}`, `{"markFormation":{"positionMs":"7","formation":{"dancers":[]}}}`},
		{`{"type":"markFormation","positionMs":7}`, `{"markFormation":{"positionMs":"7","formation":null}}`},
		{`{"type":"markFormation","positionMs":"7","formation":null}`, "positionMs must be an integer from 0 through 86400000."},
		// A control may carry the client's ref: its ack or error names it.
		{`{"type":"loop","startMs":1000,"endMs":2000,"ref":7}`, `{"loop":{"startMs":"1000","endMs":"2000"},"ref":"7"}`},
		{`{"type":"mark","positionMs":5,"ref":null}`, `{"mark":{"positionMs":"5"}}`},
		{`{"type":"mark","positionMs":5,"ref":0}`, "ref must be an integer from 1 through 9007199254740991."},
		{`{"type":"mark","positionMs":5,"ref":"7"}`, "ref must be an integer from 1 through 9007199254740991."},
		{`{"type":"mark","positionMs":5,"ref":9007199254740992}`, "ref must be an integer from 1 through 9007199254740991."},
	} {
		req, refusal := decodeRoomFrame([]byte(tt.in))
		got := refusal
		if req != nil {
			b, err := protojson.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			got = compact(t, b)
			tt.want = compact(t, []byte(tt.want))
		}
		if got != tt.want {
			t.Errorf("decodeRoomFrame(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}

	f, _ := structpb.NewValue(map[string]any{"dancers": []any{}})
	for _, tt := range []struct {
		in   *roomv1.JoinResponse
		want string
	}{
		{&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Sync{Sync: &roomv1.Sync{Playing: true, PositionMs: 5, At: 9, Rate: 1.5, CountIn: &roomv1.CountIn{Beats: 4, Bpm: 90}}}},
			`{"type":"sync","playing":true,"positionMs":5,"at":9,"rate":1.5,"countIn":{"beats":4,"bpm":90}}`},
		{&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Sync{Sync: &roomv1.Sync{PositionMs: 5, At: 9}}},
			`{"type":"sync","playing":false,"positionMs":5,"at":9,"rate":1,"countIn":null}`},
		{&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_Loop{Loop: &roomv1.Loop{StartMs: 1, EndMs: 2, At: 9}}}, `{"type":"loop","startMs":1,"endMs":2,"at":9}`},
		{&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_MarkFormation{MarkFormation: &roomv1.MarkFormation{PositionMs: 7, Formation: f, At: 9}}},
			`{"type":"markFormation","positionMs":7,"formation":{"dancers":[]},"at":9}`},
		{&roomv1.JoinResponse{Frame: &roomv1.JoinResponse_State{State: &roomv1.State{
			Playback: &roomv1.Playback{Playing: true, PositionMs: 5, At: 9, Rate: 0.75},
			Loop:     &roomv1.Loop{StartMs: 1, EndMs: 2},
			Marks:    []*roomv1.Mark{{PositionMs: 7, Label: "A", At: 8, Formation: f}, {PositionMs: 9, Label: "B", At: 8}},
			Video:    &roomv1.Video{Title: "t", DurationMs: 10},
		}}}, `{"type":"state","playback":{"playing":true,"positionMs":5,"at":9,"rate":0.75,"countIn":null},"formation":null,` +
			`"marks":[{"positionMs":7,"label":"A","at":8,"formation":{"dancers":[]}},{"positionMs":9,"label":"B","at":8,"formation":null}],` +
			`"loop":{"startMs":1,"endMs":2},"video":{"title":"t","durationMs":10},"viewers":0,"leaderPresent":false,"people":[]}`},
	} {
		if got := compact(t, encodeRoomFrame(tt.in)); got != compact(t, []byte(tt.want)) {
			t.Errorf("encodeRoomFrame(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func compact(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return strings.TrimSpace(string(out))
}
