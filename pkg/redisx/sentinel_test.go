package redisx_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestSentinelFailoverFollowed: a client opened on a redis+sentinel:// URL writes to the
// primary; the primary is killed; once the Sentinels promote the replica, the same client
// writes to it, and what it wrote under replica durability before the kill is there. Two
// replicas: the promoted one keeps one, so replica durability can still be kept.
func TestSentinelFailoverFollowed(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 2})
	ctx := context.Background()
	rdb, err := redisx.Open(ctx, redisx.Config{URL: s.URL(), Durability: redisx.Replica, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("Open(%s): %v", s.URL(), err)
	}
	defer rdb.Close()
	prefix := redistest.Prefix(t)
	for i := range 20 {
		if err := rdb.Set(ctx, fmt.Sprintf("%s:%d", prefix, i), i, 0).Err(); err != nil {
			t.Fatalf("SET before the failover: %v", err)
		}
	}
	old := s.Primary(t)
	s.Kill(t, old)
	promoted := s.WaitFailover(t, old)
	start := time.Now()
	wait.For(t, "a write through the failover client after the failover", func() error {
		return rdb.Set(ctx, prefix+":after", 1, 0).Err()
	})
	t.Logf("failover %s -> %s; first write through the client %v after the Sentinels named the new primary", old, promoted, time.Since(start))
	for i := range 20 {
		if v, err := rdb.Get(ctx, fmt.Sprintf("%s:%d", prefix, i)).Int(); err != nil || v != i {
			t.Fatalf("GET %s:%d after the failover = %d, %v; want %d (acknowledged under replica durability)", prefix, i, v, err, i)
		}
	}
	if v := s.NodeClient(t, promoted).Get(ctx, prefix+":after").Val(); v != "1" {
		t.Fatalf("the write after the failover is not on the promoted node %s (got %q)", promoted, v)
	}
}
