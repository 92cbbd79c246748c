package alarm

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

// BenchmarkClaimAndAck measures the queue's own cost per alarm, on a Redis of its own: claim
// and acknowledge due alarms in batches with a handler that does nothing. Besides ns/op it
// reports the Redis server's CPU time per alarm (used_cpu_user+sys), which a machine busy with
// other work does not inflate the way it does wall time.
//
//	go test ./alarm -run '^$' -bench ClaimAndAck -benchtime 5x
func BenchmarkClaimAndAck(b *testing.B) {
	ctx := context.Background()
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	const perRound = 20_000
	noop := HandlerFunc(func(context.Context, Firing) error { return nil })
	var cpu time.Duration
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		q, err := New(rdb, Options{Prefix: "bench" + strconv.Itoa(round), Namespace: "b", Shards: 1, Now: func() time.Time { return t0 }})
		if err != nil {
			b.Fatal(err)
		}
		k := q.Keys(0)
		members := make([]redis.Z, perRound)
		for i := range members {
			members[i] = redis.Z{Score: float64(t0.UnixMilli()), Member: "obj" + strconv.Itoa(i)}
		}
		if err := rdb.ZAdd(ctx, k.Alarms, members...).Err(); err != nil {
			b.Fatal(err)
		}
		before := redisCPU(b, rdb)
		b.StartTimer()
		for {
			batch, lease, _, err := q.claimDue(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			if len(batch) == 0 {
				break
			}
			if _, err := q.handle(ctx, 0, batch, lease, noop); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cpu += redisCPU(b, rdb) - before
		if n := rdb.ZCard(ctx, k.Alarms).Val(); n != 0 {
			b.Fatalf("%d alarms left after draining", n)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(round*perRound), "redis-µs/alarm")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(round*perRound), "µs/alarm")
}

// redisCPU is the Redis server's CPU time so far (redisx.ServerCPU).
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	cpu, err := redisx.ServerCPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}
