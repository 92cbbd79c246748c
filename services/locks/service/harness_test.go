package service_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/lockclient"
	"github.com/vigil-dev/vigil/pkg/prom/promtest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/services/locks/service"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// testRedisTimeout replaces redisx's 400 ms production timeout: these tests check semantics on
// a machine shared with other builds, where one Redis call may stall longer than that.
const testRedisTimeout = 5 * time.Second

// testLogger sends the service's warnings and errors to the test's log (shown when it fails),
// and drops lines logged after the test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testLogWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// env is one lock service started in-process with New and Serve, on the shared Redis under a key prefix
// of the test's own, and a gRPC client for it.
type env struct {
	addr   string
	conn   *grpc.ClientConn
	locks  locksv1.LockServiceClient
	rdb    *redis.Client
	prefix string
}

// startLocks runs the service until the test ends. edit, when given, adjusts its options.
func startLocks(t *testing.T, edit ...func(*service.Options)) *env {
	t.Helper()
	rdb, prefix := redistest.Client(t)
	addr := run(t, replicaOptions(t, prefix, edit...))
	return &env{addr: addr, conn: servertest.Dial(t, addr), locks: locksv1.NewLockServiceClient(servertest.Dial(t, addr)), rdb: rdb, prefix: prefix}
}

// startClient runs the service (startLocks) with a lockclient.Client on its connection, closed
// when the test ends.
func startClient(t *testing.T) (*env, *lockclient.Client) {
	t.Helper()
	e := startLocks(t)
	c := lockclient.New(e.conn)
	t.Cleanup(func() { _ = c.Close() })
	return e, c
}

// replicaOptions are a replica's options on the test Redis under prefix, logging to the test,
// with 4 shards; edit, when given, adjusts them.
func replicaOptions(t *testing.T, prefix string, edit ...func(*service.Options)) service.Options {
	o := service.Options{
		Core:   server.Core{Redis: redisx.Config{URL: redistest.URL(t), Timeout: testRedisTimeout}, Prefix: prefix, Logger: testLogger(t)},
		Shards: 4,
	}
	for _, e := range edit {
		e(&o)
	}
	return o
}

// stoppableReplica starts another replica on e's keys (edit adjusts its options); stop ends it
// and waits for its drain, while e's replica stays.
func (e *env) stoppableReplica(t *testing.T, edit ...func(*service.Options)) (addr string, stop func()) {
	t.Helper()
	return runStoppable(t, replicaOptions(t, e.prefix, edit...))
}

// run starts the service with o and stops it (waiting for its drain) when the test ends.
func run(t *testing.T, o service.Options) string {
	t.Helper()
	addr, _ := runStoppable(t, o)
	return addr
}

// runStoppable starts the service with o; stop ends it and waits for its drain (as the test's
// end does when it was not called).
func runStoppable(t *testing.T, o service.Options) (addr string, stop func()) {
	t.Helper()
	s := servertest.StartService(t, "locks", service.New, o)
	return s.Addr, func() { s.Drain(t) }
}

// Every metric family the service documents (docs/OPERATIONS.md) is registered on the
// Registerer it is given, none on the process's default registry only.
func TestEveryMetricOnTheGivenRegisterer(t *testing.T) {
	t.Parallel()
	servertest.CheckRegisterer(t, func(ctx context.Context, core server.Core) (server.Service, error) {
		return service.New(ctx, service.Options{Core: core})
	}, slices.Concat(promtest.ServerFamilies, promtest.AlarmFamilies, []string{"vigil_lock_wait_seconds", "vigil_lock_hold_seconds", "vigil_lock_session_call_seconds"})...)
}

// queueLen counts resource's queued waiters, read straight from Redis.
func (e *env) queueLen(t *testing.T, resource string) int64 {
	t.Helper()
	return int64(len(e.queue(t, resource)))
}

// queue reads resource's queue entries, straight from Redis; each names its replica's waiter.
func (e *env) queue(t *testing.T, resource string) []string {
	t.Helper()
	keys, err := e.rdb.Keys(context.Background(), e.prefix+":{locks:*}:queue:"+redisx.Tag(resource)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		return nil
	}
	entries, err := e.rdb.LRange(context.Background(), keys[0], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

func ms(v int64) *int64 { return &v }

// withClock runs the service on clk, with a scheduler that looks for due alarms often.
// newTestClock is a clock for the service (lease ends, waiter deadlines, alarms), so tests
// drive lock timing without depending on how fast the machine is.
func newTestClock() *clocktest.Manual { return clocktest.New(time.UnixMilli(1_800_000_000_000)) }

func withClock(clk *clocktest.Manual) func(*service.Options) {
	return func(o *service.Options) {
		o.Now = clk.Now
		o.AlarmMaxSleep = 20 * time.Millisecond
	}
}

func acquire(t *testing.T, c locksv1.LockServiceClient, resource, owner string, ttlMs, waitMs int64) *locksv1.AcquireResponse {
	t.Helper()
	req := &locksv1.AcquireRequest{Resource: resource, Owner: owner, TtlMs: ms(ttlMs)}
	if waitMs > 0 {
		req.WaitMs = ms(waitMs)
	}
	res, err := c.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire(%s, %s) error: %v", resource, owner, err)
	}
	return res
}

func release(t *testing.T, c locksv1.LockServiceClient, resource, owner string) bool {
	t.Helper()
	res, err := c.Release(context.Background(), &locksv1.ReleaseRequest{Resource: resource, Owner: owner})
	if err != nil {
		t.Fatalf("Release(%s, %s) error: %v", resource, owner, err)
	}
	return res.GetReleased()
}
