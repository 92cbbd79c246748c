package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/alarm"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

// reservationsBench are the settings of `vigilbench reservations`.
type reservationsBench struct {
	count       int
	concurrency int
	duration    time.Duration
	queue       bool
	via         string
	rounds      int
	ceiling     ceilingFlags
}

// benchReservations measures the reservations service through an in-process stack (the real
// service and gateway on loopback): creates per second over gRPC and over REST, then, between
// two measurements of the raw EVALSHA ceiling, 100,000 due alarms drained by the bare queue
// (pkg/alarm with a handler that only records) and 100,000 holds expiring at one instant
// through the service's own alarm handler, its reservation-alarm lines included.
func benchReservations(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	var o reservationsBench
	fs.IntVar(&o.count, "count", 100_000, "holds expiring at the same instant in the drain (0 skips the drains)")
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent callers creating reservations")
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of each creates-per-second run (0 skips them)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of creates-per-second runs, interleaving gRPC and REST")
	fs.BoolVar(&o.queue, "queue", true, "also drain --count alarms through the bare queue, in the same run")
	fs.StringVar(&o.via, "via", "grpc,rest,rest_nethttp", "the creates-per-second runs, comma-separated: grpc, rest (the load tool's HTTP/1.1 client), rest_nethttp (Go's http.Client)")
	o.ceiling.register(fs)
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	if o.concurrency <= 0 || o.count < 0 || o.rounds <= 0 {
		return fmt.Errorf("%w: --concurrency and --rounds must be positive and --count not negative", errUsage)
	}
	b, err := h.Redis(ctx)
	if err != nil {
		return err
	}
	rep := h.Report
	rep.Settings["count"] = o.count
	rep.Settings["concurrency"] = o.concurrency
	rep.Settings["duration"] = o.duration.String()
	rep.Settings["rounds"] = o.rounds

	st, err := startReservationsStack(ctx, h, b.url)
	if err != nil {
		return err
	}

	var grpcRate, restRate, restNetRate float64
	if o.duration > 0 {
		vias := []struct {
			key, name string
			create    func(ctx context.Context, id string) error
			rate      *float64
			n         int
			elapsed   time.Duration
			latency   benchLatencies
		}{
			{key: "grpc", name: "gRPC", create: st.grpcCreate("grpc-"), rate: &grpcRate},
			{key: "rest", name: "REST", create: st.restCreate(st.rest, "rest-"), rate: &restRate},
			{key: "rest_nethttp", name: "REST with Go's http.Client", create: st.restCreate(st.netHTTP, "resth-"), rate: &restNetRate},
		}
		// Rounds interleave the clients, so a change in the machine's speed during the run
		// (a neighbour, a frequency step) falls on them alike; each rate is over all rounds.
		for round := range o.rounds {
			for i := range vias {
				via := &vias[i]
				if !strings.Contains(","+o.via+",", ","+via.key+",") {
					continue
				}
				r, err := benchCreateRate(ctx, fmt.Sprintf("%s (round %d of %d)", via.name, round+1, o.rounds), o.duration, o.concurrency, via.create)
				if err != nil {
					return err
				}
				via.n += r.latency.len()
				via.elapsed += r.elapsed
				via.latency.merge(r.latency)
			}
		}
		for i := range vias {
			via := &vias[i]
			if via.n == 0 {
				continue
			}
			*via.rate = float64(via.n) / via.elapsed.Seconds()
			rep.add("creates_"+via.key, "creates over "+via.name, *via.rate, "creates/s")
			rep.addLatencies("creates_"+via.key+"_latency", "create over "+via.name+" latency", &via.latency)
		}
		if grpcRate > 0 && restRate > 0 {
			rep.ratio("creates_rest_vs_grpc", "creates: REST / gRPC", restRate, grpcRate)
		}
		if grpcRate > 0 && restNetRate > 0 {
			rep.ratio("creates_rest_nethttp_vs_grpc", "creates: REST with Go's http.Client / gRPC", restNetRate, grpcRate)
		}
	}

	if o.count > 0 {
		createsPerSec := grpcRate
		if createsPerSec == 0 {
			// A create rate sizes how far ahead the drain's holds must fall due.
			probe, err := benchCreateRate(ctx, "probe", time.Second, o.concurrency, st.grpcCreate("probe-"))
			if err != nil {
				return err
			}
			createsPerSec = probe.rate
		}
		var queue queueDrain
		var svc reservationsDrain
		ceil, err := withCeilings(ctx, b, h, o.ceiling, func() error {
			if o.queue {
				if queue, err = drainBareQueue(ctx, b, h.Prefix, "bare", o.count, st.shards, 256); err != nil {
					return err
				}
			}
			svc, err = drainReservations(ctx, b, st, h.Prefix, o.count, o.concurrency, createsPerSec)
			return err
		})
		if err != nil {
			return err
		}
		rate := float64(o.count) / svc.elapsed.Seconds()
		if o.queue {
			queue.report(rep, "queue_drain", fmt.Sprintf("bare queue: drain %d due alarms", o.count), "alarms/s")
		}
		rep.add("drain_seconds", fmt.Sprintf("service: drain %d holds due at once", o.count), svc.elapsed.Seconds(), "s")
		rep.add("drain_throughput", "service: drain throughput", rate, "holds/s")
		rep.add("drain_redis_cpu_us", "service: Redis CPU per hold", float64(svc.redisCPU)/float64(time.Microsecond), "µs")
		rep.add("drain_go_cpu_us", "service: its own CPU per hold", float64(svc.goCPU)/float64(time.Microsecond), "µs")
		rep.addLatencies("drain_expired_after", "service: expiredAt − due", svc.lateness)
		if ceil.unpipelined > 0 {
			rep.ratio("drain_vs_unpipelined", "service drain / unpipelined EVALSHA", rate, ceil.unpipelined)
			if o.queue {
				rep.ratio("queue_drain_vs_unpipelined", "bare queue drain / unpipelined EVALSHA", queue.rate(), ceil.unpipelined)
			}
			verdict := "met"
			if rate < 1.3*ceil.unpipelined {
				verdict = "MISSED"
			}
			rep.note("target service drain >= 1.3x unpipelined EVALSHA: %s (%.0f vs %.0f /s)", verdict, rate, ceil.unpipelined)
		}
		if o.queue {
			rep.ratio("drain_vs_queue", "service drain / bare queue drain", rate, queue.rate())
		}
		rep.note("service drain verified: %d holds expired, each exactly once (expirationCount 1), and %d reservation-alarm done lines said changed:true; expiredAt is the handler's clock, in whole ms", svc.expired, svc.changedLines)
		if svc.startLate > 0 {
			rep.note("the load ran past its margin: the schedulers first saw the due holds %v after their due time", svc.startLate)
		}
	}
	if n := st.retries.Load(); n > 0 {
		rep.note("%d calls answered Unavailable (the service's Redis timed out) and were repeated, as a client should", n)
	}
	return nil
}

// reservationsStack is the reservations service and the gateway, started by the harness.
type reservationsStack struct {
	clock   *benchClock
	client  reservationsv1.ReservationServiceClient
	rest    *restClient   // the load tool's client (restclient.go)
	netHTTP netHTTPClient // Go's http.Client, reported beside it
	shards  int
	retries atomic.Int64 // calls repeated after Unavailable
	// alarmLines counts the service's reservation-alarm lines.
	alarmLines alarmLines
}

// benchClock is the service's injected clock: real time, or a fixed instant while frozen.
type benchClock struct{ frozen atomic.Int64 } // UnixNano; 0 = real time

func (c *benchClock) Now() time.Time {
	if ns := c.frozen.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Now()
}

// alarmLines is the service's AlarmLog in the bench: it counts the done lines that changed a
// hold (the check that every hold expired once and was logged) and keeps nothing, so the
// service pays for encoding its lines as it would for a real log.
type alarmLines struct{ changed atomic.Int64 }

func (l *alarmLines) Write(p []byte) (int, error) {
	l.changed.Add(int64(bytes.Count(p, []byte(`"changed":true`))))
	return len(p), nil
}

func startReservationsStack(ctx context.Context, h *Harness, redisURL string) (*reservationsStack, error) {
	st := &reservationsStack{clock: &benchClock{}, shards: 16}
	svc, err := reservations.New(ctx, reservations.Options{
		Core:     server.Core{Redis: redisx.Config{URL: redisURL}, Prefix: h.Prefix, Now: st.clock.Now, Logger: quiet("reservations")},
		Shards:   st.shards,
		AlarmLog: &st.alarmLines,
	})
	if err != nil {
		return nil, fmt.Errorf("reservations service: %w", err)
	}
	grpcAddr := h.Serve(ctx, "reservations", svc)
	if st.netHTTP.base, st.netHTTP.c, err = h.Gateway(ctx, gateway.Backends{Reservations: grpcAddr}); err != nil {
		return nil, err
	}
	st.rest = newRestClient(st.netHTTP.base, 256)
	conn, err := grpcdial.New(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	h.stack.onStop(func() { _ = conn.Close(); st.rest.close() })
	st.client = reservationsv1.NewReservationServiceClient(conn)
	benchStage("reservations service on %s, gateway on %s (in process)", grpcAddr, st.netHTTP.base)
	return st, nil
}

// grpcCreate creates reservations prefix+<n> for an hour over gRPC.
func (st *reservationsStack) grpcCreate(prefix string) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		return st.retryUnavailable(ctx, func() error {
			_, err := st.client.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{ReservationId: prefix + id, TtlSeconds: 3600})
			return err
		})
	}
}

// retryUnavailable calls call again, up to 5 times with a growing pause, while the service
// answers Unavailable ("try again": its Redis timed out on a busy machine), as a client should.
func (st *reservationsStack) retryUnavailable(ctx context.Context, call func() error) error {
	for attempt := 1; ; attempt++ {
		err := call()
		if status.Code(err) != codes.Unavailable || attempt == 5 {
			return err
		}
		st.retries.Add(1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// restCreate creates reservations prefix+<n> for an hour over the gateway's REST API.
func (st *reservationsStack) restCreate(client restDoer, prefix string) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		return st.retryUnavailable(ctx, func() error {
			path := "/reservations/" + prefix + id
			code, msg, err := client.do(ctx, http.MethodPost, path, `{"ttlSeconds":3600}`)
			switch {
			case err != nil:
				return err
			case code == http.StatusServiceUnavailable:
				// Unavailable, as gRPC would say: repeated like a gRPC create.
				return status.Error(codes.Unavailable, string(msg))
			case code != http.StatusCreated:
				return fmt.Errorf("POST %s: %d %s", path, code, msg)
			}
			return nil
		})
	}
}

// benchRate is a creates-per-second run.
type benchRate struct {
	rate    float64
	elapsed time.Duration
	latency *benchLatencies
}

// benchCreateRate runs concurrency callers creating distinct reservations for d.
func benchCreateRate(ctx context.Context, name string, d time.Duration, concurrency int, create func(ctx context.Context, id string) error) (benchRate, error) {
	benchStage("creates over %s: %d callers for %v", name, concurrency, d)
	var (
		next    atomic.Int64
		lat     benchLatencies
		wg      sync.WaitGroup
		errOnce sync.Once
		firstEr error
	)
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	stop := benchProgress(time.Second, func() string { return fmt.Sprintf("%s: %d created", name, lat.len()) })
	start := time.Now()
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				id := strconv.FormatInt(next.Add(1), 10)
				t := time.Now()
				if err := create(ctx, id); err != nil {
					errOnce.Do(func() { firstEr = err; cancel() })
					return
				}
				lat.add(time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	if firstEr != nil {
		return benchRate{}, fmt.Errorf("creates over %s: %w", name, firstEr)
	}
	return benchRate{rate: float64(lat.len()) / elapsed.Seconds(), elapsed: elapsed, latency: &lat}, nil
}

// reservationsDrain is what the drain measured.
type reservationsDrain struct {
	changedLines int64           // reservation-alarm done lines with changed:true
	elapsed      time.Duration   // from the due instant until the last hold was expired and acked
	lateness     *benchLatencies // expiredAt − due, per hold
	expired      int
	startLate    time.Duration
	// CPU time per hold from the end of the creates until the alarm sets were empty: of this
	// process (the service's scheduler and handler; the bench's own polling is small) and of Redis.
	goCPU, redisCPU time.Duration
}

// drainReservations creates count holds of the minimum TTL that all expire at one instant, by
// freezing the service's clock while they are created, and measures until the service's own
// alarm handler has expired every one.
func drainReservations(ctx context.Context, b *benchRedis, st *reservationsStack, prefix string, count, concurrency int, createsPerSec float64) (reservationsDrain, error) {
	const ttl = 5 * time.Second // the shortest hold the service allows
	// Freeze the clock far enough ahead that every create is done, and every scheduler has
	// seen the real clock again (its sleep is capped at 2 s), before the holds fall due.
	loadFor := time.Duration(float64(count)/max(createsPerSec, 1)*1.5*float64(time.Second)) + time.Second
	frozen := time.Now().Add(loadFor).Add(3 * time.Second).Truncate(time.Millisecond)
	due := frozen.Add(ttl)
	st.clock.frozen.Store(frozen.UnixNano())
	benchStage("drain: creating %d holds with the service's clock frozen so all expire at %s", count, due.Format("15:04:05.000"))

	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		firstEr error
	)
	// Count the service's pending alarms straight from Redis (the key layout is pkg/alarm's);
	// the probe's hour-long holds are already there and stay.
	q, err := alarm.New(b.rdb, alarm.Options{Prefix: prefix, Namespace: "reservations", Shards: st.shards})
	if err != nil {
		return reservationsDrain{}, err
	}
	before, err := pendingAlarms(ctx, q)
	if err != nil {
		return reservationsDrain{}, err
	}
	stop := benchProgress(time.Second, func() string { return fmt.Sprintf("drain: %d/%d created", next.Load(), count) })
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(count) || ctx.Err() != nil {
					return
				}
				err := st.retryUnavailable(ctx, func() error {
					_, err := st.client.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{
						ReservationId: "drain-" + strconv.FormatInt(n-1, 10), TtlSeconds: int32(ttl / time.Second)})
					return err
				})
				if err != nil {
					errOnce.Do(func() { firstEr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	stop()
	st.clock.frozen.Store(0)
	if firstEr != nil {
		return reservationsDrain{}, fmt.Errorf("drain: create: %w", firstEr)
	}

	var startLate time.Duration
	if late := time.Since(due); late > -2*time.Second {
		startLate = max(late+2*time.Second, 0)
	}
	linesBefore := st.alarmLines.changed.Load()
	// CPU is counted from just before the due time: what the process and Redis spend while
	// the holds are waiting (the creates' garbage collected, idle connections) is not the drain's.
	if wait := time.Until(due) - 50*time.Millisecond; wait > 0 {
		benchStage("drain: all created; waiting for the due time (%v)", wait.Round(time.Millisecond))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return reservationsDrain{}, ctx.Err()
		}
	}
	goCPU0 := processCPU()
	redisCPU0, err := b.serverCPU(ctx)
	if err != nil {
		return reservationsDrain{}, err
	}
	// The service's own done lines say when every hold has expired (an atomic counter, no
	// Redis polling to skew the drain); the drain ends when the acks have emptied the queue.
	changed := func() int64 { return st.alarmLines.changed.Load() - linesBefore }
	stop = benchProgress(250*time.Millisecond, func() string { return fmt.Sprintf("drain: %d/%d expired", changed(), count) })
	defer stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(time.Until(due) + 5*time.Minute)
	for changed() < int64(count) {
		if time.Now().After(deadline) {
			return reservationsDrain{}, fmt.Errorf("drain: %d of %d holds expired 5 minutes after their due time", changed(), count)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return reservationsDrain{}, ctx.Err()
		}
	}
	emptyAt, err := waitEmptyBut(ctx, q, before)
	if err != nil {
		return reservationsDrain{}, err
	}
	stop()
	goCPU := processCPU() - goCPU0
	redisCPU1, err := b.serverCPU(ctx)
	if err != nil {
		return reservationsDrain{}, err
	}
	benchStage("drain: every alarm handled %v after the due time", emptyAt.Sub(due).Round(time.Millisecond))
	if n := changed(); n != int64(count) {
		return reservationsDrain{}, fmt.Errorf("drain: %d reservation-alarm lines said changed:true for %d holds, want one each", n, count)
	}
	lat, expired, err := verifyReservationsExpired(ctx, b.rdb, q, count, due)
	if err != nil {
		return reservationsDrain{}, err
	}
	return reservationsDrain{changedLines: int64(count), elapsed: emptyAt.Sub(due), lateness: lat, expired: expired, startLate: startLate,
		goCPU: goCPU / time.Duration(count), redisCPU: (redisCPU1 - redisCPU0) / time.Duration(count)}, nil
}

// verifyReservationsExpired reads every drained hold (the store's key layout: the shard's tag
// + ":res:" + id) and checks it expired exactly once; it returns expiredAt − due per hold.
func verifyReservationsExpired(ctx context.Context, rdb redis.UniversalClient, q *alarm.Queue, count int, due time.Time) (*benchLatencies, int, error) {
	var lat benchLatencies
	expired := 0
	for start := 0; start < count; start += 1000 {
		var cmds []*redis.SliceCmd
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := start; i < min(start+1000, count); i++ {
				id := "drain-" + strconv.Itoa(i)
				cmds = append(cmds, p.HMGet(ctx, q.KeysOf(id).Tag+":res:"+id, "status", "expirationCount", "expiredAt"))
			}
			return nil
		})
		if err != nil {
			return nil, 0, fmt.Errorf("verify: %w", err)
		}
		for i, c := range cmds {
			v := c.Val()
			if len(v) != 3 || v[0] != "expired" || v[1] != "1" {
				return nil, 0, fmt.Errorf("verify: hold drain-%d is %v, want expired exactly once", start+i, v)
			}
			s, _ := v[2].(string)
			at, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, 0, errors.New("verify: expiredAt is not a number: " + s)
			}
			lat.add(time.UnixMilli(at).Sub(due))
			expired++
		}
	}
	return &lat, expired, nil
}
