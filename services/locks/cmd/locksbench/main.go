// Command locksbench measures the lock service: acquire+release pairs per second and pair
// latency, uncontended (each client on its own resources) and contended (every client on one
// resource), through unary gRPC, through pkg/lockclient's session stream and through REST,
// beside redsync, bsm/redislock and a bare EVALSHA compare-and-set against the same Redis in
// the same run. It is not part of the test suite.
//
//	go run ./services/locks/cmd/locksbench -duration 5s -clients 32
//
// Without -redis-url it starts redis-server from PATH (AOF on, appendfsync everysec) on a free
// port and stops it at the end.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigil-dev/vigil/gateway"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/lockclient"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/services/locks/service"
)

func main() {
	redisURL := flag.String("redis-url", "", "Redis to use (default: start redis-server from PATH)")
	clients := flag.Int("clients", 32, "concurrent clients")
	duration := flag.Duration("duration", 5*time.Second, "measuring time per workload")
	conns := flag.Int("grpc-conns", 4, "gRPC connections the clients share")
	flag.IntVar(&rounds, "rounds", 3, "rounds per workload; each row reports its median round")
	only := flag.String("only", "", "run only the workloads whose client name contains this")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the measured workloads here")
	flag.Parse()
	onlyFilter = *only
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if err := run(*redisURL, *clients, *duration, *conns); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// cpuNow is the CPU time used so far by this process and by redis-server.
var cpuNow = func() time.Duration { return 0 }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU reads redis-server's CPU time from INFO cpu.
func redisCPU(rdb *redis.Client) time.Duration {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// rounds is how many times each workload runs (-rounds).
var rounds int

// onlyFilter keeps only the workloads whose name contains it (-only).
var onlyFilter string

// result is one workload's measurement.
type result struct {
	name     string
	pairs    int64
	errors   int64
	elapsed  time.Duration
	p50, p99 time.Duration
	max      time.Duration
	// cpu is the CPU time the bench process (clients, and for vigil the service and gateway)
	// and redis-server spent: the figure that load from elsewhere disturbs least.
	cpu time.Duration
}

// cpuPerPair is the CPU time one pair cost.
func (r result) cpuPerPair() time.Duration {
	if r.pairs == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.pairs)
}

func (r result) rate() float64 { return float64(r.pairs) / r.elapsed.Seconds() }

// measure runs pair from each client in a loop for d and collects pair latencies.
func measure(name string, clients int, d time.Duration, pair func(ctx context.Context, client, i int) error) result {
	if onlyFilter != "" && name != "warmup" && !strings.Contains(name, onlyFilter) {
		return result{name: name, elapsed: time.Second}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	deadline, _ := ctx.Deadline()
	lat := make([][]time.Duration, clients)
	var errs atomic.Int64
	var wg sync.WaitGroup
	cpu0 := cpuNow()
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				t0 := time.Now()
				if err := pair(ctx, c, i); err != nil {
					// Calls cut by the end of the run are not errors.
					if time.Now().Before(deadline) && errs.Add(1) <= 3 {
						fmt.Fprintf(os.Stderr, "%s: error after %v (pair took %v): %v\n", name, time.Since(start), time.Since(t0), err)
					}
					continue
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuNow() - cpu0
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := result{name: name, pairs: int64(len(all)), errors: errs.Load(), elapsed: elapsed, cpu: cpu}
	if len(all) > 0 {
		r.p50, r.p99, r.max = all[len(all)/2], all[len(all)*99/100], all[len(all)-1]
	}
	return r
}

func run(redisURL string, clients int, d time.Duration, nconns int) error {
	if redisURL == "" {
		url, stop, err := startRedis()
		if err != nil {
			return err
		}
		defer stop()
		redisURL = url
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)

	// The lock service and the gateway, in-process, on real listeners.
	svc, err := service.New(ctx, service.Options{Redis: redisx.Config{URL: redisURL}, Prefix: "bench", Logger: quiet})
	if err != nil {
		return fmt.Errorf("lock service: %w", err)
	}
	svcDone := make(chan error, 1)
	go func() { svcDone <- svc.Serve(ctx) }()
	addr := svc.Addr().String()
	gw, err := gateway.New(ctx, gateway.Options{Backends: gateway.Backends{Locks: addr}, Logger: quiet})
	if err != nil {
		return err
	}
	defer gw.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	defer hs.Close()
	restBase := "http://" + lis.Addr().String()
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConns: 4 * clients, MaxIdleConnsPerHost: 4 * clients}}

	// Unary clients and session clients (one lockclient.Client, so one stream, per connection)
	// share the same nconns connections.
	lcs := make([]locksv1.LockServiceClient, nconns)
	sessions := make([]*lockclient.Client, nconns)
	for i := range lcs {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		lcs[i] = locksv1.NewLockServiceClient(conn)
		sessions[i] = lockclient.New(conn)
		defer sessions[i].Close()
	}

	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	opt.PoolSize = 2 * clients
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	cpuNow = func() time.Duration { return processCPU() + redisCPU(rdb) }
	rs := redsync.New(redsyncgoredis.NewPool(rdb))
	rl := redislock.New(rdb)
	rawAcquire := redisx.NewScript("raw-acquire.lua", `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0`)
	rawRelease := redisx.NewScript("raw-release.lua", `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

	owner := func(c int) string { return fmt.Sprintf("client-%d", c) }
	ttl := int64(30000)

	grpcPair := func(resource func(c, i int) string, wait int64) func(ctx context.Context, c, i int) error {
		return func(ctx context.Context, c, i int) error {
			lc := lcs[c%len(lcs)]
			r := resource(c, i)
			req := &locksv1.AcquireRequest{Resource: r, Owner: owner(c), TtlMs: &ttl}
			if wait > 0 {
				req.WaitMs = &wait
			}
			res, err := lc.Acquire(ctx, req)
			if err != nil {
				return err
			}
			if !res.GetAcquired() {
				return errors.New("not acquired")
			}
			_, err = lc.Release(ctx, &locksv1.ReleaseRequest{Resource: r, Owner: owner(c)})
			return err
		}
	}
	sessionPair := func(resource func(c, i int) string, contended bool) func(ctx context.Context, c, i int) error {
		return func(ctx context.Context, c, i int) error {
			m := sessions[c%len(sessions)].Mutex(resource(c, i), lockclient.MutexOptions{Owner: owner(c), TTL: time.Duration(ttl) * time.Millisecond})
			var err error
			if contended {
				err = m.Lock(ctx)
			} else {
				err = m.TryLock(ctx)
			}
			if err != nil {
				return err
			}
			return m.Unlock(ctx)
		}
	}
	post := func(ctx context.Context, path string, body any) (map[string]any, error) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, "POST", restBase+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		res, err := httpc.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %d %s", path, res.StatusCode, raw)
		}
		var m map[string]any
		return m, json.Unmarshal(raw, &m)
	}
	restPair := func(resource func(c, i int) string, wait int64) func(ctx context.Context, c, i int) error {
		return func(ctx context.Context, c, i int) error {
			r := resource(c, i)
			m, err := post(ctx, "/locks/"+url.PathEscape(r)+"/acquire", map[string]any{"owner": owner(c), "ttlMs": ttl, "waitMs": wait})
			if err != nil {
				return err
			}
			if m["acquired"] != true {
				return errors.New("not acquired")
			}
			_, err = post(ctx, "/locks/"+url.PathEscape(r)+"/release", map[string]any{"owner": owner(c)})
			return err
		}
	}
	// redsync spins on TryLock (its Lock sleeps 50-250ms between tries); redislock retries
	// every millisecond; the raw EVALSHA pair spins on its SET NX script.
	redsyncPair := func(resource func(c, i int) string, contended bool) func(ctx context.Context, c, i int) error {
		mutexes := make([]map[string]*redsync.Mutex, clients)
		for c := range mutexes {
			mutexes[c] = map[string]*redsync.Mutex{}
		}
		return func(ctx context.Context, c, i int) error {
			r := resource(c, i)
			m := mutexes[c][r]
			if m == nil {
				m = rs.NewMutex("rs:"+r, redsync.WithExpiry(30*time.Second))
				mutexes[c][r] = m
			}
			for {
				err := m.TryLockContext(ctx)
				if err == nil {
					break
				}
				if !contended || ctx.Err() != nil {
					return err
				}
			}
			_, err := m.UnlockContext(ctx)
			return err
		}
	}
	redislockPair := func(resource func(c, i int) string, contended bool) func(ctx context.Context, c, i int) error {
		var o *redislock.Options
		if contended {
			o = &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)}
		}
		return func(ctx context.Context, c, i int) error {
			l, err := rl.Obtain(ctx, "rl:"+resource(c, i), 30*time.Second, o)
			if err != nil {
				return err
			}
			return l.Release(ctx)
		}
	}
	rawPair := func(resource func(c, i int) string, contended bool) func(ctx context.Context, c, i int) error {
		return func(ctx context.Context, c, i int) error {
			key := "raw:" + resource(c, i)
			for {
				ok, err := rawAcquire.Run(ctx, rdb, []string{key}, owner(c), ttl).Int()
				if err != nil {
					return err
				}
				if ok == 1 {
					break
				}
				if !contended {
					return errors.New("not acquired")
				}
			}
			return rawRelease.Run(ctx, rdb, []string{key}, owner(c)).Err()
		}
	}

	many := func(prefix string) func(c, i int) string {
		return func(c, i int) string { return fmt.Sprintf("%s-%d-%d", prefix, c, i%64) }
	}
	one := func(name string) func(c, i int) string { return func(int, int) string { return name } }

	// Warm up connections, scripts and the JIT-free paths once.
	measure("warmup", clients, time.Second, grpcPair(many("w"), 0))
	measure("warmup", clients, time.Second, restPair(many("w"), 0))
	measure("warmup", clients, time.Second, sessionPair(many("ws"), false))

	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("clients=%d duration=%s rounds=%d gomaxprocs=%d redis=%s loadavg=%s\n\n", clients, d, rounds, runtimeProcs(), redisURL, strings.TrimSpace(string(load)))
	for _, w := range []struct {
		title     string
		clients   int
		contended bool
	}{
		{"Uncontended, 1 client (latency of one pair, nothing queued)", 1, false},
		{fmt.Sprintf("Uncontended, %d clients, each on its own resources", clients), clients, false},
		{fmt.Sprintf("Contended: one resource, %d clients", clients), clients, true},
	} {
		wait := int64(0)
		if w.contended {
			wait = 60000
		}
		names := []string{"vigil gRPC unary", "vigil session", "vigil REST (gateway)", "redsync (in-process)", "bsm/redislock (in-process)", "raw EVALSHA pair (ceiling)"}
		// Rounds interleave the clients, so a burst of load from elsewhere on the machine
		// hits them alike; each row is its median round by throughput. Every round uses fresh
		// resource names: a pair cut at the end of a round leaves its lock held.
		runs := make([][]result, len(names))
		for round := range rounds {
			res := func(name string) func(c, i int) string {
				if w.contended {
					return one(fmt.Sprintf("c%d-%s", round, name))
				}
				return many(fmt.Sprintf("u%d-%d-%s", w.clients, round, name))
			}
			pairs := []func(ctx context.Context, c, i int) error{
				grpcPair(res("grpc"), wait),
				sessionPair(res("session"), w.contended),
				restPair(res("rest"), wait),
				redsyncPair(res("rs"), w.contended),
				redislockPair(res("rl"), w.contended),
				rawPair(res("raw"), w.contended),
			}
			for i, pair := range pairs {
				runs[i] = append(runs[i], measure(names[i], w.clients, d, pair))
			}
		}
		rows := make([]result, len(names))
		for i, rs := range runs {
			slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(a.rate(), b.rate()) })
			rows[i] = rs[len(rs)/2]
		}
		printTable(w.title, rows)
	}
	cancel()
	<-svcDone
	return nil
}

// printTable prints rows; the ratios are to the last row (the raw ceiling) and to the
// bsm/redislock row.
func printTable(title string, rows []result) {
	ceiling, redislockRate := max(rows[len(rows)-1].rate(), 1), 1.0
	for _, r := range rows {
		if strings.HasPrefix(r.name, "bsm/redislock") {
			redislockRate = max(r.rate(), 1)
		}
	}
	fmt.Printf("%s\n\n", title)
	fmt.Println("| client | pairs/s | p50 | p99 | max | CPU/pair | × raw ceiling | × redislock | errors |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Printf("| %s | %.0f | %s | %s | %s | %s | %.2f | %.2f | %d |\n", r.name, r.rate(), round(r.p50), round(r.p99),
			round(r.max), round(r.cpuPerPair()), r.rate()/ceiling, r.rate()/redislockRate, r.errors)
	}
	fmt.Println()
}

func round(d time.Duration) string {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

// startRedis runs redis-server from PATH on a free port with AOF on and returns its URL.
func startRedis() (string, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := lis.Addr().(*net.TCPAddr).Port
	_ = lis.Close()
	dir, err := os.MkdirTemp("", "locksbench-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("redis-server", "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start redis-server (or pass -redis-url): %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = os.RemoveAll(dir) }
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	opt, _ := redis.ParseURL(url)
	c := redis.NewClient(opt)
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c.Ping(context.Background()).Err() == nil {
			return url, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("redis-server did not answer within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
