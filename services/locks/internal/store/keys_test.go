package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redistest"
)

// names are lock names as people write them, with braces and percent signs among them.
var names = []string{"orders/42", "Order:42", "report.daily", "user@example.com", "日報", "{x}", "a}b{c", "}{", "%7B", "100%", "{}", "a b"}

// Every key of a lock lands in its shard's slot whatever its name holds, and no two names
// share a key.
func TestKeysStayInTheShardSlot(t *testing.T) {
	t.Parallel()
	q, err := alarm.New(nil, alarm.Options{Prefix: "vigil", Namespace: "locks", Shards: 16})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, n := range names {
		k := keysOf(q, n)
		want := fmt.Sprintf("locks:%d", k.shard)
		for _, key := range k.list() {
			if got := redistest.HashTag(key); got != want {
				t.Errorf("resource %q: key %q hashes %q, want the shard tag %q", n, key, got, want)
			}
		}
		for _, key := range []string{k.lock, k.queue} {
			if other, dup := seen[key]; dup {
				t.Errorf("resources %q and %q share the key %q", n, other, key)
			}
			seen[key] = n
		}
	}
}

// Names as people write them work end to end, on one Redis or (VIGIL_TEST_REDIS_CLUSTER) a
// Redis Cluster, where a key in the wrong slot fails the script with CROSSSLOT.
func TestNamesAsPeopleWriteThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, _, _ := newStore(t)
	for _, n := range names {
		a, err := s.Acquire(ctx, n, "owner@"+n, time.Minute, 0)
		if err != nil || !a.OK {
			t.Fatalf("Acquire(%q) = %+v, %v; want acquired", n, a, err)
		}
		if l, err := s.Get(ctx, n); err != nil || l.Owner != "owner@"+n || l.Resource != n || l.Token != a.Token {
			t.Errorf("Get(%q) = %+v, %v; want held by owner@%s with token %d", n, l, err, n, a.Token)
		}
	}
	for _, n := range names {
		if ok, err := s.Release(ctx, n, "owner@"+n, 0); err != nil || !ok {
			t.Errorf("Release(%q) = %v, %v; want released", n, ok, err)
		}
	}
}
