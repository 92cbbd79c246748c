package redisx

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

func TestScriptNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ src, want string }{
		{"-- ack.lua: remove handled alarms\nreturn 1", "ack.lua"},
		{"--   set.lua:   spaces\nreturn 2", "set.lua"},
		{"-- no file named here\nreturn 3", "sha:"},
		{"return 4", "sha:"},
	} {
		s := NewScript(c.src)
		got := scriptOf(redis.NewCmd(context.Background(), "evalsha", s.s.Hash(), 0))
		if c.want == "sha:" {
			if got != "sha:"+s.s.Hash()[:8] {
				t.Errorf("name of %q = %q, want sha:%s", c.src, got, s.s.Hash()[:8])
			}
		} else if got != c.want {
			t.Errorf("name of %q = %q, want %q", c.src, got, c.want)
		}
		if eval := scriptOf(redis.NewCmd(context.Background(), "eval", c.src, 0)); eval != got {
			t.Errorf("EVAL of %q is named %q, EVALSHA %q; want the same", c.src, eval, got)
		}
	}
	if got := scriptOf(redis.NewCmd(context.Background(), "get", "k")); got != "" {
		t.Errorf("GET is named %q, want no script", got)
	}
}

// TestScriptLatencyIsTimed runs a script alone and in a pipeline on a client from Open: each
// run is one observation of vigil_redis_script_duration_seconds under the script's file name.
func TestScriptLatencyIsTimed(t *testing.T) {
	t.Parallel()
	rdb, err := Open(context.Background(), Config{URL: redistest.URL(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	prefix := redistest.Prefix(t)
	name := "observe-" + prefix + ".lua"
	s := NewScript("-- " + name + ": counts\nreturn redis.call('INCR', KEYS[1])")
	ctx := context.Background()
	if err := s.Load(ctx, rdb); err != nil { // so no run meets NOSCRIPT and runs twice
		t.Fatal(err)
	}
	if err := s.Run(ctx, rdb, []string{prefix + ":n"}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := Pipelined(ctx, rdb, []*Script{s}, func(p redis.Pipeliner) {
		s.Queue(ctx, p, []string{prefix + ":n"})
		s.Queue(ctx, p, []string{prefix + ":n"})
	}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(scriptSeconds, "vigil_redis_script_duration_seconds"); n == 0 {
		t.Fatal("no vigil_redis_script_duration_seconds series")
	}
	h, err := scriptSeconds.GetMetricWithLabelValues(name)
	if err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	if err := h.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	if c := m.GetHistogram().GetSampleCount(); c != 3 {
		t.Fatalf("%s was timed %d times, want 3 (one run, two in a pipeline)", name, c)
	}
}
