package main

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigil-dev/vigil/gateway"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/lockclient"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	locks "github.com/vigil-dev/vigil/services/locks/service"
)

// The raw lock pair: SET NX PX, then compare-and-DEL, each one EVALSHA. Probes, not the lock
// service's scripts (those run inside the service this benchmark starts).
var (
	//go:embed ceiling_lock_acquire.lua
	ceilingLockAcquireLua string
	//go:embed ceiling_lock_release.lua
	ceilingLockReleaseLua string
)

// locksBench are the settings of `vigilbench locks`.
type locksBench struct {
	clients   int
	duration  time.Duration
	warmup    time.Duration
	conns     int
	rounds    int
	only      string
	workloads string
}

// locksWorkload is one table of `vigilbench locks`: its clients run on one resource when
// contended, else each on its own.
type locksWorkload struct {
	key, title string
	clients    int
	contended  bool
}

// locksClients are the rows of every workload, in order; the ratios are to the last row (the
// raw ceiling) and to bsm/redislock.
var locksClients = []string{
	"vigil gRPC unary", "vigil session", "vigil REST (gateway)", "vigil REST, Go http.Client",
	"redsync (in-process)", "bsm/redislock (in-process)", "raw EVALSHA pair (ceiling)",
}

// benchLocks measures acquire+release pairs per second and pair latency, uncontended (each
// client on its own resources) and contended (every client on one resource): the lock service
// over unary gRPC, over pkg/lockclient's session stream and over REST through the gateway,
// beside redsync, bsm/redislock and a bare EVALSHA pair against the same Redis in the same run.
func benchLocks(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	var o locksBench
	fs.IntVar(&o.clients, "clients", 32, "concurrent clients of the 32-client workloads")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measuring time per client, workload and round")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "warm-up of connections and scripts per Vigil client kind before measuring")
	fs.IntVar(&o.conns, "grpc-conns", 1, "gRPC connections the Vigil clients share, one session stream each (1, as one client process runs; measured fastest on 2 cores)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds per workload, interleaving the clients; each row is its median round by pairs/s")
	fs.StringVar(&o.only, "only", "", "measure only the clients whose name contains this")
	fs.StringVar(&o.workloads, "workloads", "uncontended_1,uncontended,contended", "the workloads to run, comma-separated: uncontended_1, uncontended, contended")
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	if o.clients <= 0 || o.conns <= 0 || o.rounds <= 0 || o.duration <= 0 {
		return fmt.Errorf("%w: --clients, --grpc-conns, --rounds and --duration must be positive", errUsage)
	}
	workloads := []locksWorkload{
		{"uncontended_1", "Uncontended, 1 client (latency of one pair, nothing queued)", 1, false},
		{"uncontended", fmt.Sprintf("Uncontended, %d clients, each on its own resources", o.clients), o.clients, false},
		{"contended", fmt.Sprintf("Contended: one resource, %d clients", o.clients), o.clients, true},
	}
	run := map[string]bool{}
	for _, name := range strings.Split(o.workloads, ",") {
		name = strings.TrimSpace(name)
		if !slices.ContainsFunc(workloads, func(w locksWorkload) bool { return w.key == name }) {
			return fmt.Errorf("%w: --workloads: unknown workload %q; use uncontended_1, uncontended or contended", errUsage, name)
		}
		run[name] = true
	}
	b, err := h.Redis(ctx)
	if err != nil {
		return err
	}
	rep := h.Report
	rep.Settings["clients"] = o.clients
	rep.Settings["duration"] = o.duration.String()
	rep.Settings["grpc_conns"] = o.conns
	rep.Settings["rounds"] = o.rounds
	if o.only != "" {
		rep.Settings["only"] = o.only
	}
	rep.Settings["workloads"] = o.workloads

	l, err := startLocksStack(ctx, h, b, o)
	if err != nil {
		return err
	}
	// Warm up connections and scripts once.
	if o.warmup > 0 {
		benchStage("warming up for %v per Vigil client kind", o.warmup)
		l.measure(ctx, "warmup", o.clients, o.warmup, l.grpcPair(l.many("w"), 0))
		l.measure(ctx, "warmup", o.clients, o.warmup, l.restPair(l.rest, l.many("w"), 0))
		l.measure(ctx, "warmup", o.clients, o.warmup, l.restPair(l.netHTTP, l.many("w"), 0))
		l.measure(ctx, "warmup", o.clients, o.warmup, l.sessionPair(l.many("ws"), false))
	}

	for _, w := range workloads {
		if !run[w.key] {
			continue
		}
		benchStage("%s: %d rounds of %v per client", w.title, o.rounds, o.duration)
		wait := int64(0)
		if w.contended {
			wait = 60000
		}
		// Rounds interleave the clients, so a burst of load from elsewhere on the machine hits
		// them alike. Every round uses fresh resource names: a pair cut at the end of a round
		// leaves its lock held.
		runs := make([][]locksResult, len(locksClients))
		for round := range o.rounds {
			res := func(name string) func(c, i int) string {
				if w.contended {
					return l.one(fmt.Sprintf("c%d-%s", round, name))
				}
				return l.many(fmt.Sprintf("u%d-%d-%s", w.clients, round, name))
			}
			pairs := []locksPair{
				l.grpcPair(res("grpc"), wait),
				l.sessionPair(res("session"), w.contended),
				l.restPair(l.rest, res("rest"), wait),
				l.restPair(l.netHTTP, res("resth"), wait),
				l.redsyncPair(res("rs"), w.contended),
				l.redislockPair(res("rl"), w.contended),
				l.rawPair(res("raw"), w.contended),
			}
			for i, pair := range pairs {
				if o.only != "" && !strings.Contains(locksClients[i], o.only) {
					continue
				}
				runs[i] = append(runs[i], l.measure(ctx, locksClients[i], w.clients, o.duration, pair))
			}
		}
		roundRatios(rep, w.key, w.title, runs)
		rows := make([]locksResult, 0, len(locksClients))
		for _, rs := range runs {
			if len(rs) == 0 {
				continue
			}
			slices.SortFunc(rs, func(a, b locksResult) int { return cmp.Compare(a.rate(), b.rate()) })
			rows = append(rows, rs[len(rs)/2])
		}
		locksTable(rep, w.key, w.title, rows)
	}
	rep.note("CPU/pair is this process's CPU (clients, and for Vigil the service and gateway too) plus redis-server's, per pair: the figure load from elsewhere disturbs least")
	rep.note("contended, Vigil's clients wait in the service's FIFO queue (waitMs 60000; the session with Mutex.Lock); redsync spins on TryLock, redislock retries every 1 ms, the raw pair spins on its script")
	if n := l.errors.Load(); n > 0 {
		rep.note("%d pairs failed (the first ones are on stderr)", n)
	}
	return nil
}

// roundRatios reports the ratios the aims are stated in, each as the median over the rounds of
// one client's pairs/s over another's in the same round: the machine's speed drifts between
// rounds, and a ratio taken within a round compares the clients, not the drift. runs are by
// locksClients, in round order.
func roundRatios(rep *benchReport, key, title string, runs [][]locksResult) {
	for _, r := range []struct{ key, num, den, title string }{
		{"rest_vs_grpc", "vigil REST (gateway)", "vigil gRPC unary", "vigil REST (gateway) / gRPC unary"},
		{"rest_nethttp_vs_grpc", "vigil REST, Go http.Client", "vigil gRPC unary", "vigil REST, Go http.Client / gRPC unary"},
		{"session_vs_redislock", "vigil session", "bsm/redislock (in-process)", "vigil session / bsm/redislock"},
		{"session_vs_grpc", "vigil session", "vigil gRPC unary", "vigil session / gRPC unary"},
	} {
		num, den := runs[slices.Index(locksClients, r.num)], runs[slices.Index(locksClients, r.den)]
		if len(num) == 0 || len(num) != len(den) {
			continue
		}
		ratios := make([]float64, 0, len(num))
		for i := range num {
			if d := den[i].rate(); d > 0 {
				ratios = append(ratios, num[i].rate()/d)
			}
		}
		if len(ratios) == 0 {
			continue
		}
		slices.Sort(ratios)
		rep.add(key+"_"+r.key, title+": "+r.title+", median of the rounds' ratios", ratios[len(ratios)/2], "x")
	}
}

// locksTable adds a workload's rows with their ratios to the raw ceiling and to bsm/redislock.
func locksTable(rep *benchReport, key, title string, rows []locksResult) {
	t := rep.table(key, title,
		benchColumn{"pairs/s", "pairs/s"}, benchColumn{"p50", "ms"}, benchColumn{"p99", "ms"}, benchColumn{"max", "ms"},
		benchColumn{"CPU/pair", "ms"}, benchColumn{"Redis CPU/pair", "ms"}, benchColumn{"× raw ceiling", "x"}, benchColumn{"× redislock", "x"}, benchColumn{"errors", "pairs"})
	var ceiling, redislockRate float64
	for _, r := range rows {
		switch r.name {
		case locksClients[len(locksClients)-1]:
			ceiling = r.rate()
		case "bsm/redislock (in-process)":
			redislockRate = r.rate()
		}
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, r := range rows {
		t.row(r.name, r.rate(), ms(r.p50), ms(r.p99), ms(r.max), ms(r.cpuPerPair()), ms(r.perPair(r.redisCPU)),
			ratio(r.rate(), ceiling), ratio(r.rate(), redislockRate), float64(r.errors))
	}
}

// locksPair does one acquire+release pair for client c, its i-th.
type locksPair func(ctx context.Context, c, i int) error

// locksResult is one client kind's measurement of one workload round.
type locksResult struct {
	name     string
	pairs    int64
	errors   int64
	elapsed  time.Duration
	p50, p99 time.Duration
	max      time.Duration
	cpu      time.Duration // this process's and redis-server's
	redisCPU time.Duration // redis-server's alone
}

func (r locksResult) rate() float64 { return float64(r.pairs) / r.elapsed.Seconds() }

func (r locksResult) cpuPerPair() time.Duration { return r.perPair(r.cpu) }

func (r locksResult) perPair(d time.Duration) time.Duration {
	if r.pairs == 0 {
		return 0
	}
	return d / time.Duration(r.pairs)
}

// locksStack is the lock service and the gateway started by the harness, the clients that
// measure them, and the in-process peers on their own connection pool to the same Redis.
type locksStack struct {
	redis    *benchRedis
	prefix   string
	clients  int
	lcs      []locksv1.LockServiceClient
	sessions []*lockclient.Client
	rest     *restClient   // the load tool's REST client (restclient.go)
	netHTTP  netHTTPClient // Go's http.Client, reported beside it
	rdb      *redis.Client
	rs       *redsync.Redsync
	rl       *redislock.Client
	acquire  *redisx.Script
	release  *redisx.Script
	errors   atomic.Int64
}

func startLocksStack(ctx context.Context, h *Harness, b *benchRedis, o locksBench) (*locksStack, error) {
	svc, err := locks.New(ctx, locks.Options{Core: server.Core{Redis: redisx.Config{URL: b.url}, Prefix: h.Prefix, Logger: quiet("locks")}})
	if err != nil {
		return nil, fmt.Errorf("lock service: %w", err)
	}
	addr := h.Serve(ctx, "locks", svc)
	l := &locksStack{redis: b, prefix: h.Prefix, clients: o.clients}
	if l.netHTTP.base, l.netHTTP.c, err = h.Gateway(ctx, gateway.Backends{Locks: addr}); err != nil {
		return nil, err
	}
	l.rest = newRestClient(l.netHTTP.base, 2*o.clients)
	var closers []func()
	// Unary clients and session clients (one lockclient.Client, so one stream, per
	// connection) share the same connections.
	for range o.conns {
		conn, err := grpcdial.New(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		s := lockclient.New(conn)
		l.lcs = append(l.lcs, locksv1.NewLockServiceClient(conn))
		l.sessions = append(l.sessions, s)
		closers = append(closers, func() { _ = s.Close(); _ = conn.Close() })
	}
	opt, err := redis.ParseURL(b.url)
	if err != nil {
		return nil, err
	}
	opt.PoolSize = 2 * o.clients
	l.rdb = redis.NewClient(opt)
	closers = append(closers, func() { _ = l.rdb.Close() }, l.netHTTP.c.CloseIdleConnections, l.rest.close)
	h.stack.onStop(func() {
		for _, c := range closers {
			c()
		}
	})
	l.rs = redsync.New(redsyncgoredis.NewPool(l.rdb))
	l.rl = redislock.New(l.rdb)
	l.acquire = redisx.NewScript("ceiling_lock_acquire.lua", ceilingLockAcquireLua)
	l.release = redisx.NewScript("ceiling_lock_release.lua", ceilingLockReleaseLua)
	benchStage("lock service on %s, gateway on %s (in process)", addr, l.netHTTP.base)
	return l, nil
}

// cpu is the CPU time used so far by this process and by redis-server, and by redis-server
// alone.
func (l *locksStack) cpu(ctx context.Context) (all, redis time.Duration) {
	r, _ := l.redis.serverCPU(ctx)
	return processCPU() + r, r
}

// measure runs pair from each client in a loop for d and collects pair latencies. A pair
// under way at the end finishes (and counts, with the time it took): none is cut, so no lock is
// left held and every error is a real one.
func (l *locksStack) measure(ctx context.Context, name string, clients int, d time.Duration, pair locksPair) locksResult {
	lat := make([][]time.Duration, clients)
	var errs atomic.Int64
	var wg sync.WaitGroup
	cpu0, redis0 := l.cpu(ctx)
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				t0 := time.Now()
				if err := pair(ctx, c, i); err != nil {
					errs.Add(1)
					if l.errors.Add(1) <= 3 {
						benchStage("%s: error after %v (pair took %v): %v", name, time.Since(start), time.Since(t0), err)
					}
					continue
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu, redisCPU := l.cpu(context.WithoutCancel(ctx))
	all := slices.Concat(lat...)
	slices.Sort(all)
	r := locksResult{name: name, pairs: int64(len(all)), errors: errs.Load(), elapsed: elapsed, cpu: cpu - cpu0, redisCPU: redisCPU - redis0}
	if len(all) > 0 {
		r.p50, r.p99, r.max = all[len(all)/2], all[len(all)*99/100], all[len(all)-1]
	}
	return r
}

// many gives each client its own 64 resources; one gives every client the same one.
func (l *locksStack) many(prefix string) func(c, i int) string {
	return func(c, i int) string { return fmt.Sprintf("%s-%d-%d", prefix, c, i%64) }
}

func (l *locksStack) one(name string) func(c, i int) string {
	return func(int, int) string { return name }
}

func owner(c int) string { return fmt.Sprintf("client-%d", c) }

const locksTTLMs = int64(30000)

func (l *locksStack) grpcPair(resource func(c, i int) string, wait int64) locksPair {
	return func(ctx context.Context, c, i int) error {
		lc := l.lcs[c%len(l.lcs)]
		r := resource(c, i)
		ttl := locksTTLMs
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

func (l *locksStack) sessionPair(resource func(c, i int) string, contended bool) locksPair {
	return func(ctx context.Context, c, i int) error {
		m := l.sessions[c%len(l.sessions)].Mutex(resource(c, i), lockclient.MutexOptions{Owner: owner(c), TTL: time.Duration(locksTTLMs) * time.Millisecond})
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

// post sends a JSON body to the gateway with client and decodes the 200 answer into out.
func post(ctx context.Context, client restDoer, path, body string, out any) error {
	code, raw, err := client.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("%s: %d %s", path, code, raw)
	}
	return json.Unmarshal(raw, out)
}

// restPair is the pair over REST, the bodies written and the answers read as a client would:
// JSON into typed structs.
func (l *locksStack) restPair(client restDoer, resource func(c, i int) string, wait int64) locksPair {
	return func(ctx context.Context, c, i int) error {
		r := "/locks/" + url.PathEscape(resource(c, i))
		owner := strconv.Quote(owner(c))
		var acquired struct {
			Acquired bool `json:"acquired"`
		}
		body := `{"owner":` + owner + `,"ttlMs":` + strconv.FormatInt(locksTTLMs, 10) + `,"waitMs":` + strconv.FormatInt(wait, 10) + `}`
		if err := post(ctx, client, r+"/acquire", body, &acquired); err != nil {
			return err
		}
		if !acquired.Acquired {
			return errors.New("not acquired")
		}
		var released struct {
			Released bool `json:"released"`
		}
		if err := post(ctx, client, r+"/release", `{"owner":`+owner+`}`, &released); err != nil {
			return err
		}
		if !released.Released {
			return errors.New("not released")
		}
		return nil
	}
}

// redsyncPair spins on TryLock when contended (its Lock sleeps 50-250 ms between tries).
func (l *locksStack) redsyncPair(resource func(c, i int) string, contended bool) locksPair {
	mutexes := make([]map[string]*redsync.Mutex, l.clients)
	for c := range mutexes {
		mutexes[c] = map[string]*redsync.Mutex{}
	}
	return func(ctx context.Context, c, i int) error {
		r := resource(c, i)
		m := mutexes[c][r]
		if m == nil {
			m = l.rs.NewMutex(l.prefix+":rs:"+r, redsync.WithExpiry(30*time.Second))
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

// redislockPair retries every millisecond when contended.
func (l *locksStack) redislockPair(resource func(c, i int) string, contended bool) locksPair {
	var o *redislock.Options
	if contended {
		o = &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)}
	}
	return func(ctx context.Context, c, i int) error {
		lk, err := l.rl.Obtain(ctx, l.prefix+":rl:"+resource(c, i), 30*time.Second, o)
		if err != nil {
			return err
		}
		return lk.Release(ctx)
	}
}

// rawPair spins on its SET NX script when contended.
func (l *locksStack) rawPair(resource func(c, i int) string, contended bool) locksPair {
	return func(ctx context.Context, c, i int) error {
		key := l.prefix + ":raw:" + resource(c, i)
		for {
			ok, err := l.acquire.Run(ctx, l.rdb, []string{key}, owner(c), locksTTLMs).Int()
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
		return l.release.Run(ctx, l.rdb, []string{key}, owner(c)).Err()
	}
}
