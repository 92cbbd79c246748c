package main

import (
	"context"
	"flag"
	"fmt"
	"time"
)

// The raw Redis ceiling is redis-benchmark sending EVALSHA of a one-field compare-and-set
// (ceiling_cas.lua, a probe, not a domain script) from 50 clients, unpipelined and 16 deep. It
// is measured before and after what a benchmark compares with it, and the mean is the
// reference: on a machine shared with other work, the load moves between the runs.

// ceilingFlags set the ceiling runs.
type ceilingFlags struct {
	requests, clients int
}

func (c *ceilingFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&c.requests, "ceiling-requests", 200_000, "redis-benchmark requests per ceiling run (0 skips the ceiling)")
	fs.IntVar(&c.clients, "ceiling-clients", 50, "redis-benchmark clients")
}

// ceilings are the mean ceiling rates (ops/s) of a run; zero when skipped.
type ceilings struct{ unpipelined, pipelined float64 }

// withCeilings measures the ceilings, runs measure, measures them again, and reports both runs
// and their means.
func withCeilings(ctx context.Context, b *benchRedis, h *Harness, o ceilingFlags, measure func() error) (ceilings, error) {
	if o.requests <= 0 {
		return ceilings{}, measure()
	}
	run := func(when string) (unpipelined, pipelined redisCeiling, err error) {
		for _, depth := range []int{1, 16} {
			benchStage("raw ceiling %s: redis-benchmark EVALSHA compare-and-set, %d requests, %d clients, pipeline %d", when, o.requests, o.clients, depth)
			c, err := measureRedisCeiling(ctx, b, h.Prefix, o.requests, o.clients, depth)
			if err != nil {
				return redisCeiling{}, redisCeiling{}, err
			}
			if depth == 1 {
				unpipelined = c
			} else {
				pipelined = c
			}
		}
		return unpipelined, pipelined, nil
	}
	u1, p1, err := run("before")
	if err != nil {
		return ceilings{}, err
	}
	if err := measure(); err != nil {
		return ceilings{}, err
	}
	u2, p2, err := run("after")
	if err != nil {
		return ceilings{}, err
	}
	rep := h.Report
	rep.add("ceiling_evalsha_before", "raw EVALSHA CAS, unpipelined, before", u1.rps, "ops/s")
	rep.add("ceiling_evalsha_after", "raw EVALSHA CAS, unpipelined, after", u2.rps, "ops/s")
	rep.add("ceiling_evalsha_p16_before", "raw EVALSHA CAS, pipeline 16, before", p1.rps, "ops/s")
	rep.add("ceiling_evalsha_p16_after", "raw EVALSHA CAS, pipeline 16, after", p2.rps, "ops/s")
	c := ceilings{unpipelined: (u1.rps + u2.rps) / 2, pipelined: (p1.rps + p2.rps) / 2}
	rep.add("ceiling_redis_cpu_us", "raw EVALSHA CAS: Redis CPU per op, unpipelined", float64((u1.cpuPerOp+u2.cpuPerOp)/2)/float64(time.Microsecond), "µs")
	rep.add("ceiling_p16_redis_cpu_us", "raw EVALSHA CAS: Redis CPU per op, pipeline 16", float64((p1.cpuPerOp+p2.cpuPerOp)/2)/float64(time.Microsecond), "µs")
	rep.add("ceiling_evalsha", "raw EVALSHA CAS, unpipelined, mean", c.unpipelined, "ops/s")
	rep.add("ceiling_evalsha_p16", "raw EVALSHA CAS, pipeline 16, mean", c.pipelined, "ops/s")
	rep.Settings["ceiling_requests"] = o.requests
	rep.Settings["ceiling_clients"] = o.clients
	return c, nil
}

// benchRedisCeiling is `vigilbench redis`: the ceiling alone, twice, as the other benchmarks take it.
func benchRedisCeiling(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	var o ceilingFlags
	o.register(fs)
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	if o.requests <= 0 || o.clients <= 0 {
		return fmt.Errorf("%w: --ceiling-requests and --ceiling-clients must be positive", errUsage)
	}
	b, err := h.Redis(ctx)
	if err != nil {
		return err
	}
	_, err = withCeilings(ctx, b, h, o, func() error { return nil })
	return err
}
