package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

var (
	//go:embed bench_expire.lua
	benchExpireLua string
	//go:embed bench_expire_batch.lua
	benchExpireBatchLua string
)

// alarmsBench are the settings of `vigil bench alarms`.
type alarmsBench struct {
	benchFlags
	count        int
	rate         int
	duration     time.Duration
	lead         time.Duration
	shards       int
	batch        int
	ceilRequests int
	ceilClients  int
	handler      string
}

// benchAlarms measures pkg/alarm: draining many alarms due at one instant, lateness at a steady
// rate, and the raw Redis EVALSHA ceiling on the same server for comparison.
func benchAlarms(ctx context.Context, args []string) (*benchReport, benchOutput, error) {
	var o alarmsBench
	fs := flag.NewFlagSet("vigil bench alarms", flag.ContinueOnError)
	o.register(fs)
	fs.IntVar(&o.count, "count", 100_000, "alarms due at the same instant in the drain")
	fs.IntVar(&o.rate, "rate", 1000, "alarms per second in the steady run (0 skips it)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of the steady run")
	fs.DurationVar(&o.lead, "lead", 500*time.Millisecond, "how long before its due time each steady alarm is set")
	fs.IntVar(&o.shards, "shards", 16, "alarm queue shards")
	fs.IntVar(&o.batch, "batch", 256, "alarms per claim")
	fs.IntVar(&o.ceilRequests, "ceiling-requests", 200_000, "redis-benchmark requests per ceiling run (0 skips the ceiling)")
	fs.IntVar(&o.ceilClients, "ceiling-clients", 50, "redis-benchmark clients")
	fs.StringVar(&o.handler, "handler", "pipelined", "pipelined: one transition script per object, pipelined; batched: one script call per batch")
	if err := parseBenchFlags(fs, args); err != nil {
		return nil, benchOutput{}, err
	}
	if o.handler != "pipelined" && o.handler != "batched" {
		return nil, benchOutput{}, fmt.Errorf("%w: --handler must be pipelined or batched", errUsage)
	}
	if o.count <= 0 || o.shards <= 0 || o.batch <= 0 || o.lead <= 0 || o.rate < 0 {
		return nil, benchOutput{}, fmt.Errorf("%w: --count, --shards, --batch and --lead must be positive, --rate not negative", errUsage)
	}

	b, err := openBenchRedis(ctx, o.benchFlags)
	if err != nil {
		return nil, benchOutput{}, err
	}
	defer b.close()
	prefix := benchPrefix()
	defer b.deletePrefix(context.WithoutCancel(ctx), prefix)

	rep := newBenchReport("alarms")
	rep.Redis = b.about
	rep.Settings["count"] = o.count
	rep.Settings["shards"] = o.shards
	rep.Settings["batch"] = o.batch
	rep.Settings["rate"] = o.rate
	rep.Settings["duration"] = o.duration.String()
	rep.Settings["handler"] = o.handler

	// The ceiling is measured before and after the drain, and the drain compared with the mean:
	// on a machine shared with other work, the load moves between the runs.
	measureCeilings := func(when string) (unpipelined, pipelined redisCeiling, err error) {
		for _, depth := range []int{1, 16} {
			benchStage("raw ceiling %s the drain: redis-benchmark EVALSHA compare-and-set, %d requests, %d clients, pipeline %d", when, o.ceilRequests, o.ceilClients, depth)
			c, err := measureRedisCeiling(ctx, b, prefix, o.ceilRequests, o.ceilClients, depth)
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
	var unpipelined, pipelined redisCeiling
	if o.ceilRequests > 0 {
		if unpipelined, pipelined, err = measureCeilings("before"); err != nil {
			return nil, benchOutput{}, err
		}
	}

	d, err := drainAlarms(ctx, b, prefix, o)
	if err != nil {
		return nil, benchOutput{}, err
	}
	rate := float64(o.count) / d.elapsed.Seconds()
	if o.ceilRequests > 0 {
		u2, p2, err := measureCeilings("after")
		if err != nil {
			return nil, benchOutput{}, err
		}
		rep.add("ceiling_evalsha_before", "raw EVALSHA CAS, unpipelined, before", unpipelined.rps, "ops/s")
		rep.add("ceiling_evalsha_after", "raw EVALSHA CAS, unpipelined, after", u2.rps, "ops/s")
		rep.add("ceiling_evalsha_p16_before", "raw EVALSHA CAS, pipeline 16, before", pipelined.rps, "ops/s")
		rep.add("ceiling_evalsha_p16_after", "raw EVALSHA CAS, pipeline 16, after", p2.rps, "ops/s")
		unpipelined.rps = (unpipelined.rps + u2.rps) / 2
		pipelined.rps = (pipelined.rps + p2.rps) / 2
		rep.add("ceiling_redis_cpu_us", "raw EVALSHA CAS: Redis CPU per op, unpipelined", float64(unpipelined.cpuPerOp)/float64(time.Microsecond), "µs")
		rep.add("ceiling_p16_redis_cpu_us", "raw EVALSHA CAS: Redis CPU per op, pipeline 16", float64(pipelined.cpuPerOp)/float64(time.Microsecond), "µs")
		rep.add("ceiling_evalsha", "raw EVALSHA CAS, unpipelined, mean", unpipelined.rps, "ops/s")
		rep.add("ceiling_evalsha_p16", "raw EVALSHA CAS, pipeline 16, mean", pipelined.rps, "ops/s")
		rep.Settings["ceiling_requests"] = o.ceilRequests
		rep.Settings["ceiling_clients"] = o.ceilClients
	}
	rep.add("drain_seconds", fmt.Sprintf("drain %d due alarms", o.count), d.elapsed.Seconds(), "s")
	rep.add("drain_throughput", "drain throughput", rate, "alarms/s")
	rep.add("drain_redis_cpu_us", "drain: Redis CPU per alarm", float64(d.redisCPU)/float64(time.Microsecond), "µs")
	rep.add("drain_go_cpu_us", "drain: Go (queue + handler) CPU per alarm", float64(d.goCPU)/float64(time.Microsecond), "µs")
	rep.add("drain_first_ms", "drain: first transition applied after", d.lateness.percentile(0), "ms")
	rep.addLatencies("drain_lateness", "drain lateness", d.lateness)
	rep.addLatencies("drain_claim_lateness", "drain claim lateness", d.claimLateness)
	if unpipelined.rps > 0 {
		rep.add("drain_vs_unpipelined", "drain / unpipelined EVALSHA", rate/unpipelined.rps, "x")
		rep.add("drain_vs_pipelined16", "drain / pipeline-16 EVALSHA", rate/pipelined.rps, "x")
		verdict := "met"
		if rate < unpipelined.rps {
			verdict = "MISSED"
		}
		rep.note("target drain >= unpipelined EVALSHA rate: %s (%.0f vs %.0f /s)", verdict, rate, unpipelined.rps)
	}
	if d.overrun > 0 {
		rep.note("loading overran the due time by %v: the drain is timed from the schedulers' start, and lateness includes the overrun", d.overrun.Round(time.Millisecond))
	}
	rep.note("drain verified: %d objects expired, each exactly once (%d alarm claims incl. retries)", d.expired, d.claims)

	if o.rate > 0 {
		s, err := steadyAlarms(ctx, b, prefix, o)
		if err != nil {
			return nil, benchOutput{}, err
		}
		rep.addLatencies("steady_lateness", fmt.Sprintf("steady %d/s lateness", o.rate), s.lateness)
		rep.addLatencies("steady_claim_lateness", fmt.Sprintf("steady %d/s claim lateness", o.rate), s.claimLateness)
		if s.setLate > 0 {
			rep.addLatencies("steady_lateness_since_set", fmt.Sprintf("steady %d/s lateness from max(due, set)", o.rate), s.sinceKnown)
			rep.note("%d of %d steady alarms were set after their due time (the producer itself was stalled by more than --lead)", s.setLate, s.lateness.len())
		}
		rep.addLatencies("noise_timer", "noise floor: Go timer at 1,000 deadlines/s, lateness", s.timerNoise)
		rep.addLatencies("noise_ping", "noise floor: Redis PING round trip", s.pingNoise)
		verdict := "met"
		if p99 := s.lateness.percentile(99); p99 >= 5 {
			verdict = "MISSED"
		}
		rep.note("target steady p99 lateness < 5 ms: %s", verdict)
		rep.note("noise floor: during the steady run a bare Go timer aimed at every millisecond and a probe pinged Redis every 10 ms; no alarm can fire earlier than its process gets the CPU and Redis answers")
		rep.note("steady verified: %d alarms handled, %d expired exactly once", s.lateness.len(), s.expired)
	}
	rep.note("lateness = when the alarm's transition had been applied in Redis minus its due time; claim lateness = when the handler got it")
	return rep, benchOutput{json: o.json}, nil
}

// benchExpiryHandler is the benchmark's alarm handler: one pipelined transition script per firing
// of the batch, like the reservations service's expiry.
type benchExpiryHandler struct {
	rdb           redis.UniversalClient
	q             *alarm.Queue
	script        *redisx.Script
	batchScript   *redisx.Script // set when each batch's transitions run in one call
	lateness      benchLatencies // transition applied − due
	claimLateness benchLatencies // handler called − due
	claims        atomic.Int64
	expired       atomic.Int64 // transitions that changed an object: exactly one per object
	handled       atomic.Int64 // distinct objects whose transition succeeded (changed or not)
	seen          []atomic.Bool
	setAt         []atomic.Int64 // steady run: when each alarm's Set began (UnixNano)
	sinceKnown    benchLatencies // steady run: applied − max(due, setAt)
	done          chan struct{}
	doneOnce      sync.Once
}

// newBenchExpiryHandler expects the objects idPrefix+0 .. idPrefix+(want-1).
func newBenchExpiryHandler(rdb redis.UniversalClient, q *alarm.Queue, want int, mode string) *benchExpiryHandler {
	h := &benchExpiryHandler{rdb: rdb, q: q, script: redisx.NewScript("bench_expire.lua", benchExpireLua), seen: make([]atomic.Bool, want), done: make(chan struct{})}
	if mode == "batched" {
		h.batchScript = redisx.NewScript("bench_expire_batch.lua", benchExpireBatchLua)
	}
	return h
}

func benchObjectKey(q *alarm.Queue, shard int, id string) string {
	return q.Keys(shard).Tag + ":obj:" + id
}

// HandleAlarms applies the expiry of every firing in one pipeline.
func (h *benchExpiryHandler) HandleAlarms(ctx context.Context, batch []alarm.Firing) []error {
	called := time.Now()
	now := strconv.FormatInt(called.UnixMilli(), 10)
	results := h.transition(ctx, batch, now)
	applied := time.Now()
	h.claims.Add(int64(len(batch)))
	var errs []error
	for i, f := range batch {
		n, err := results[i].n, results[i].err
		if err != nil {
			if errs == nil {
				errs = make([]error, len(batch))
			}
			errs[i] = err
			continue
		}
		h.expired.Add(int64(n))
		// A retried firing whose first attempt did apply (only its reply was lost) finds the
		// object expired and changes nothing: it counts as handled, not twice.
		if i, err := strconv.Atoi(f.ID[1:]); err == nil && i < len(h.seen) && !h.seen[i].Swap(true) {
			h.lateness.add(applied.Sub(f.Due))
			h.claimLateness.add(called.Sub(f.Due))
			if h.setAt != nil {
				// An alarm set after its due time (the producer was stalled) cannot fire
				// before it was set: this lateness counts from then.
				origin := time.Unix(0, max(h.setAt[i].Load(), f.Due.UnixNano()))
				h.sinceKnown.add(applied.Sub(origin))
			}
			if h.handled.Add(1) == int64(len(h.seen)) {
				h.doneOnce.Do(func() { close(h.done) })
			}
		}
	}
	return errs
}

// transitionResult is one firing's outcome: 1 when it expired the object.
type transitionResult struct {
	n   int64
	err error
}

// transition expires the batch's objects: one pipelined script per object, or one script call
// for the whole batch (its objects share the shard's hash tag).
func (h *benchExpiryHandler) transition(ctx context.Context, batch []alarm.Firing, now string) []transitionResult {
	out := make([]transitionResult, len(batch))
	keys := make([]string, len(batch))
	for i, f := range batch {
		keys[i] = benchObjectKey(h.q, f.Shard, f.ID)
	}
	if h.batchScript != nil {
		res, err := h.batchScript.Run(ctx, h.rdb, keys, now).Int64Slice()
		for i := range out {
			switch {
			case err != nil:
				out[i].err = err
			case i < len(res):
				out[i].n = res[i]
			default:
				out[i].err = errors.New("batched transition: short reply")
			}
		}
		return out
	}
	cmds := make([]*redis.Cmd, len(batch))
	// A failed pipeline fails its commands too: each firing's outcome is its command's.
	_, _ = redisx.Pipelined(ctx, h.rdb, []*redisx.Script{h.script}, func(p redis.Pipeliner) {
		for i := range batch {
			cmds[i] = h.script.Queue(ctx, p, keys[i:i+1], now)
		}
	})
	for i, c := range cmds {
		out[i].n, out[i].err = c.Int64()
	}
	return out
}

// alarmsDrain is what the drain measured.
type alarmsDrain struct {
	elapsed                 time.Duration // from the common due time until the last transition was applied
	overrun                 time.Duration // how long after the due time the schedulers started
	goCPU, redisCPU         time.Duration // CPU time per alarm of this process and of Redis
	lateness, claimLateness *benchLatencies
	expired                 int
	claims                  int64
}

// drainAlarms loads count held objects whose alarms are all due at one instant T, starts the
// schedulers before T, and measures until every object has expired.
func drainAlarms(ctx context.Context, b *benchRedis, prefix string, o alarmsBench) (alarmsDrain, error) {
	q, err := alarm.New(b.rdb, alarm.Options{
		Prefix: prefix, Namespace: "drain", Shards: o.shards, BatchSize: o.batch,
		Lease: time.Minute, Logger: config.Logger("text", "warn"),
	})
	if err != nil {
		return alarmsDrain{}, err
	}
	// The due instant leaves room to load every object first; the schedulers then sleep
	// until it, as they would for real.
	due := time.Now().Add(2*time.Second + time.Duration(o.count)*20*time.Microsecond).Truncate(time.Millisecond)
	benchStage("drain: loading %d held objects with alarms due at %s", o.count, due.Format("15:04:05.000"))
	if err := benchLoadHeld(ctx, b.rdb, q, "o", o.count, due); err != nil {
		return alarmsDrain{}, err
	}
	// On a busy machine loading can overrun the due time: then the alarms are overdue when
	// the schedulers start, and the drain is timed from their start instead.
	overrun := max(-time.Until(due), 0)

	h := newBenchExpiryHandler(b.rdb, q, o.count, o.handler)
	goCPU0 := processCPU()
	redisCPU0, err := b.serverCPU(ctx)
	if err != nil {
		return alarmsDrain{}, err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- q.Run(runCtx, h) }()
	defer func() { stopRun(); <-runDone }()
	benchStage("drain: schedulers running; waiting for the due time (%v)", time.Until(due).Round(time.Millisecond))
	stop := benchProgress(250*time.Millisecond, func() string {
		return fmt.Sprintf("drain: %d/%d handled", h.handled.Load(), o.count)
	})
	select {
	case <-h.done:
	case <-ctx.Done():
		stop()
		return alarmsDrain{}, ctx.Err()
	case <-time.After(time.Until(due) + 5*time.Minute):
		stop()
		return alarmsDrain{}, fmt.Errorf("drain: only %d of %d handled after 5 minutes", h.handled.Load(), o.count)
	}
	stop()
	goCPU := processCPU() - goCPU0
	redisCPU1, err := b.serverCPU(ctx)
	if err != nil {
		return alarmsDrain{}, err
	}
	elapsed := time.Duration(h.lateness.percentile(100)*float64(time.Millisecond)) - overrun
	benchStage("drain: done in %v", elapsed.Round(time.Millisecond))

	expired, err := benchVerifyExpiredOnce(ctx, b.rdb, q, "o", o.count)
	if err != nil {
		return alarmsDrain{}, err
	}
	return alarmsDrain{elapsed: elapsed, overrun: overrun, goCPU: goCPU / time.Duration(o.count), redisCPU: (redisCPU1 - redisCPU0) / time.Duration(o.count), lateness: &h.lateness, claimLateness: &h.claimLateness, expired: expired, claims: h.claims.Load()}, nil
}

// benchLoadHeld creates count held objects named prefix+i, each with expiresAt and its alarm at due,
// in pipelines of 1,000 objects.
func benchLoadHeld(ctx context.Context, rdb redis.UniversalClient, q *alarm.Queue, prefix string, count int, due time.Time) error {
	ms := due.UnixMilli()
	for start := 0; start < count; start += 1000 {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := start; i < min(start+1000, count); i++ {
				id := prefix + strconv.Itoa(i)
				shard := q.ShardOf(id)
				p.HSet(ctx, benchObjectKey(q, shard, id), "status", "held", "expiresAt", ms)
				p.ZAdd(ctx, q.Keys(shard).Alarms, redis.Z{Score: float64(ms), Member: id})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("load objects: %w", err)
		}
	}
	return nil
}

// benchVerifyExpiredOnce checks that every object expired exactly once and returns how many did.
func benchVerifyExpiredOnce(ctx context.Context, rdb redis.UniversalClient, q *alarm.Queue, prefix string, count int) (int, error) {
	expired := 0
	for start := 0; start < count; start += 1000 {
		var cmds []*redis.SliceCmd
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := start; i < min(start+1000, count); i++ {
				id := prefix + strconv.Itoa(i)
				cmds = append(cmds, p.HMGet(ctx, benchObjectKey(q, q.ShardOf(id), id), "status", "expirationCount"))
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("verify: %w", err)
		}
		for i, c := range cmds {
			v := c.Val()
			if len(v) != 2 || v[0] != "expired" || v[1] != "1" {
				return 0, fmt.Errorf("verify: object %s%d is %v, want expired exactly once", prefix, start+i, v)
			}
			expired++
		}
	}
	return expired, nil
}

// steadyProducers set the steady run's alarms concurrently.
const steadyProducers = 8

// alarmsSteady is what the steady run measured.
type alarmsSteady struct {
	lateness, claimLateness *benchLatencies
	timerNoise, pingNoise   *benchLatencies
	sinceKnown              *benchLatencies
	setLate                 int
	expired                 int
}

// steadyAlarms sets rate alarms per second for the duration, each lead before it is due and due
// 1/rate after the previous one, through Queue.Set (so wake-up hints are part of it), and
// measures each one's lateness.
func steadyAlarms(ctx context.Context, b *benchRedis, prefix string, o alarmsBench) (alarmsSteady, error) {
	q, err := alarm.New(b.rdb, alarm.Options{
		Prefix: prefix, Namespace: "steady", Shards: o.shards, BatchSize: o.batch,
		Lease: time.Minute, Logger: config.Logger("text", "warn"),
	})
	if err != nil {
		return alarmsSteady{}, err
	}
	total := int(float64(o.rate) * o.duration.Seconds())
	if total <= 0 {
		return alarmsSteady{}, errors.New("steady: --rate × --duration is less than one alarm")
	}
	h := newBenchExpiryHandler(b.rdb, q, total, o.handler)
	h.setAt = make([]atomic.Int64, total)
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- q.Run(runCtx, h) }()
	defer func() { stopRun(); <-runDone }()

	benchStage("steady: %d alarms/s for %v (%d alarms), each set %v ahead", o.rate, o.duration, total, o.lead)
	var timerNoise, pingNoise benchLatencies
	probeCtx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan struct{})
	go func() { defer close(probeDone); probeNoise(probeCtx, b.rdb, &timerNoise, &pingNoise) }()
	defer func() { stopProbe(); <-probeDone }()
	var created atomic.Int64
	stop := benchProgress(time.Second, func() string {
		return fmt.Sprintf("steady: %d set, %d handled, p99 so far %.2f ms", created.Load(), h.handled.Load(), h.lateness.percentile(99))
	})
	defer stop()
	// A dispatcher releases each alarm lead before it is due; several producers set them, as
	// concurrent API requests would, so one stalled round trip does not hold up the rest.
	interval := time.Second / time.Duration(o.rate)
	first := time.Now().Add(o.lead + 50*time.Millisecond)
	todo := make(chan int, total)
	var (
		producers sync.WaitGroup
		errOnce   sync.Once
		produceEr error
	)
	for range steadyProducers {
		producers.Add(1)
		go func() {
			defer producers.Done()
			for i := range todo {
				id := "s" + strconv.Itoa(i)
				dueMs := first.Add(time.Duration(i)*interval).UnixMilli() + 1 // Set rounds up; expiresAt must agree
				h.setAt[i].Store(time.Now().UnixNano())
				err := b.rdb.HSet(ctx, benchObjectKey(q, q.ShardOf(id), id), "status", "held", "expiresAt", dueMs).Err()
				if err == nil {
					err = q.Set(ctx, id, time.UnixMilli(dueMs))
				}
				if err != nil {
					errOnce.Do(func() { produceEr = fmt.Errorf("steady: create object: %w", err) })
					continue
				}
				created.Add(1)
			}
		}()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := range total {
		due := first.Add(time.Duration(i) * interval)
		if wait := time.Until(due.Add(-o.lead)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				close(todo)
				producers.Wait()
				return alarmsSteady{}, ctx.Err()
			}
		}
		todo <- i
	}
	close(todo)
	producers.Wait()
	if produceEr != nil {
		return alarmsSteady{}, produceEr
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		return alarmsSteady{}, ctx.Err()
	case <-time.After(time.Minute):
		return alarmsSteady{}, fmt.Errorf("steady: only %d of %d handled a minute after the last was due", h.handled.Load(), total)
	}
	stop()
	expired, err := benchVerifyExpiredOnce(ctx, b.rdb, q, "s", total)
	if err != nil {
		return alarmsSteady{}, err
	}
	stopProbe()
	<-probeDone
	setLate := 0
	firstNs := first.UnixNano()
	for i := range h.setAt {
		if h.setAt[i].Load() > firstNs+int64(i)*int64(interval)+int64(time.Millisecond) {
			setLate++
		}
	}
	return alarmsSteady{lateness: &h.lateness, claimLateness: &h.claimLateness, timerNoise: &timerNoise, pingNoise: &pingNoise,
		sinceKnown: &h.sinceKnown, setLate: setLate, expired: expired}, nil
}

// probeNoise measures what the machine allows until ctx ends, in the same terms as the steady
// alarms: a bare Go timer aimed at a deadline every millisecond (how late it fires; a stall of
// the process makes every deadline inside it late, as it does the alarms), and a Redis PING
// every 10 ms (its round trip). Both bound any alarm's lateness from below.
func probeNoise(ctx context.Context, rdb redis.UniversalClient, timer, ping *benchLatencies) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			start := time.Now()
			if rdb.Ping(ctx).Err() == nil {
				ping.add(time.Since(start))
			}
		}
	}()
	defer wg.Wait()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	deadline := time.Now().Truncate(time.Millisecond)
	for {
		deadline = deadline.Add(time.Millisecond)
		if wait := time.Until(deadline); wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		timer.add(time.Since(deadline))
	}
}
