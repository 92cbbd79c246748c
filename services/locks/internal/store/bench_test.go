package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

// BenchmarkScriptPair measures what an uncontended acquire+release pair costs Redis: the
// time Redis spends running the two scripts (INFO commandstats' usec for EVALSHA, which
// leaves out reading and writing the connection), for the store's acquire.lua and
// release.lua and, in the same run, for the least a Redis lock can do (SET NX PX, then a
// compare-and-DEL, each one EVALSHA: the pair bsm/redislock sends). The "store" case
// reports its cost as a multiple of the raw pair's (×raw).
//
//	go test ./internal/store -run '^$' -bench ScriptPair -benchtime 100000x
func BenchmarkScriptPair(b *testing.B) {
	ctx := context.Background()
	rdb, prefix := redistest.Universal(b)
	s := testStore(b, rdb, prefix, Options{})
	acquire := redisx.NewScript("raw_acquire.lua", `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0`)
	release := redisx.NewScript("raw_release.lua", `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	for _, sc := range []*redisx.Script{acquire, release} {
		if err := sc.Load(ctx, rdb); err != nil {
			b.Fatal(err)
		}
	}
	var raw float64
	for _, c := range []struct {
		name string
		pair func(resource string) error
	}{
		{"raw", func(r string) error {
			key := prefix + ":raw:{" + r + "}"
			if err := acquire.Run(ctx, rdb, []string{key}, "alice", 30000).Err(); err != nil {
				return err
			}
			return release.Run(ctx, rdb, []string{key}, "alice").Err()
		}},
		{"store", func(r string) error {
			a, err := s.Acquire(ctx, r, "alice", 30*time.Second, 0)
			if err != nil || !a.OK {
				return fmt.Errorf("acquire %s = %+v, %v", r, a, err)
			}
			_, err = s.Release(ctx, r, "alice", 0)
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			// Sixteen callers per CPU keep Redis busy, as a loaded service does: a lone
			// caller's script time is inflated by Redis sleeping between calls.
			b.SetParallelism(16)
			var callers atomic.Int64
			before := scriptTime(b, rdb)
			b.RunParallel(func(pb *testing.PB) {
				me := "c" + strconv.FormatInt(callers.Add(1), 10) + "-"
				for i := 0; pb.Next(); i++ {
					if err := c.pair(me + strconv.Itoa(i%64)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			perPair := float64((scriptTime(b, rdb) - before).Nanoseconds()) / 1e3 / float64(b.N)
			b.ReportMetric(perPair, "redis-script-µs/pair")
			if c.name == "raw" {
				raw = perPair
			} else if raw > 0 {
				b.ReportMetric(perPair/raw, "×raw")
			}
		})
	}
}

// scriptTime is the time Redis has spent running EVALSHA calls (on every master of a
// cluster).
func scriptTime(b *testing.B, rdb redis.UniversalClient) time.Duration {
	var total atomic.Int64 // µs; ForEachMaster reads the masters concurrently
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(info, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
			if !ok {
				continue
			}
			for field := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(field, "usec="); ok {
					us, _ := strconv.ParseInt(v, 10, 64)
					total.Add(us)
				}
			}
		}
		return nil
	}
	ctx := context.Background()
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	}
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(total.Load()) * time.Microsecond
}
