package redisx_test

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

func TestTagKeepsTheWholeNameInTheSlot(t *testing.T) {
	names := []string{"orders/42", "a}b", "{x}", "}{", "%7D", "a%b", "日報", "{}"}
	seen := map[string]string{}
	for _, n := range names {
		tag := redisx.Tag(n)
		for _, key := range []string{"vigil:locks:" + tag + ":state", "vigil:locks:" + tag + ":waiters"} {
			if got := redistest.HashTag(key); "{"+got+"}" != tag {
				t.Errorf("key %q hashes %q, want the whole tag %q", key, got, tag)
			}
		}
		if other, dup := seen[tag]; dup {
			t.Errorf("Tag(%q) = Tag(%q) = %q", n, other, tag)
		}
		seen[tag] = n
	}
}
