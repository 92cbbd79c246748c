package main

import (
	"context"
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
)

// alarmsBench are the settings of `vigilbench alarms`.
type alarmsBench struct {
	count    int
	rate     int
	duration time.Duration
	lead     time.Duration
	shards   int
	batch    int
	ceiling  ceilingFlags
}

// benchAlarms measures pkg/alarm alone (the bare queue: claim, hand to a handler that only
// records, ack): draining many alarms due at one instant, lateness at a steady rate, and the
// raw Redis EVALSHA ceiling on the same server for comparison. No domain script runs: the
// reservations benchmark measures the queue with the real service's transition.
func benchAlarms(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	var o alarmsBench
	fs.IntVar(&o.count, "count", 100_000, "alarms due at the same instant in the drain")
	fs.IntVar(&o.rate, "rate", 1000, "alarms per second in the steady run (0 skips it)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of the steady run")
	fs.DurationVar(&o.lead, "lead", 500*time.Millisecond, "how long before its due time each steady alarm is set")
	fs.IntVar(&o.shards, "shards", 16, "alarm queue shards")
	fs.IntVar(&o.batch, "batch", 256, "alarms per claim")
	o.ceiling.register(fs)
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	if o.count <= 0 || o.shards <= 0 || o.batch <= 0 || o.lead <= 0 || o.rate < 0 {
		return fmt.Errorf("%w: --count, --shards, --batch and --lead must be positive, --rate not negative", errUsage)
	}
	b, err := h.Redis(ctx)
	if err != nil {
		return err
	}
	rep := h.Report
	rep.Settings["count"] = o.count
	rep.Settings["shards"] = o.shards
	rep.Settings["batch"] = o.batch
	rep.Settings["rate"] = o.rate
	rep.Settings["duration"] = o.duration.String()

	var d queueDrain
	ceil, err := withCeilings(ctx, b, h, o.ceiling, func() error {
		d, err = drainBareQueue(ctx, b, h.Prefix, "drain", o.count, o.shards, o.batch)
		return err
	})
	if err != nil {
		return err
	}
	rate := d.rate()
	d.report(rep, "drain", fmt.Sprintf("bare queue: drain %d due alarms", o.count), "alarms/s")
	if ceil.unpipelined > 0 {
		rep.ratio("drain_vs_unpipelined", "bare queue drain / unpipelined EVALSHA", rate, ceil.unpipelined)
		rep.ratio("drain_vs_pipelined16", "bare queue drain / pipeline-16 EVALSHA", rate, ceil.pipelined)
	}

	if o.rate > 0 {
		s, err := steadyAlarms(ctx, b, h.Prefix, o)
		if err != nil {
			return err
		}
		rep.addLatencies("steady_lateness", fmt.Sprintf("steady %d/s lateness", o.rate), s.lateness)
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
		rep.note("steady verified: %d alarms handled, each exactly once", s.lateness.len())
	}
	rep.note("lateness = when the handler got the alarm minus its due time")
	return nil
}

// recorder is the bare queue's handler: it records each alarm's first firing and nothing else.
// Objects are named idPrefix+0 .. idPrefix+(want-1).
type recorder struct {
	lateness   benchLatencies // handler called − due, first firing of each alarm
	claims     atomic.Int64
	handled    atomic.Int64 // distinct alarms handled
	seen       []atomic.Bool
	setAt      []atomic.Int64 // steady run: when each alarm's Set began (UnixNano)
	sinceKnown benchLatencies // steady run: handled − max(due, setAt)
	done       chan struct{}
	doneOnce   sync.Once
}

func newRecorder(want int) *recorder {
	return &recorder{seen: make([]atomic.Bool, want), done: make(chan struct{})}
}

// HandleAlarms records the batch; it never fails.
func (r *recorder) HandleAlarms(ctx context.Context, batch []alarm.Firing) []error {
	called := time.Now()
	r.claims.Add(int64(len(batch)))
	for _, f := range batch {
		i, err := strconv.Atoi(f.ID[1:])
		if err != nil || i >= len(r.seen) || r.seen[i].Swap(true) {
			continue
		}
		r.lateness.add(called.Sub(f.Due))
		if r.setAt != nil {
			// An alarm set after its due time (the producer was stalled) cannot fire
			// before it was set: this lateness counts from then.
			origin := time.Unix(0, max(r.setAt[i].Load(), f.Due.UnixNano()))
			r.sinceKnown.add(called.Sub(origin))
		}
		if r.handled.Add(1) == int64(len(r.seen)) {
			r.doneOnce.Do(func() { close(r.done) })
		}
	}
	return nil
}

// queueDrain is what a drain measured.
type queueDrain struct {
	count           int
	elapsed         time.Duration // from the common due time until the last alarm was handled and the queue empty
	overrun         time.Duration // how long after the due time the schedulers started
	goCPU, redisCPU time.Duration // CPU time per alarm of this process and of Redis
	lateness        *benchLatencies
	claims          int64
}

func (d queueDrain) rate() float64 { return float64(d.count) / d.elapsed.Seconds() }

// report adds the drain's figures under key.
func (d queueDrain) report(rep *benchReport, key, name, unit string) {
	rep.add(key+"_seconds", name, d.elapsed.Seconds(), "s")
	rep.add(key+"_throughput", name+": throughput", d.rate(), unit)
	rep.add(key+"_redis_cpu_us", name+": Redis CPU per alarm", float64(d.redisCPU)/float64(time.Microsecond), "µs")
	rep.add(key+"_go_cpu_us", name+": Go CPU per alarm", float64(d.goCPU)/float64(time.Microsecond), "µs")
	if d.lateness != nil {
		rep.addLatencies(key+"_lateness", name+": lateness", d.lateness)
	}
	if d.overrun > 0 {
		rep.note("%s: loading overran the due time by %v; the drain is timed from the schedulers' start", name, d.overrun.Round(time.Millisecond))
	}
	if d.claims > 0 {
		rep.note("%s verified: %d alarms handled, each once, %d claims in all, queue empty", name, d.count, d.claims)
	}
}

// drainBareQueue loads count alarms of namespace ns all due at one instant T, starts the
// schedulers before T with the recording handler, and measures until every alarm is handled
// and acknowledged.
func drainBareQueue(ctx context.Context, b *benchRedis, prefix, ns string, count, shards, batch int) (queueDrain, error) {
	q, err := alarm.New(b.rdb, alarm.Options{
		Prefix: prefix, Namespace: ns, Shards: shards, BatchSize: batch,
		Lease: time.Minute, Logger: config.Logger("text", "warn"),
	})
	if err != nil {
		return queueDrain{}, err
	}
	// The due instant leaves room to load every alarm first; the schedulers then sleep until
	// it, as they would for real.
	due := time.Now().Add(2*time.Second + time.Duration(count)*20*time.Microsecond).Truncate(time.Millisecond)
	benchStage("%s: loading %d alarms due at %s", ns, count, due.Format("15:04:05.000"))
	if err := loadAlarms(ctx, b.rdb, q, "o", count, due); err != nil {
		return queueDrain{}, err
	}
	overrun := max(-time.Until(due), 0)

	r := newRecorder(count)
	goCPU0 := processCPU()
	redisCPU0, err := b.serverCPU(ctx)
	if err != nil {
		return queueDrain{}, err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- q.Run(runCtx, r) }()
	defer func() { stopRun(); <-runDone }()
	benchStage("%s: schedulers running; waiting for the due time (%v)", ns, time.Until(due).Round(time.Millisecond))
	stop := benchProgress(250*time.Millisecond, func() string {
		return fmt.Sprintf("%s: %d/%d handled", ns, r.handled.Load(), count)
	})
	select {
	case <-r.done:
	case <-ctx.Done():
		stop()
		return queueDrain{}, ctx.Err()
	case <-time.After(time.Until(due) + 5*time.Minute):
		stop()
		return queueDrain{}, fmt.Errorf("%s: only %d of %d handled after 5 minutes", ns, r.handled.Load(), count)
	}
	stop()
	// The last batch is handled; it is drained once its ack has emptied the queue.
	emptyAt, err := waitEmpty(ctx, q)
	if err != nil {
		return queueDrain{}, err
	}
	goCPU := processCPU() - goCPU0
	redisCPU1, err := b.serverCPU(ctx)
	if err != nil {
		return queueDrain{}, err
	}
	elapsed := emptyAt.Sub(due.Add(overrun))
	benchStage("%s: done in %v", ns, elapsed.Round(time.Millisecond))
	if n := r.claims.Load(); n != int64(count) {
		return queueDrain{}, fmt.Errorf("%s: %d claims for %d alarms: some fired twice (a lease ran out?)", ns, n, count)
	}
	return queueDrain{count: count, elapsed: elapsed, overrun: overrun, goCPU: goCPU / time.Duration(count),
		redisCPU: (redisCPU1 - redisCPU0) / time.Duration(count), lateness: &r.lateness, claims: r.claims.Load()}, nil
}

// waitEmpty polls q until it holds no alarm and returns when it saw it empty.
func waitEmpty(ctx context.Context, q *alarm.Queue) (time.Time, error) {
	return waitEmptyBut(ctx, q, 0)
}

// waitEmptyBut polls q until it holds no more than keep alarms (others' alarms that stay).
func waitEmptyBut(ctx context.Context, q *alarm.Queue, keep int64) (time.Time, error) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		n, err := pendingAlarms(ctx, q)
		if err == nil && n <= keep {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s: %d alarms still queued 5 minutes on (last error %v)", q.Namespace(), n, err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// pendingAlarms counts q's alarms over all shards.
func pendingAlarms(ctx context.Context, q *alarm.Queue) (int64, error) {
	counts, err := q.Pending(ctx)
	var n int64
	for _, c := range counts {
		n += c
	}
	return n, err
}

// loadAlarms sets count alarms named prefix+i, all due at due, in pipelines of 1,000 (the
// queue's own Set would take a round trip each).
func loadAlarms(ctx context.Context, rdb redis.UniversalClient, q *alarm.Queue, prefix string, count int, due time.Time) error {
	ms := float64(due.UnixMilli())
	for start := 0; start < count; start += 1000 {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := start; i < min(start+1000, count); i++ {
				id := prefix + strconv.Itoa(i)
				p.ZAdd(ctx, q.KeysOf(id).Alarms, redis.Z{Score: ms, Member: id})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("load alarms: %w", err)
		}
	}
	return nil
}

// steadyProducers set the steady run's alarms concurrently.
const steadyProducers = 8

// alarmsSteady is what the steady run measured.
type alarmsSteady struct {
	lateness              *benchLatencies
	timerNoise, pingNoise *benchLatencies
	sinceKnown            *benchLatencies
	setLate               int
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
	h := newRecorder(total)
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
				err := q.Set(ctx, id, time.UnixMilli(dueMs))
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
	if n := h.claims.Load(); n != int64(total) {
		return alarmsSteady{}, fmt.Errorf("steady: %d claims for %d alarms: some fired twice", n, total)
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
	return alarmsSteady{lateness: &h.lateness, timerNoise: &timerNoise, pingNoise: &pingNoise,
		sinceKnown: &h.sinceKnown, setLate: setLate}, nil
}

// probeNoise measures what the machine allows until ctx ends, in the same terms as the steady
// alarms: a bare Go timer aimed at a deadline every millisecond (how late it fires; a stall of
// the process makes every deadline inside it late, as it does the alarms), and a Redis PING
// every 10 ms (its round trip). Both bound any alarm's lateness from below.
func probeNoise(ctx context.Context, rdb redis.UniversalClient, timer, ping *benchLatencies) {
	var wg sync.WaitGroup
	wg.Go(func() {
		atRate(ctx, 100, nil, func(int) { // every 10 ms
			start := time.Now()
			if rdb.Ping(ctx).Err() == nil {
				ping.add(time.Since(start))
			}
		})
	})
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
