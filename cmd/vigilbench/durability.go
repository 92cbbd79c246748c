package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	chatservice "github.com/vigil-dev/vigil/services/chat/service"
	locks "github.com/vigil-dev/vigil/services/locks/service"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

// durabilityModes are the rows of every durability table, in order; ratios are to the first.
var durabilityModes = []redisx.Durability{redisx.Async, redisx.Replica, redisx.Fsync}

// durabilityWorkload is one table of `vigilbench durability`, with the aims issue 43 set for
// replica against async in the same run.
type durabilityWorkload struct {
	key, title string
	minRate    float64 // replica's throughput at least this × async's
	op         func(s *durabilityServices) durabilityOp
}

// durabilityOp is one operation of client c, its i-th.
type durabilityOp func(ctx context.Context, c, i int) error

// durabilityServices are one durability mode's services, each on its own keys.
type durabilityServices struct {
	mode  redisx.Durability
	res   reservationsv1.ReservationServiceClient
	locks locksv1.LockServiceClient
	chat  chatv1.ChatServiceClient
	round int
}

// benchDurability measures what Config.Durability costs: reservations creates, lock pairs
// (uncontended and contended) and chat posts over gRPC, each against a reservations, locks and
// chat service per durability (async, replica, fsync) on one primary with two replicas, all
// redis-server children of this process. The nodes run appendonly yes; appendfsync is set to
// everysec for the async and replica rows and to always for the fsync rows (CONFIG SET on every
// node before each row), so each mode is measured on the settings it would be deployed with.
// Rounds interleave the modes workload by workload; beside the uncontended locks, an etcd
// server started here (fsyncing every commit) measures concurrency.Mutex pairs.
func benchDurability(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	var (
		clients  int
		duration time.Duration
		rounds   int
		timeout  time.Duration
		etcdBin  string
	)
	fs.IntVar(&clients, "clients", 32, "concurrent clients of every workload")
	fs.DurationVar(&duration, "duration", 3*time.Second, "measuring time per workload, mode and round")
	fs.IntVar(&rounds, "rounds", 3, "rounds, each measuring every mode of every workload once; a row sums its rounds")
	fs.DurationVar(&timeout, "redis-timeout", 0, "the services' Redis timeout (redisx.Config.Timeout; WAIT waits half of it); 0: the services' default")
	fs.StringVar(&etcdBin, "etcd", "etcd", "the etcd server binary measured beside the uncontended locks (Debian: etcd-server); none: no etcd row")
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	if clients <= 0 || duration <= 0 || rounds <= 0 || timeout < 0 {
		return fmt.Errorf("%w: --clients, --duration and --rounds must be positive, --redis-timeout not negative", errUsage)
	}
	if h.flags.redisURL != "" {
		return fmt.Errorf("%w: durability starts its own primary and two replicas; leave out --redis-url", errUsage)
	}
	if etcdBin != "none" {
		path, err := exec.LookPath(etcdBin)
		if err != nil {
			return fmt.Errorf("%w: --etcd %q: no such program (Debian: apt-get install etcd-server), or --etcd none", errUsage, etcdBin)
		}
		etcdBin = path
	}
	rep := h.Report
	rep.Settings["clients"] = clients
	rep.Settings["duration"] = duration.String()
	rep.Settings["rounds"] = rounds
	if timeout > 0 {
		rep.Settings["redis_timeout"] = timeout.String()
	}

	nodes, err := startReplicatedRedis(ctx, 2)
	if err != nil {
		return err
	}
	h.stack.onStop(nodes.stop) // after the services, which stop first
	rep.Redis = nodes.about
	// The fsync services check the nodes' settings at start: start every service on
	// appendfsync always, then set each row's.
	if err := nodes.setAppendfsync(ctx, "always"); err != nil {
		return err
	}
	svcs := make([]*durabilityServices, len(durabilityModes))
	for i, mode := range durabilityModes {
		if svcs[i], err = startDurabilityServices(ctx, h, nodes.url, mode, timeout); err != nil {
			return err
		}
	}
	// Beside etcd (one member), fsync on one Redis with no replica: one node putting each
	// commit on disk, as etcd does.
	var etcd *etcdLocks
	var lone *durabilityServices
	if etcdBin != "none" {
		if etcd, err = startEtcd(ctx, etcdBin, clients); err != nil {
			return err
		}
		defer etcd.stop()
		rep.Settings["etcd"] = etcd.about
		addr, stop, err := startRedisChild(ctx, []string{"--bind", "127.0.0.1", "--save", "", "--daemonize", "no", "--logfile", "",
			"--appendonly", "yes", "--appendfsync", "always", "--no-appendfsync-on-rewrite", "no"})
		if err != nil {
			return err
		}
		h.stack.onStop(stop)
		if lone, err = startDurabilityServices(ctx, h, "redis://"+addr+"/0", redisx.Fsync, timeout); err != nil {
			return err
		}
	}

	workloads := []durabilityWorkload{
		{"creates", "Reservations creates over gRPC", 0.7, func(s *durabilityServices) durabilityOp { return s.create }},
		{"locks_uncontended", fmt.Sprintf("Lock pairs over gRPC, uncontended: %d clients, each on its own resources", clients), 0.7,
			func(s *durabilityServices) durabilityOp { return s.lockPair(false) }},
		{"locks_contended", fmt.Sprintf("Lock pairs over gRPC, contended: %d clients on one resource (FIFO queue)", clients), 0.5,
			func(s *durabilityServices) durabilityOp { return s.lockPair(true) }},
		{"posts", "Chat posts over gRPC (PostMessage with a postId, 8 rooms)", 0.7, func(s *durabilityServices) durabilityOp { return s.post }},
	}
	results := make([][]*durabilityResult, len(workloads))
	for w := range workloads {
		results[w] = make([]*durabilityResult, len(durabilityModes))
		for m := range durabilityModes {
			results[w][m] = &durabilityResult{}
		}
	}
	etcdResult, loneResult := &durabilityResult{}, &durabilityResult{}
	for round := range rounds {
		for w, wl := range workloads {
			for m, s := range svcs {
				fsync := "everysec"
				if s.mode == redisx.Fsync {
					fsync = "always"
				}
				if err := nodes.setAppendfsync(ctx, fsync); err != nil {
					return err
				}
				s.round = round
				benchStage("round %d of %d: %s, %s (appendfsync %s), %v", round+1, rounds, wl.key, s.mode, fsync, duration)
				results[w][m].measure(ctx, clients, duration, wl.op(s))
			}
			if wl.key == "locks_uncontended" && etcd != nil {
				benchStage("round %d of %d: %s, etcd concurrency.Mutex, %v", round+1, rounds, wl.key, duration)
				etcdResult.measure(ctx, clients, duration, etcd.pair(round))
				benchStage("round %d of %d: %s, fsync on one Redis (no replica), %v", round+1, rounds, wl.key, duration)
				lone.round = round
				loneResult.measure(ctx, clients, duration, wl.op(lone))
			}
		}
	}

	for w, wl := range workloads {
		t := rep.table(wl.key, wl.title,
			benchColumn{"ops/s", "ops/s"}, benchColumn{"p50", "ms"}, benchColumn{"p99", "ms"}, benchColumn{"max", "ms"},
			benchColumn{"× async ops/s", "x"}, benchColumn{"× async p99", "x"}, benchColumn{"errors", "ops"})
		async := results[w][0]
		for m, mode := range durabilityModes {
			r := results[w][m]
			t.row(string(mode), r.rate(), r.lat.percentile(50), r.lat.percentile(99), r.lat.percentile(100),
				ratioOf(r.rate(), async.rate()), ratioOf(r.lat.percentile(99), async.lat.percentile(99)), float64(r.errors.Load()))
		}
		if wl.key == "locks_uncontended" && etcd != nil {
			for _, r := range []struct {
				name string
				r    *durabilityResult
			}{{"fsync, one Redis (no replica)", loneResult}, {"etcd concurrency.Mutex (one member)", etcdResult}} {
				t.row(r.name, r.r.rate(), r.r.lat.percentile(50), r.r.lat.percentile(99), r.r.lat.percentile(100),
					ratioOf(r.r.rate(), async.rate()), ratioOf(r.r.lat.percentile(99), async.lat.percentile(99)), float64(r.r.errors.Load()))
			}
		}
		replica := results[w][1]
		rateX := ratioOf(replica.rate(), async.rate())
		p99X := ratioOf(replica.lat.percentile(99), async.lat.percentile(99))
		rep.add(wl.key+"_replica_vs_async", wl.key+": replica / async ops/s", rateX, "x")
		rep.add(wl.key+"_replica_p99_vs_async", wl.key+": replica / async p99", p99X, "x")
		rep.add(wl.key+"_fsync_vs_async", wl.key+": fsync / async ops/s", ratioOf(results[w][2].rate(), async.rate()), "x")
		rep.note("%s: replica keeps %.2f× async's ops/s (aim ≥ %.1f×: %s) at %.2f× its p99 (aim ≤ 1.5×: %s)",
			wl.key, rateX, wl.minRate, verdict(rateX >= wl.minRate), p99X, verdict(p99X <= 1.5))
		if wl.key == "locks_uncontended" && etcd != nil {
			x := ratioOf(results[w][2].rate(), etcdResult.rate())
			rep.add("locks_fsync_vs_etcd", "locks uncontended: fsync / etcd concurrency.Mutex pairs/s", x, "x")
			rep.note("locks uncontended: fsync keeps %.2f× etcd's concurrency.Mutex pairs/s (aim ≥ 2×: %s)", x, verdict(x >= 2))
			y := ratioOf(loneResult.rate(), etcdResult.rate())
			rep.add("locks_fsync_single_vs_etcd", "locks uncontended: fsync on one Redis / etcd concurrency.Mutex pairs/s", y, "x")
			rep.note("locks uncontended: fsync on one Redis with no replica keeps %.2f× etcd's pairs/s (one node fsyncing each commit on both sides)", y)
		}
	}
	rep.note("one primary and two replicas (redis-server children on loopback, appendonly yes, no-appendfsync-on-rewrite no); " +
		"appendfsync everysec for the async and replica rows, always for the fsync rows; every node, service, etcd and client shares this machine's CPUs")
	return nil
}

func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// durabilityResult sums one row's rounds.
type durabilityResult struct {
	n       int64
	errors  atomic.Int64
	elapsed time.Duration
	lat     benchLatencies
}

func (r *durabilityResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.n) / r.elapsed.Seconds()
}

// measure runs op from each of clients in a loop for d. An operation under way at the end
// finishes and counts, so no lock is left held; a failed one is counted, the first few shown.
func (r *durabilityResult) measure(ctx context.Context, clients int, d time.Duration, op durabilityOp) {
	var wg sync.WaitGroup
	var n atomic.Int64
	start := time.Now()
	deadline := start.Add(d)
	for c := range clients {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				t0 := time.Now()
				if err := op(ctx, c, i); err != nil {
					if r.errors.Add(1) <= 3 {
						benchStage("error after %v: %v", time.Since(t0), err)
					}
					continue
				}
				r.lat.add(time.Since(t0))
				n.Add(1)
			}
		})
	}
	wg.Wait()
	r.elapsed += time.Since(start)
	r.n += n.Load()
}

func startDurabilityServices(ctx context.Context, h *Harness, url string, mode redisx.Durability, timeout time.Duration) (*durabilityServices, error) {
	core := func(name string) server.Core {
		return server.Core{
			Redis:      redisx.Config{URL: url, Durability: mode, Timeout: timeout},
			Prefix:     h.Prefix + "-" + string(mode),
			Logger:     quiet(name + "-" + string(mode)),
			Registerer: prometheus.NewRegistry(),
		}
	}
	s := &durabilityServices{mode: mode}
	dial := func(name string, svc servable) (*grpc.ClientConn, error) {
		conn, err := grpcdial.New(h.Serve(ctx, name, svc), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		h.stack.onStop(func() { _ = conn.Close() })
		return conn, nil
	}
	res, err := reservations.New(ctx, reservations.Options{Core: core("reservations")})
	if err != nil {
		return nil, fmt.Errorf("reservations service (%s): %w", mode, err)
	}
	conn, err := dial("reservations", res)
	if err != nil {
		return nil, err
	}
	s.res = reservationsv1.NewReservationServiceClient(conn)
	lk, err := locks.New(ctx, locks.Options{Core: core("locks")})
	if err != nil {
		return nil, fmt.Errorf("lock service (%s): %w", mode, err)
	}
	if conn, err = dial("locks", lk); err != nil {
		return nil, err
	}
	s.locks = locksv1.NewLockServiceClient(conn)
	ch, err := chatservice.New(ctx, chatservice.Options{Core: core("chat")})
	if err != nil {
		return nil, fmt.Errorf("chat service (%s): %w", mode, err)
	}
	if conn, err = dial("chat", ch); err != nil {
		return nil, err
	}
	s.chat = chatv1.NewChatServiceClient(conn)
	benchStage("reservations, locks and chat services with durability %s", mode)
	return s, nil
}

// create creates a hold for an hour; a hold's id is new in every round.
func (s *durabilityServices) create(ctx context.Context, c, i int) error {
	_, err := s.res.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{
		ReservationId: fmt.Sprintf("r%d-c%d-%d", s.round, c, i), TtlSeconds: 3600})
	return err
}

// lockPair acquires and releases, each client on its own 64 resources, or every client on
// one resource of the round, waiting in its queue.
func (s *durabilityServices) lockPair(contended bool) durabilityOp {
	return func(ctx context.Context, c, i int) error {
		resource := fmt.Sprintf("u%d-%d-%d", s.round, c, i%64)
		ttl, wait := locksTTLMs, int64(0)
		req := &locksv1.AcquireRequest{Resource: resource, Owner: owner(c), TtlMs: &ttl}
		if contended {
			resource, wait = fmt.Sprintf("c%d", s.round), 60000
			req.Resource, req.WaitMs = resource, &wait
		}
		got, err := s.locks.Acquire(ctx, req)
		if err != nil {
			return err
		}
		if !got.GetAcquired() {
			return errors.New("not acquired")
		}
		_, err = s.locks.Release(ctx, &locksv1.ReleaseRequest{Resource: resource, Owner: owner(c)})
		return err
	}
}

// post posts a short message with a postId, as Vigil's clients do.
func (s *durabilityServices) post(ctx context.Context, c, i int) error {
	_, err := s.chat.PostMessage(ctx, &chatv1.PostMessageRequest{
		Room: fmt.Sprintf("room-%d", c%8), UserId: owner(c), Username: owner(c),
		Body: "durability bench message " + strconv.Itoa(i), PostId: fmt.Sprintf("p%d-%d-%d", s.round, c, i)})
	return err
}

// replicatedRedis is a primary and its replicas, redis-server children of this process.
type replicatedRedis struct {
	url   string
	addrs []string
	about string
	stops []func()
}

func (r *replicatedRedis) stop() {
	for i := len(r.stops) - 1; i >= 0; i-- {
		r.stops[i]()
	}
}

// startReplicatedRedis starts a primary and replicas replicas of it, with AOF on, and waits
// until every replica's link is up.
func startReplicatedRedis(ctx context.Context, replicas int) (*replicatedRedis, error) {
	base := []string{"--bind", "127.0.0.1", "--save", "", "--daemonize", "no", "--logfile", "",
		"--appendonly", "yes", "--appendfsync", "everysec", "--no-appendfsync-on-rewrite", "no"}
	r := &replicatedRedis{}
	primary, stop, err := startRedisChild(ctx, base)
	if err != nil {
		return nil, err
	}
	r.addrs, r.stops = append(r.addrs, primary), append(r.stops, stop)
	host, port, _ := net.SplitHostPort(primary)
	for range replicas {
		addr, stop, err := startRedisChild(ctx, append(slices.Clone(base), "--replicaof", host, port))
		if err != nil {
			r.stop()
			return nil, err
		}
		r.addrs, r.stops = append(r.addrs, addr), append(r.stops, stop)
	}
	c := redis.NewClient(&redis.Options{Addr: primary})
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:"+strconv.Itoa(replicas)) &&
			strings.Count(info, "state=online") == replicas {
			break
		}
		if time.Now().After(deadline) {
			r.stop()
			return nil, fmt.Errorf("the replicas of %s did not come online within 30s: %v %s", primary, err, info)
		}
		select {
		case <-ctx.Done():
			r.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond): // waiting for the replicas' initial sync
		}
	}
	r.url = "redis://" + primary + "/0"
	version := "?"
	if info, err := c.Info(ctx, "server").Result(); err == nil {
		version = infoLine(info, "redis_version")
	}
	r.about = fmt.Sprintf("redis %s primary at %s with replicas at %s (children of this process, appendonly yes)",
		version, primary, strings.Join(r.addrs[1:], ", "))
	benchStage("%s", r.about)
	return r, nil
}

// setAppendfsync sets every node's appendfsync.
func (r *replicatedRedis) setAppendfsync(ctx context.Context, policy string) error {
	for _, addr := range r.addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		err := c.ConfigSet(ctx, "appendfsync", policy).Err()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("CONFIG SET appendfsync %s on %s: %w", policy, addr, err)
		}
	}
	return nil
}

func infoLine(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return "?"
}

// etcdLocks is an etcd server child (one member, its data in a temporary directory, fsyncing
// every commit as etcd always does) and a session per client for concurrency.Mutex pairs.
type etcdLocks struct {
	about    string
	cli      *clientv3.Client
	sessions []*concurrency.Session
	stop     func()
}

func startEtcd(ctx context.Context, bin string, clients int) (*etcdLocks, error) {
	dir, err := os.MkdirTemp("", "vigil-bench-etcd-")
	if err != nil {
		return nil, err
	}
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cmd := exec.Command(bin, "--name", "bench", "--data-dir", dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench="+peer, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	e := &etcdLocks{}
	e.stop = func() {
		for _, s := range e.sessions {
			_ = s.Close()
		}
		if e.cli != nil {
			_ = e.cli.Close()
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = os.RemoveAll(dir)
	}
	if e.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second}); err != nil {
		e.stop()
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := e.cli.Status(callCtx, client)
		cancel()
		if err == nil {
			e.about = fmt.Sprintf("etcd %s at %s (one member, data in %s)", st.Version, client, dir)
			break
		}
		select {
		case err := <-exited:
			exited <- err
			e.stop()
			return nil, fmt.Errorf("etcd exited at start: %v", err)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			e.stop()
			return nil, fmt.Errorf("etcd did not answer within 30s: %w", err)
		}
		time.Sleep(50 * time.Millisecond) // waiting for the child to listen
	}
	for range clients {
		s, err := concurrency.NewSession(e.cli, concurrency.WithTTL(30))
		if err != nil {
			e.stop()
			return nil, fmt.Errorf("etcd session: %w", err)
		}
		e.sessions = append(e.sessions, s)
	}
	benchStage("%s", e.about)
	return e, nil
}

// pair locks and unlocks a concurrency.Mutex, each client on its own 64 resources.
func (e *etcdLocks) pair(round int) durabilityOp {
	return func(ctx context.Context, c, i int) error {
		m := concurrency.NewMutex(e.sessions[c], fmt.Sprintf("/vigil-bench/r%d-%d-%d", round, c, i%64))
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}
}
