package redisx_test

import (
	"context"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

func TestScriptNames(t *testing.T) {
	t.Parallel()
	named := redisx.NewScript("ack.lua", "return 1 -- TestScriptNames")
	if named.Name() != "ack.lua" {
		t.Errorf("Name() = %q, want ack.lua", named.Name())
	}
	src := "return 2 -- TestScriptNames"
	redisx.NewScript("set.lua", src)
	for _, c := range []struct {
		cmd  *redis.Cmd
		want string
	}{
		{redis.NewCmd(context.Background(), "evalsha", redisx.HashOf(named), 0), "ack.lua"},
		{redis.NewCmd(context.Background(), "eval", src, 0), "set.lua"},
		{redis.NewCmd(context.Background(), "eval", "return 3 -- never named", 0), "sha:"},
		{redis.NewCmd(context.Background(), "get", "k"), ""},
	} {
		got := redisx.ScriptOf(c.cmd)
		if c.want == "sha:" {
			if len(got) != len("sha:")+8 || got[:4] != "sha:" {
				t.Errorf("name of %v = %q, want sha: and 8 hex digits", c.cmd.Args(), got)
			}
		} else if got != c.want {
			t.Errorf("name of %v = %q, want %q", c.cmd.Args(), got, c.want)
		}
	}
}

// TestScriptLatencyIsTimed runs a script alone and in a pipeline on a client from Open: each
// run is one observation of vigil_redis_script_duration_seconds, on the Registerer the client
// was given, under the script's name.
func TestScriptLatencyIsTimed(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	rdb, err := redisx.Open(context.Background(), redisx.Config{URL: redistest.URL(t), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	prefix := redistest.Prefix(t)
	name := "observe-" + prefix + ".lua"
	s := redisx.NewScript(name, "return redis.call('INCR', KEYS[1]) -- "+prefix)
	ctx := context.Background()
	if err := s.Load(ctx, rdb); err != nil { // so no run meets NOSCRIPT and runs twice
		t.Fatal(err)
	}
	if err := s.Run(ctx, rdb, []string{prefix + ":n"}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := redisx.Pipelined(ctx, rdb, []*redisx.Script{s}, func(p redis.Pipeliner) {
		s.Queue(ctx, p, []string{prefix + ":n"})
		s.Queue(ctx, p, []string{prefix + ":n"})
	}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var count uint64
	for _, mf := range mfs {
		if mf.GetName() != "vigil_redis_script_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "script" && l.GetValue() == name {
					count = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if count != 3 {
		t.Fatalf("%s was timed %d times on the client's registry, want 3 (one run, two in a pipeline)", name, count)
	}
	// A second client on the same Registerer shares the histogram instead of failing.
	again, err := redisx.Open(context.Background(), redisx.Config{URL: redistest.URL(t), Metrics: reg})
	if err != nil {
		t.Fatalf("second redisx.Open on one Registerer: %v", err)
	}
	_ = again.Close()
}
