package redisx

import (
	"testing"
)

// slotKey is the part of key Redis Cluster hashes: the first {...} with something inside,
// else the whole key (the rule of the cluster specification).
func slotKey(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}

func TestTagKeepsTheWholeNameInTheSlot(t *testing.T) {
	names := []string{"orders/42", "a}b", "{x}", "}{", "%7D", "a%b", "日報", "{}"}
	seen := map[string]string{}
	for _, n := range names {
		tag := Tag(n)
		for _, key := range []string{"vigil:locks:" + tag + ":state", "vigil:locks:" + tag + ":waiters"} {
			if got := slotKey(key); "{"+got+"}" != tag {
				t.Errorf("key %q hashes %q, want the whole tag %q", key, got, tag)
			}
		}
		if other, dup := seen[tag]; dup {
			t.Errorf("Tag(%q) = Tag(%q) = %q", n, other, tag)
		}
		seen[tag] = n
	}
}
