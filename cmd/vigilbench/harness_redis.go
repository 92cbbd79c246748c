package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redisx"
)

// benchRedisTimeout bounds the bench's own Redis calls. It is generous: loading 100,000 objects
// into an AOF-always server on a busy machine is slow, and the bench measures time, not timeouts.
const benchRedisTimeout = 30 * time.Second

// benchRedis is the Redis a benchmark measures: the one named by --redis-url, or a throwaway
// redis-server child that close stops.
type benchRedis struct {
	url   string
	rdb   redis.UniversalClient
	about string
	stop  func()
}

func openBenchRedis(ctx context.Context, f benchFlags) (*benchRedis, error) {
	b := &benchRedis{url: f.redisURL}
	persistence := "as configured"
	if b.url == "" {
		url, stop, err := startThrowawayRedis(ctx, f.aof)
		if err != nil {
			return nil, err
		}
		b.url, b.stop = url, stop
		persistence = "throwaway child, AOF " + f.aof
	}
	rdb, err := redisx.Open(ctx, redisx.Config{URL: b.url, PoolSize: 64, Timeout: benchRedisTimeout})
	if err != nil {
		b.close()
		return nil, err
	}
	b.rdb = rdb
	version := "?"
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				version = v
			}
		}
	}
	b.about = fmt.Sprintf("redis %s at %s (%s)", version, benchRedactURL(b.url), persistence)
	return b, nil
}

func (b *benchRedis) close() {
	if b.rdb != nil {
		_ = b.rdb.Close()
	}
	if b.stop != nil {
		b.stop()
	}
}

// deletePrefix removes a run's keys, so a shared Redis is left as it was found.
func (b *benchRedis) deletePrefix(ctx context.Context, prefix string) {
	if b.stop != nil {
		return // a throwaway server goes away with its keys
	}
	iter := b.rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			b.rdb.Unlink(ctx, batch...)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		b.rdb.Unlink(ctx, batch...)
	}
}

func benchRedactURL(u string) string {
	if at := strings.LastIndex(u, "@"); at >= 0 {
		if scheme := strings.Index(u, "://"); scheme >= 0 && scheme < at {
			return u[:scheme+3] + "***" + u[at:]
		}
	}
	return u
}

// startThrowawayRedis starts redis-server on a free loopback port with a temporary directory,
// no RDB snapshots and the given AOF policy ("no" turns AOF off).
func startThrowawayRedis(ctx context.Context, aof string) (url string, stop func(), err error) {
	args := []string{"--bind", "127.0.0.1", "--save", "", "--daemonize", "no", "--logfile", ""}
	switch aof {
	case "no":
		args = append(args, "--appendonly", "no")
	case "everysec", "always":
		args = append(args, "--appendonly", "yes", "--appendfsync", aof)
	default:
		return "", nil, fmt.Errorf("%w: --aof must be no, everysec or always, not %q", errUsage, aof)
	}
	addr, stop, err := startRedisChild(ctx, args)
	if err != nil {
		return "", nil, err
	}
	benchStage("started a throwaway redis-server on %s (AOF %s)", addr, aof)
	return "redis://" + addr + "/0", stop, nil
}

// startRedisChild starts redis-server with args on a free loopback port and a temporary
// directory, waits until it answers, and returns its address and a stop that ends it and
// removes the directory.
func startRedisChild(ctx context.Context, args []string) (addr string, stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, errors.New("no redis-server installed (Debian: apt-get install redis-server)")
	}
	dir, err := os.MkdirTemp("", "vigil-bench-redis-")
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--dir", dir}, args...)...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = os.RemoveAll(dir)
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for c.Ping(ctx).Err() != nil {
		select {
		case err := <-exited:
			_ = os.RemoveAll(dir)
			return "", nil, fmt.Errorf("redis-server exited at start: %v", err)
		case <-ctx.Done():
			stop()
			return "", nil, ctx.Err()
		case <-time.After(20 * time.Millisecond): // waiting for the child to listen
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("redis-server did not answer within 15s")
		}
	}
	return addr, stop, nil
}

// benchCASLua is the raw ceiling's compare-and-set script.
//
//go:embed ceiling_cas.lua
var benchCASLua string

// redisCeiling is what redis-benchmark measured for one pipeline depth.
type redisCeiling struct {
	pipeline int
	rps      float64
	p50, p99 float64       // ms per request as redis-benchmark's clients saw it
	cpuPerOp time.Duration // the Redis server's CPU time per request
}

// serverCPU is the Redis server's CPU time so far (redisx.ServerCPU).
func (b *benchRedis) serverCPU(ctx context.Context) (time.Duration, error) {
	return redisx.ServerCPU(ctx, b.rdb)
}

// processCPU is this process's CPU time so far, user plus system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureRedisCeiling runs redis-benchmark against the target with EVALSHA of casLua, on keys under
// prefix, with the given pipeline depth.
func measureRedisCeiling(ctx context.Context, b *benchRedis, prefix string, requests, clients, pipeline int) (redisCeiling, error) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return redisCeiling{}, errors.New("redis-benchmark not found (Debian package redis-tools)")
	}
	opt, err := redis.ParseURL(b.url)
	if err != nil {
		return redisCeiling{}, fmt.Errorf("redis-benchmark needs a redis:// URL: %w", err)
	}
	sha, err := b.rdb.ScriptLoad(ctx, benchCASLua).Result()
	if err != nil {
		return redisCeiling{}, fmt.Errorf("load the CAS script: %w", err)
	}
	host, port, err := net.SplitHostPort(opt.Addr)
	if err != nil {
		return redisCeiling{}, err
	}
	args := []string{"-h", host, "-p", port, "-n", strconv.Itoa(requests), "-c", strconv.Itoa(clients),
		"-P", strconv.Itoa(pipeline), "-r", "100000", "--csv"}
	if opt.DB != 0 {
		args = append(args, "--dbnum", strconv.Itoa(opt.DB))
	}
	if opt.Username != "" {
		args = append(args, "--user", opt.Username)
	}
	if opt.TLSConfig != nil {
		args = append(args, "--tls")
	}
	args = append(args, "EVALSHA", sha, "1", prefix+":cas:{__rand_int__}", "held", "held", "1")
	cmd := exec.CommandContext(ctx, bin, args...)
	if opt.Password != "" {
		cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+opt.Password)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cpu0, err := b.serverCPU(ctx)
	if err != nil {
		return redisCeiling{}, err
	}
	if err := cmd.Run(); err != nil {
		return redisCeiling{}, fmt.Errorf("redis-benchmark: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	cpu1, err := b.serverCPU(ctx)
	if err != nil {
		return redisCeiling{}, err
	}
	c, err := parseRedisBenchmarkCSV(stdout.String(), pipeline)
	c.cpuPerOp = (cpu1 - cpu0) / time.Duration(requests)
	return c, err
}

// parseRedisBenchmarkCSV reads redis-benchmark --csv output:
//
//	"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
//	"EVALSHA ...","84033.61","0.390","0.064","0.327","0.703","0.999","2.495"
func parseRedisBenchmarkCSV(out string, pipeline int) (redisCeiling, error) {
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) < 2 {
		return redisCeiling{}, fmt.Errorf("unexpected redis-benchmark output %q", out)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	last := rows[len(rows)-1]
	get := func(name string) (float64, error) {
		i, ok := col[name]
		if !ok || i >= len(last) {
			return 0, fmt.Errorf("redis-benchmark output has no %q column: %q", name, out)
		}
		return strconv.ParseFloat(last[i], 64)
	}
	c := redisCeiling{pipeline: pipeline}
	if c.rps, err = get("rps"); err != nil {
		return redisCeiling{}, err
	}
	c.p50, _ = get("p50_latency_ms")
	c.p99, _ = get("p99_latency_ms")
	return c, nil
}
