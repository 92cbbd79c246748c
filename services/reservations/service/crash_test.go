package service

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigil-dev/vigil/pkg/alarm"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

// The test binary doubles as a reservations replica that the crash test can SIGKILL.
const childEnv = "VIGIL_RESERVATIONS_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	redistest.Main(m)
}

func runChild() {
	lease, _ := time.ParseDuration(os.Getenv("CHILD_LEASE"))
	err := Run(context.Background(), Options{
		GRPCAddr: os.Getenv("CHILD_ADDR"),
		Redis:    redisx.Config{URL: os.Getenv("CHILD_REDIS"), ClusterAddrs: redisx.ParseClusterAddrs(os.Getenv("CHILD_REDIS_CLUSTER"))},
		Prefix:   os.Getenv("CHILD_PREFIX"),
		Lease:    lease,
		Logger:   slog.New(slog.NewJSONHandler(os.Stdout, nil)),
		// The replica dies between transition and ack: each shard loop expires its first
		// batch, then hangs before acknowledging it until the test SIGKILLs the process.
		wrapHandler: func(h alarm.Handler) alarm.Handler {
			return hangAfter{h}
		},
	}, func(a net.Addr) { fmt.Println(`{"event":"ready"}`) })
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// hangAfter runs the real handler, then never returns, so its batch is never acknowledged.
type hangAfter struct{ h alarm.Handler }

func (w hangAfter) HandleAlarms(ctx context.Context, batch []alarm.Firing) []error {
	errs := w.h.HandleAlarms(ctx, batch)
	_ = errs
	select {} // until SIGKILL: the child process exists only to die here
}

// firings counts a replica's alarm log lines.
type firings struct {
	mu              sync.Mutex
	changed, retry  int
	first           chan struct{}
	ready           chan struct{}
	seenOne, seenUp bool
}

func (f *firings) line(b []byte) {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m["event"] {
	case "ready":
		if !f.seenUp {
			f.seenUp = true
			close(f.ready)
		}
	case "alarm":
		if m["changed"] == true {
			f.changed++
		}
		if m["isRetry"] == true {
			f.retry++
		}
		if !f.seenOne {
			f.seenOne = true
			close(f.first)
		}
	}
}

func (f *firings) Write(p []byte) (int, error) {
	f.line(p)
	return len(p), nil
}

// TestKilledReplicaExpiresEachHoldOnce SIGKILLs a replica while 10,000 holds are due and in
// its hands, then lets a second replica finish: every hold expires exactly once.
func TestKilledReplicaExpiresEachHoldOnce(t *testing.T) {
	t.Parallel()
	const holds = 10_000
	const holdTTL = 15 // seconds: creating them all must finish before the first is due, even on a loaded machine
	_, prefix := redistest.Universal(t)
	url, cluster := redistest.Target(t) // a Redis Cluster when VIGIL_TEST_REDIS_CLUSTER is set
	cfg := redisx.Config{URL: url, ClusterAddrs: cluster}
	addr := freeAddr(t)

	// Replica A: a child process with a short lease, so its unfinished claims come back soon.
	a := &firings{first: make(chan struct{}), ready: make(chan struct{})}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "CHILD_ADDR="+addr, "CHILD_REDIS="+cfg.URL,
		"CHILD_REDIS_CLUSTER="+strings.Join(cfg.ClusterAddrs, ","),
		"CHILD_PREFIX="+prefix, "CHILD_LEASE=1s")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			a.line(sc.Bytes())
		}
	}()
	select {
	case <-a.ready:
	case <-time.After(30 * time.Second):
		t.Fatal("replica A did not start")
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := reservationsv1.NewReservationServiceClient(conn)
	ctx := context.Background()
	created := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < holds; i += 16 {
				_, err := client.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{
					ReservationId: fmt.Sprintf("hold-%05d", i), TtlSeconds: holdTTL})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create: %v", err)
	}
	if time.Since(created) > (holdTTL-1)*time.Second {
		t.Fatalf("creating %d holds took %v; they must all be created before the first is due", holds, time.Since(created))
	}

	// Kill A once it reports an expiry: that batch is expired but will never be acknowledged.
	select {
	case <-a.first:
	case <-time.After((holdTTL + 20) * time.Second):
		t.Fatal("replica A expired nothing")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-readDone // every line A wrote before it died
	_ = cmd.Wait()

	// Replica B finishes the work, retrying what A had claimed once A's leases run out.
	b := &firings{first: make(chan struct{}), ready: make(chan struct{})}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bdone := make(chan error, 1)
	baddr := make(chan string, 1)
	go func() {
		bdone <- Run(bctx, Options{Redis: cfg, Prefix: prefix,
			Logger: slog.New(slog.NewJSONHandler(b, nil))}, func(a net.Addr) { baddr <- a.String() })
	}()
	bconn, err := grpc.NewClient(<-baddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer bconn.Close()
	bclient := reservationsv1.NewReservationServiceClient(bconn)

	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < holds; {
		r, err := bclient.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: fmt.Sprintf("hold-%05d", i)})
		if err != nil {
			t.Fatal(err)
		}
		res := r.GetReservation()
		if res.GetStatus() == "held" {
			if time.Now().After(deadline) {
				t.Fatalf("hold-%05d still held 60s after it was due", i)
			}
			time.Sleep(20 * time.Millisecond) // polling the hold's state, bounded by the deadline
			continue
		}
		if res.GetStatus() != "expired" || res.GetExpirationCount() != 1 || res.AlarmAt != nil {
			t.Fatalf("hold-%05d = %v, want expired once with no alarm", i, res)
		}
		i++
	}
	a.mu.Lock()
	b.mu.Lock()
	defer a.mu.Unlock()
	defer b.mu.Unlock()
	t.Logf("at stake %d holds; replica A logged %d expiries before SIGKILL; replica B %d expiries, %d retried firings; lost 0, doubled 0",
		holds, a.changed, b.changed, b.retry)
	if a.changed+b.changed > holds {
		t.Fatalf("%d expiry effects logged for %d holds", a.changed+b.changed, holds)
	}
	if b.retry == 0 {
		t.Fatalf("replica B retried nothing: A was killed with no claim in flight, so the crash path was not exercised")
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
