package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
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
	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/redisx"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

// reservationsBench are the settings of `vigil bench reservations`.
type reservationsBench struct {
	benchFlags
	count       int
	concurrency int
	duration    time.Duration
}

// benchReservations measures the reservations service through an in-process stack (the real
// service.Run and gateway.Run on loopback): 100,000 holds expiring at one instant through the
// service's own alarm handler, then creates per second over gRPC and over REST.
func benchReservations(ctx context.Context, args []string) (*benchReport, benchOutput, error) {
	var o reservationsBench
	fs := flag.NewFlagSet("vigil bench reservations", flag.ContinueOnError)
	o.register(fs)
	fs.IntVar(&o.count, "count", 100_000, "holds expiring at the same instant in the drain (0 skips it)")
	fs.IntVar(&o.concurrency, "concurrency", 32, "concurrent callers creating reservations")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each creates-per-second run (0 skips them)")
	if err := parseBenchFlags(fs, args); err != nil {
		return nil, benchOutput{}, err
	}
	if o.concurrency <= 0 || o.count < 0 {
		return nil, benchOutput{}, fmt.Errorf("%w: --concurrency must be positive and --count not negative", errUsage)
	}

	b, err := openBenchRedis(ctx, o.benchFlags)
	if err != nil {
		return nil, benchOutput{}, err
	}
	defer b.close()
	prefix := benchPrefix()
	defer b.deletePrefix(context.WithoutCancel(ctx), prefix)

	rep := newBenchReport("reservations")
	rep.Redis = b.about
	rep.Settings["count"] = o.count
	rep.Settings["concurrency"] = o.concurrency
	rep.Settings["duration"] = o.duration.String()

	st, err := startReservationsStack(ctx, b.url, prefix)
	if err != nil {
		return nil, benchOutput{}, err
	}
	defer st.stop()

	if o.count > 0 {
		// A create rate measured first sizes how far ahead the drain's holds must fall due.
		probe, err := benchCreateRate(ctx, "probe", min(o.duration, time.Second), o.concurrency, st.grpcCreate("probe-"))
		if err != nil {
			return nil, benchOutput{}, err
		}
		d, err := drainReservations(ctx, b, st, prefix, o.count, o.concurrency, probe.rate)
		if err != nil {
			return nil, benchOutput{}, err
		}
		rep.add("drain_seconds", fmt.Sprintf("drain %d holds due at once", o.count), d.elapsed.Seconds(), "s")
		rep.add("drain_throughput", "drain throughput", float64(o.count)/d.elapsed.Seconds(), "holds/s")
		rep.add("drain_redis_cpu_us", "drain: Redis CPU per hold", float64(d.redisCPU)/float64(time.Microsecond), "µs")
		rep.add("drain_go_cpu_us", "drain: service CPU per hold", float64(d.goCPU)/float64(time.Microsecond), "µs")
		rep.addLatencies("drain_expired_after", "expiredAt − due", d.lateness)
		rep.note("drain verified: %d holds expired, each exactly once (expirationCount 1); expiredAt is the handler's clock, in whole ms", d.expired)
		if d.startLate > 0 {
			rep.note("the load ran past its margin: the schedulers first saw the due holds %v after their due time", d.startLate)
		}
	}
	if o.duration > 0 {
		for _, via := range []struct {
			key, name string
			create    func(ctx context.Context, id string) error
		}{
			{"grpc", "gRPC", st.grpcCreate("grpc-")},
			{"rest", "REST", st.restCreate("rest-")},
		} {
			r, err := benchCreateRate(ctx, via.name, o.duration, o.concurrency, via.create)
			if err != nil {
				return nil, benchOutput{}, err
			}
			rep.add("creates_"+via.key, "creates over "+via.name, r.rate, "creates/s")
			rep.addLatencies("creates_"+via.key+"_latency", "create over "+via.name+" latency", r.latency)
		}
	}
	if n := st.retries.Load(); n > 0 {
		rep.note("%d calls answered Unavailable (the service's Redis timed out) and were repeated, as a client should", n)
	}
	return rep, benchOutput{json: o.json}, nil
}

// reservationsStack is the reservations service and the gateway, running in this process.
type reservationsStack struct {
	clock    *benchClock
	conn     *grpc.ClientConn
	client   reservationsv1.ReservationServiceClient
	http     *http.Client
	baseURL  string
	shards   int
	cancel   context.CancelFunc
	finished sync.WaitGroup
	retries  atomic.Int64 // calls repeated after Unavailable
}

// benchClock is the service's injected clock: real time, or a fixed instant while frozen.
type benchClock struct{ frozen atomic.Int64 } // UnixNano; 0 = real time

func (c *benchClock) Now() time.Time {
	if ns := c.frozen.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Now()
}

func startReservationsStack(ctx context.Context, redisURL, prefix string) (*reservationsStack, error) {
	st := &reservationsStack{clock: &benchClock{}, shards: 16}
	runCtx, cancel := context.WithCancel(ctx)
	st.cancel = cancel
	quiet := config.Logger("text", "warn")
	failed := make(chan error, 2)

	grpcUp := make(chan string, 1)
	st.finished.Add(1)
	go func() {
		defer st.finished.Done()
		svc, err := reservations.New(runCtx, reservations.Options{
			Redis: redisx.Config{URL: redisURL}, Prefix: prefix, Shards: st.shards,
			Now: st.clock.Now, Logger: quiet.With("service", "reservations"), AlarmLog: io.Discard,
		})
		if err == nil {
			grpcUp <- svc.Addr().String()
			err = svc.Serve(runCtx)
		}
		if err != nil && runCtx.Err() == nil {
			failed <- fmt.Errorf("reservations service: %w", err)
		}
	}()
	var grpcAddr string
	select {
	case grpcAddr = <-grpcUp:
	case err := <-failed:
		st.stop()
		return nil, err
	}

	httpUp := make(chan string, 1)
	st.finished.Add(1)
	go func() {
		defer st.finished.Done()
		err := gateway.Run(runCtx, gateway.Options{
			Addr: "127.0.0.1:0", Backends: gateway.Backends{Reservations: grpcAddr},
			Logger: quiet.With("service", "gateway"),
		}, func(a net.Addr) { httpUp <- a.String() })
		if err != nil && runCtx.Err() == nil {
			failed <- fmt.Errorf("gateway: %w", err)
		}
	}()
	select {
	case addr := <-httpUp:
		st.baseURL = "http://" + addr
	case err := <-failed:
		st.stop()
		return nil, err
	}

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		st.stop()
		return nil, err
	}
	st.conn = conn
	st.client = reservationsv1.NewReservationServiceClient(conn)
	st.http = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 30 * time.Second}
	benchStage("reservations service on %s, gateway on %s (in process)", grpcAddr, st.baseURL)
	return st, nil
}

func (st *reservationsStack) stop() {
	if st.conn != nil {
		_ = st.conn.Close()
	}
	st.cancel()
	st.finished.Wait()
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
func (st *reservationsStack) restCreate(prefix string) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		return st.retryUnavailable(ctx, func() error { return st.restPost(ctx, "/reservations/"+prefix+id, `{"ttlSeconds":3600}`) })
	}
}

// restPost posts a JSON body to the gateway; a 503 is Unavailable, as gRPC would say.
func (st *reservationsStack) restPost(ctx context.Context, path, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.baseURL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := st.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable:
		return status.Error(codes.Unavailable, string(msg))
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("POST %s: %s %s", path, resp.Status, msg)
	}
	return nil
}

// benchRate is a creates-per-second run.
type benchRate struct {
	rate    float64
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
	return benchRate{rate: float64(lat.len()) / elapsed.Seconds(), latency: &lat}, nil
}

// reservationsDrain is what the drain measured.
type reservationsDrain struct {
	elapsed   time.Duration   // from the due instant until the last hold was expired and acked
	lateness  *benchLatencies // expiredAt − due, per hold
	expired   int
	startLate time.Duration
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

	goCPU0 := processCPU()
	redisCPU0, err := b.serverCPU(ctx)
	if err != nil {
		return reservationsDrain{}, err
	}
	var startLate time.Duration
	if late := time.Since(due); late > -2*time.Second {
		startLate = max(late+2*time.Second, 0)
	}
	benchStage("drain: all created; waiting for the due time (%v)", time.Until(due).Round(time.Millisecond))
	var left atomic.Int64
	left.Store(int64(count))
	stop = benchProgress(250*time.Millisecond, func() string { return fmt.Sprintf("drain: %d alarms left", left.Load()) })
	defer stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(time.Until(due) + 5*time.Minute)
	var emptyAt time.Time
	for {
		n, err := pendingAlarms(ctx, q)
		if err != nil {
			// A busy machine can time a read out; the next poll tries again.
			benchStage("drain: counting alarms: %v (trying again)", err)
			n = left.Load()
		} else {
			n -= before
			left.Store(n)
		}
		if err == nil && n == 0 {
			emptyAt = time.Now()
			break
		}
		if time.Now().After(deadline) {
			return reservationsDrain{}, fmt.Errorf("drain: %d holds still had alarms 5 minutes after their due time", n)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return reservationsDrain{}, ctx.Err()
		}
	}
	stop()
	goCPU := processCPU() - goCPU0
	redisCPU1, err := b.serverCPU(ctx)
	if err != nil {
		return reservationsDrain{}, err
	}
	benchStage("drain: every alarm handled %v after the due time", emptyAt.Sub(due).Round(time.Millisecond))

	lat, expired, err := verifyReservationsExpired(ctx, b.rdb, q, count, due)
	if err != nil {
		return reservationsDrain{}, err
	}
	return reservationsDrain{elapsed: emptyAt.Sub(due), lateness: lat, expired: expired, startLate: startLate,
		goCPU: goCPU / time.Duration(count), redisCPU: (redisCPU1 - redisCPU0) / time.Duration(count)}, nil
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
