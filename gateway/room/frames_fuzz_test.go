package room

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// Run with
//
//	go test ./gateway/room -run '^$' -fuzz '^FuzzRoomFrame$' -fuzztime 30s
//
// Failing inputs land in testdata/fuzz/FuzzRoomFrame/ and are replayed by every plain `go test`.

// FuzzRoomFrame: the practice-room frame parser turns any client frame into exactly one of a
// request or a refusal sentence, without panicking.
func FuzzRoomFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"sync","playing":true,"positionMs":1000}`, `{"type":"sync","playing":"yes"}`,
		`{"type":"formation","formation":{"a":[1,2]}}`, `{"type":"mark","positionMs":5,"label":"x"}`,
		`{"type":"reload","video":{"title":"t","durationMs":9}}`, `{"type":"reload","video":{"title":1}}`,
		`{"type":"mark","positionMs":1e3}`, `{"type":"nope"}`, `[]`, `{`, ``,
		`{"type":"sync","playing":true,"positionMs":0,"rate":0.5,"countIn":{"beats":4,"bpm":120}}`,
		`{"type":"loop","startMs":1000,"endMs":2000}`, `{"type":"markFormation","positionMs":1,"formation":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, refusal := decodeRoomFrame(data)
		if (req == nil) == (refusal == "") {
			t.Fatalf("decodeRoomFrame(%q) = %v, %q: want a request or a refusal, not both or neither", data, req, refusal)
		}
		if req != nil {
			if _, err := proto.Marshal(req); err != nil {
				t.Fatalf("decodeRoomFrame(%q) = %v, which does not marshal: %v", data, req, err)
			}
		}
	})
}
