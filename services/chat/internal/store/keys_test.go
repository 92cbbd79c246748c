package store

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// TestKeysShareOneSlot: every key of a room hashes on the whole room name, whatever the name
// holds, so one script touches one slot and two rooms never share a tag by accident.
func TestKeysShareOneSlot(t *testing.T) {
	s := New(nil, Options{Prefix: "p"})
	seen := map[string]string{}
	for _, room := range []string{"general", "{team}", "a}b{c", "}", "{", "100%", "100%25", "orders/42", "日報"} {
		k := s.keys(room)
		tag := redistest.HashTag(k.log)
		for _, key := range append([]string{k.seq, k.channel, s.postKey(room, "x{y}z")}, k.presence...) {
			if got := redistest.HashTag(key); got != tag {
				t.Errorf("room %q: key %q hashes on %q, the log on %q", room, key, got, tag)
			}
		}
		if other, ok := seen[tag]; ok {
			t.Errorf("rooms %q and %q share the tag %q", room, other, tag)
		}
		seen[tag] = room
	}
}
