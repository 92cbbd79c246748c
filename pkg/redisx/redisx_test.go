package redisx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// TestMain stops the shared Redis (or Redis Cluster) the tests started.
func TestMain(m *testing.M) { redistest.Main(m) }

// TestPipelinedResendsOnlyNoScript queues a loaded script and one Redis has never seen: the
// loaded one must run once (on a cluster, the rest of a pipeline has already run on other nodes
// when one node answers NOSCRIPT), the other once after it is loaded.
func TestPipelinedResendsOnlyNoScript(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Universal(t)
	ctx := context.Background()
	loaded := redisx.NewScript("loaded.lua", "return redis.call('INCR', KEYS[1])")
	unseen := redisx.NewScript("unseen.lua", "return redis.call('INCRBY', KEYS[1], 10) -- "+prefix)
	if err := loaded.Load(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	a, b := prefix+":a", prefix+":b"
	var ca, cb *redis.Cmd
	_, err := redisx.Pipelined(ctx, rdb, []*redisx.Script{loaded, unseen}, func(p redis.Pipeliner) {
		ca = loaded.Queue(ctx, p, []string{a})
		cb = unseen.Queue(ctx, p, []string{b})
	})
	if err != nil {
		t.Fatalf("Pipelined: %v", err)
	}
	if v, err := ca.Int(); v != 1 || err != nil {
		t.Fatalf("loaded script answered %d, %v; want 1, nil", v, err)
	}
	if v, err := cb.Int(); v != 10 || err != nil {
		t.Fatalf("unseen script answered %d, %v; want 10, nil", v, err)
	}
	if v := rdb.Get(ctx, a).Val(); v != "1" {
		t.Fatalf("%s = %s after one pipeline, want 1: the loaded script ran twice", a, v)
	}
}

// TestPipelinedSurvivesAFlushAfterItsLoad: Redis forgets its scripts again between Pipelined
// loading them and re-sending the calls that met NOSCRIPT. The re-sent calls still run, once.
func TestPipelinedSurvivesAFlushAfterItsLoad(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	ctx := context.Background()
	flushes := redistest.ForgetScriptsAfterLoad(t, rdb)
	unseen := redisx.NewScript("unseen.lua", "return redis.call('INCRBY', KEYS[1], 10) -- flushed "+prefix)
	key := prefix + ":n"
	var cmd *redis.Cmd
	if _, err := redisx.Pipelined(ctx, rdb, []*redisx.Script{unseen}, func(p redis.Pipeliner) {
		cmd = unseen.Queue(ctx, p, []string{key})
	}); err != nil {
		t.Fatalf("Pipelined with a flush after its load: %v", err)
	}
	if flushes.Load() == 0 {
		t.Fatal("the hook never flushed: Pipelined did not load the script it found missing")
	}
	if v, err := cmd.Int(); v != 10 || err != nil {
		t.Fatalf("script answered %d, %v; want 10, nil", v, err)
	}
	if v := rdb.Get(ctx, key).Val(); v != "10" {
		t.Fatalf("%s = %s, want 10: the script ran %s times", key, v, v)
	}
}

func TestArgErrTurnsAGuardRefusalIntoInvalid(t *testing.T) {
	rdb, _ := redistest.Client(t)
	guard := redisx.NewScript("guard.lua", "if tonumber(ARGV[1]) == nil then return redis.error_reply('ERR guard.lua: want a number') end\nreturn 1")
	err := guard.Run(context.Background(), rdb, []string{"k"}, "x").Err()
	if !redisx.Refused(err) {
		t.Fatalf("Refused(%v) = false, want true", err)
	}
	if got := redisx.ArgErr(err); !errors.Is(got, usererr.ErrInvalid) {
		t.Errorf("ArgErr(%v) = %v, want ErrInvalid", err, got)
	}
	other := redisx.NewScript("boom.lua", "return redis.error_reply('ERR something else')")
	err = other.Run(context.Background(), rdb, []string{"k"}).Err()
	if redisx.Refused(err) || errors.Is(redisx.ArgErr(err), usererr.ErrInvalid) {
		t.Errorf("a non-guard error %v was taken for a refusal", err)
	}
}

func TestServerCPUReadsInfo(t *testing.T) {
	rdb, _ := redistest.Client(t)
	cpu, err := redisx.ServerCPU(context.Background(), rdb)
	if err != nil || cpu <= 0 {
		t.Fatalf("ServerCPU = %v, %v; want a positive time", cpu, err)
	}
}
