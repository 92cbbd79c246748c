package alarm

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// clockedQueue is testQueue on a test clock that reads t0 until the test moves it.
func clockedQueue(t *testing.T, o Options) (*Queue, redis.UniversalClient, *clocktest.Manual) {
	t.Helper()
	clock := clocktest.New(t0)
	o.Now = clock.Now
	q, rdb := testQueue(t, o)
	return q, rdb, clock
}

// testQueue is a Queue on the shared test Redis under this test's own prefix. Its namespace is
// the prefix too, so the package-wide Prometheus counters are per test.
func testQueue(t *testing.T, o Options) (*Queue, redis.UniversalClient) {
	t.Helper()
	rdb, prefix := redistest.Universal(t) // a Redis Cluster when VIGIL_TEST_REDIS_CLUSTER is set
	if o.Prefix == "" {
		o.Prefix = prefix
	}
	if o.Namespace == "" {
		o.Namespace = prefix
	}
	q, err := New(rdb, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return q, rdb
}

// twin is another Queue (another "process") on the same keys as q, with options o.
func twin(t *testing.T, q *Queue, rdb redis.UniversalClient, o Options) *Queue {
	t.Helper()
	o.Prefix, o.Namespace = q.o.Prefix, q.o.Namespace
	q2, err := New(rdb, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return q2
}

// run starts q.Run(h) and returns a function that stops it and waits for Run to return. The
// test's cleanup stops it too.
func run(t *testing.T, q *Queue, h Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("Run = %v, want nil or context.Canceled", err)
				}
			case <-time.After(wait.Deadline):
				t.Errorf("Run did not return %v after its context ended", wait.Deadline)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// fired is one handler invocation as a test saw it.
type fired struct {
	Firing
	At time.Time // when the handler was called
}

// recorder is a HandlerFunc that reports every firing on a channel and then returns the result
// of its optional behaviour.
type recorder struct {
	ch chan fired
	do func(ctx context.Context, f Firing) error
}

func newRecorder(do func(ctx context.Context, f Firing) error) *recorder {
	return &recorder{ch: make(chan fired, 10000), do: do}
}

func (r *recorder) handler() Handler {
	return HandlerFunc(func(ctx context.Context, f Firing) error {
		r.ch <- fired{Firing: f, At: time.Now()}
		if r.do != nil {
			return r.do(ctx, f)
		}
		return nil
	})
}

// none fails the test if a firing is waiting: call it once the alarms that were due are
// acknowledged, so any firing still queued is one too many.
func (r *recorder) none(t *testing.T, what string) {
	t.Helper()
	select {
	case f := <-r.ch:
		t.Fatalf("%s: %+v", what, f)
	default:
	}
}

// next waits for the next firing (at most wait.Deadline: only a broken queue takes that long).
func (r *recorder) next(t *testing.T) fired {
	t.Helper()
	select {
	case f := <-r.ch:
		return f
	case <-time.After(wait.Deadline):
		t.Fatalf("no alarm fired within %v", wait.Deadline)
		return fired{}
	}
}

// pending is the number of alarms in all of q's shards.
func pending(t *testing.T, q *Queue) int64 {
	t.Helper()
	counts, err := q.Pending(context.Background())
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// acked is how many alarms q's namespace has acknowledged so far.
func acked(q *Queue) int { return int(testutil.ToFloat64(q.metrics.acked)) }

// subscribed reports whether some scheduler listens for q's wake-up hints.
func subscribed(t *testing.T, rdb redis.UniversalClient, q *Queue) bool {
	t.Helper()
	ch := wakeChannel(q.o.Prefix, q.o.Namespace)
	var node redis.UniversalClient = rdb
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		// A cluster client subscribes on the master of the channel's slot; NUMSUB is per node.
		m, err := cc.MasterForKey(context.Background(), ch)
		if err != nil {
			t.Fatalf("master for %s: %v", ch, err)
		}
		node = m
	}
	n, err := node.PubSubNumSub(context.Background(), ch).Result()
	if err != nil {
		t.Fatalf("PUBSUB NUMSUB: %v", err)
	}
	return n[ch] > 0
}

// wholeMs is t truncated to the millisecond, the precision of a due time.
func wholeMs(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()) }
