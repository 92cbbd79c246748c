package redisx_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

// TestOpenRefusesWhatItCannotKeep: each setting a Redis cannot keep refuses to start with a
// sentence naming the fix (the shared Redis has no replica and fsyncs every second).
func TestOpenRefusesWhatItCannotKeep(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")
	tests := []struct {
		name string
		cfg  redisx.Config
		want []string
	}{
		{"a durability that is not one of the three", redisx.Config{URL: url, Durability: "strong"},
			[]string{`redis durability "strong": want async`, "replica", "fsync"}},
		{"replica without a replica", redisx.Config{URL: url, Durability: redisx.Replica},
			[]string{"the Redis primary at " + addr + " has none connected", "replicaof " + addr, "set the durability to async or fsync"}},
		{"fsync on a node that fsyncs every second", redisx.Config{URL: url, Durability: redisx.Fsync},
			[]string{"the Redis node at " + addr + " runs appendfsync everysec", "fsync needs appendfsync always on every node", "CONFIG SET appendfsync always"}},
		{"a Sentinel URL without a master", redisx.Config{URL: "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380"},
			[]string{"redis sentinel url names no master", "redis+sentinel://[user:password@]host1:port1,host2:port2/mastername[/db]"}},
		{"Sentinels without a master", redisx.Config{SentinelAddrs: []string{"127.0.0.1:26379"}},
			[]string{"Sentinels 127.0.0.1:26379 given without the name of the primary they watch"}},
		{"a Sentinel URL's password never quoted", redisx.Config{URL: "redis+sentinel://u:s3cret@127.0.0.1:26379/m/x"},
			[]string{`database "x" is not a whole number`}},
	}
	for _, tt := range tests {
		c, err := redisx.Open(context.Background(), tt.cfg)
		if err == nil {
			_ = c.Close()
			t.Errorf("%s: Open succeeded, want a refusal", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Open = %v; want it to say %q", tt.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: Open = %v quotes the password", tt.name, err)
		}
	}
}

// TestFsyncDurability: fsync on one Redis that fsyncs every write starts (and waits for no
// replica); on a primary with a replica, found through a Sentinel, every node is checked: a
// replica that fsyncs every second is named in the refusal.
func TestFsyncDurability(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	one := redistest.Start(t, "--appendfsync", "always")
	c, err := redisx.Open(ctx, redisx.Config{URL: one.URL(t), Durability: redisx.Fsync, Timeout: durableTimeout})
	if err != nil {
		t.Fatalf("Open(fsync) on one Redis with appendfsync always: %v", err)
	}
	if err := c.Set(ctx, redistest.Prefix(t), 1, 0).Err(); err != nil {
		t.Fatalf("SET under fsync on one Redis: %v", err)
	}
	_ = c.Close()

	s := redistest.StartSentinel(t, redistest.SentinelOptions{NodeArgs: []string{"--appendfsync", "always"}})
	c, err = redisx.Open(ctx, redisx.Config{URL: s.URL(), Durability: redisx.Fsync, Timeout: durableTimeout})
	if err != nil {
		t.Fatalf("Open(fsync) through a Sentinel, every node appendfsync always: %v", err)
	}
	prefix := redistest.Prefix(t)
	if err := c.Set(ctx, prefix, 1, 0).Err(); err != nil {
		t.Fatalf("SET under fsync: %v", err)
	}
	replica := s.Replicas(t)[0]
	if v := s.NodeClient(t, replica).Get(ctx, prefix).Val(); v != "1" {
		t.Fatalf("replica's %s = %q right after an fsync acknowledgment, want 1", prefix, v)
	}
	_ = c.Close()

	if err := s.NodeClient(t, replica).ConfigSet(ctx, "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = redisx.Open(ctx, redisx.Config{URL: s.URL(), Durability: redisx.Fsync, Timeout: durableTimeout})
	if err == nil || !strings.Contains(err.Error(), "the Redis node at "+replica+" runs appendfsync everysec") {
		t.Fatalf("Open(fsync) with a replica fsyncing every second = %v; want a refusal naming %s and the setting", err, replica)
	}
}

// TestClusterWaitsPerMaster: on a Redis Cluster under replica durability, a pipeline writing
// to two of its masters waits on each; with one master's replica paused, only the writes to that
// master are 'outcome unknown', the other's are acknowledged (and on its replica).
func TestClusterWaitsPerMaster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3) // redis-cli creates no cluster of fewer masters
	ctx := context.Background()
	c, err := redisx.Open(ctx, redisx.Config{ClusterAddrs: cl.Addrs(), Durability: redisx.Replica, Timeout: durableTimeout})
	if err != nil {
		t.Fatalf("Open(cluster, replica): %v", err)
	}
	defer c.Close()
	prefix := redistest.Prefix(t)
	// Two keys on two masters.
	a := "{" + prefix + "-a}:k"
	masterA := cl.MasterOf(t, a)
	var b, masterB string
	for i := 0; masterB == "" || masterB == masterA; i++ {
		b = "{" + prefix + "-b" + strings.Repeat("x", i) + "}:k"
		masterB = cl.MasterOf(t, b)
	}
	replicaOf := func(master string) *redis.Client {
		rc := redis.NewClient(&redis.Options{Addr: cl.ReplicaOf(t, master), OnConnect: func(ctx context.Context, cn *redis.Conn) error {
			return cn.ReadOnly(ctx).Err()
		}})
		t.Cleanup(func() { _ = rc.Close() })
		return rc
	}
	incr := redisx.NewScript("incr.lua", "return redis.call('INCR', KEYS[1])")
	write := func() (ca, cb *redis.Cmd) {
		_, _ = redisx.Pipelined(ctx, c, []*redisx.Script{incr}, func(p redis.Pipeliner) {
			ca = incr.Queue(ctx, p, []string{a})
			cb = incr.Queue(ctx, p, []string{b})
		})
		return ca, cb
	}
	ca, cb := write()
	if ca.Err() != nil || cb.Err() != nil {
		t.Fatalf("pipeline on two masters = %v, %v; want both acknowledged", ca.Err(), cb.Err())
	}
	if v := replicaOf(masterA).Get(ctx, a).Val(); v != "1" {
		t.Fatalf("%s on %s's replica = %q right after the acknowledgment, want 1", a, masterA, v)
	}
	if v := replicaOf(masterB).Get(ctx, b).Val(); v != "1" {
		t.Fatalf("%s on %s's replica = %q right after the acknowledgment, want 1", b, masterB, v)
	}

	pausedReplica := cl.ReplicaOf(t, masterA)
	cl.Pause(t, pausedReplica)
	defer cl.Unpause(t, pausedReplica)
	ca, cb = write()
	wantUnavailable(t, "the write to the master whose replica is paused", ca.Err(), redisx.ErrOutcomeUnknown)
	if cb.Err() != nil || cb.Val() != int64(2) {
		t.Fatalf("the write to the other master = %v, %v; want 2, acknowledged", cb.Val(), cb.Err())
	}
	wantUnavailable(t, "a single write to the master whose replica is paused", c.Set(ctx, a+"-single", 1, 0).Err(), redisx.ErrOutcomeUnknown)

	// State another connection wrote on that master: a script reporting it is not acknowledged
	// (its barrier is keyed by the script's hash tag, so it runs on the same master).
	elsewhere := "{" + prefix + "-a}:elsewhere"
	if err := cl.Client(t).Set(ctx, elsewhere, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	get := redisx.NewScript("get.lua", "return redis.call('GET', KEYS[1])")
	wantUnavailable(t, "a script reporting another connection's write", get.Run(ctx, c, []string{elsewhere}).Err(), redisx.ErrOutcomeUnknown)
}

// TestAsyncSaysWhatItCosts: under async, Open logs one line saying what losing the primary
// would cost and how to wait for replicas instead.
func TestAsyncSaysWhatItCosts(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	c, err := redisx.Open(context.Background(), redisx.Config{URL: redistest.URL(t), Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	line := buf.String()
	for _, want := range []string{`"event":"redis_durability"`, `"durability":"async"`, "losing the primary loses the acknowledged writes no replica had yet", "VIGIL_REDIS_DURABILITY=replica"} {
		if !strings.Contains(line, want) || strings.Count(line, "\n") != 1 {
			t.Fatalf("Open's log = %s; want one line saying %s", line, want)
		}
	}
}
