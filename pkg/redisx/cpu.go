package redisx

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ServerCPU is the CPU time the Redis server rdb talks to has used so far (INFO cpu's
// used_cpu_user + used_cpu_sys). Unlike wall time, it is not inflated when other work on the
// machine takes the CPU away, so benchmarks divide its growth by their operations.
func ServerCPU(ctx context.Context, rdb redis.UniversalClient) (time.Duration, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	var total float64
	for line := range strings.Lines(info) {
		for _, key := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), key); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("INFO cpu: %s%q: %w", key, v, err)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second)), nil
}
