package store

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

// BenchmarkPresenceRenew measures what a stream's renewal costs Redis in a large room: one
// renew.lua call carrying every session the stream holds, as an attachment sends every third
// of the lease. It reports Redis's CPU per renewal, that as a share of one Redis core at one
// renewal per renewal period, and as a multiple of the least a renewal can write (one script
// that ZADDs the same session ids, measured in the same run: ×raw).
//
//	go test ./internal/store -run '^$' -bench PresenceRenew -benchtime 200x
func BenchmarkPresenceRenew(b *testing.B) {
	for _, n := range []int{500, 1_000, 10_000} {
		b.Run(strconv.Itoa(n)+"-sessions", func(b *testing.B) {
			ctx := context.Background()
			rdb, prefix := redistest.Universal(b)
			s := New(rdb, Options{Prefix: prefix, Keep: 10})
			room := "big"
			ids := make([]string, n)
			for i := range ids {
				ids[i] = "g1:" + strconv.Itoa(i)
				sess := domain.Session{ID: ids[i], UserID: "u" + strconv.Itoa(i), Username: "Dancer " + strconv.Itoa(i)}
				if _, err := s.Enter(ctx, room, sess, "h1", t0, t0.Add(lease)); err != nil {
					b.Fatalf("Enter(%s) = %v", ids[i], err)
				}
			}
			k := s.keys(room)
			raw := redisx.NewScript("raw_renew.lua", `for i = 2, #ARGV do redis.call('ZADD', KEYS[1], ARGV[1], ARGV[i]) end return 0`)
			rawArgs := make([]any, 0, n+1)
			rawArgs = append(rawArgs, 0)
			for _, id := range ids {
				rawArgs = append(rawArgs, id)
			}
			rawKey := k.presence[2] + ":raw"
			if err := raw.Load(ctx, rdb); err != nil {
				b.Fatal(err)
			}

			cpu := func() time.Duration {
				d, err := redisx.ServerCPU(ctx, rdb)
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			renewal := lease / 3 // an attachment renews every third of the lease (app.Lease)
			before := cpu()
			for i := range b.N {
				rawArgs[0] = i
				if err := raw.Run(ctx, rdb, []string{rawKey}, rawArgs...).Err(); err != nil {
					b.Fatal(err)
				}
			}
			rawPer := (cpu() - before) / time.Duration(b.N)

			b.ResetTimer()
			before = cpu()
			for i := range b.N {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				missing, moved, err := s.Renew(ctx, room, "h1", ids, now, now.Add(lease))
				if err != nil || len(missing) > 0 || len(moved) > 0 {
					b.Fatalf("Renew = missing %d, moved %d, %v; want every session renewed", len(missing), len(moved), err)
				}
			}
			per := (cpu() - before) / time.Duration(b.N)
			b.StopTimer()
			b.ReportMetric(float64(per.Microseconds())/1e3, "redis-cpu-ms/renewal")
			b.ReportMetric(100*per.Seconds()/renewal.Seconds(), "%redis-core")
			if rawPer > 0 {
				b.ReportMetric(float64(per)/float64(rawPer), "×raw")
			}
		})
	}
}
