package service_test

import (
	"context"
	"testing"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/services/locks/service"
)

func TestTokensAndLocksSurviveRedisRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // a Redis of this test's own, AOF on
	opts := func() service.Options {
		return replicaOptions(t, "restart", func(o *service.Options) { o.Redis.URL = srv.URL(t) })
	}
	addr, stop := runStoppable(t, opts())
	c := locksv1.NewLockServiceClient(servertest.Dial(t, addr))
	var maxToken int64
	for i := range 5 {
		owner := []string{"a", "b", "c", "d", "e"}[i]
		res := acquire(t, c, "fenced", owner, 30000, 0)
		if !res.GetAcquired() {
			t.Fatalf("Acquire(fenced, %s) = %v", owner, res)
		}
		maxToken = max(maxToken, res.GetFencingToken())
		release(t, c, "fenced", owner)
	}
	held := acquire(t, c, "kept", "alice", 600000, 0)
	stop()

	srv.Restart(t)

	addr, stop = runStoppable(t, opts())
	defer stop()
	c = locksv1.NewLockServiceClient(servertest.Dial(t, addr))
	res := acquire(t, c, "fenced", "after", 30000, 0)
	if !res.GetAcquired() || res.GetFencingToken() <= maxToken {
		t.Errorf("Acquire(fenced) after restart = %v, want acquired with token > %d (issued before the restart)", res, maxToken)
	}
	g, err := c.Get(context.Background(), &locksv1.GetRequest{Resource: "kept"})
	if err != nil || g.GetOwner() != "alice" || g.GetFencingToken() != held.GetFencingToken() || g.GetExpiresAt() != held.GetExpiresAt() {
		t.Errorf("Get(kept) after restart = %v, %v; want alice's hold %v back", g, err, held)
	}
	if b := acquire(t, c, "kept", "bob", 30000, 0); b.GetAcquired() {
		t.Errorf("Acquire(kept, bob) after restart = %v, want refused: alice still holds it", b)
	}
}
