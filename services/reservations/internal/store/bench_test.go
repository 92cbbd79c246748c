package store

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

// BenchmarkExpireDue measures the alarm handler's transition alone, on a Redis of its own:
// expire.lua over claimed-size batches (256 holds of one shard per call). Besides ns/op it
// reports the Redis server's CPU time per hold, which other work on the machine does not
// inflate the way it does wall time. pkg/alarm's BenchmarkClaimAndAck is the queue's part.
//
//	go test ./internal/store -run '^$' -bench ExpireDue -benchtime 5x
func BenchmarkExpireDue(b *testing.B) {
	ctx := context.Background()
	srv := redistest.Start(b)
	rdb, err := redisx.Open(ctx, redisx.Config{URL: srv.URL(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	const perRound, batch = 20_000, 256
	t0 := time.UnixMilli(1_900_000_000_000)
	var cpu time.Duration
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		q, err := alarm.New(rdb, alarm.Options{Prefix: "bench" + strconv.Itoa(round), Namespace: "reservations", Shards: 1})
		if err != nil {
			b.Fatal(err)
		}
		s, err := New(rdb, Options{Queue: q})
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]string, perRound)
		if _, err := redisx.Pipelined(ctx, rdb, []*redisx.Script{s.create}, func(p redis.Pipeliner) {
			for i := range ids {
				ids[i] = "hold-" + strconv.Itoa(i)
				s.create.Queue(ctx, p, s.keys.one(ids[i]), ids[i], t0.UnixMilli(), t0.Add(5*time.Second).UnixMilli())
			}
		}); err != nil {
			b.Fatal(err)
		}
		before := serverCPU(b, rdb)
		b.StartTimer()
		for i := 0; i < perRound; i += batch {
			if _, err := s.ExpireDue(ctx, ids[i:min(i+batch, perRound)], t0.Add(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cpu += serverCPU(b, rdb) - before
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(round*perRound), "redis-µs/hold")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(round*perRound), "µs/hold")
}

// serverCPU is the Redis server's CPU time so far (redisx.ServerCPU).
func serverCPU(b *testing.B, rdb redis.UniversalClient) time.Duration {
	cpu, err := redisx.ServerCPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}
