package service

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
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
	ctx := context.Background()
	svc, err := New(ctx, Options{
		Core:  server.Core{GRPCAddr: os.Getenv("CHILD_ADDR"), Redis: redisx.Config{URL: os.Getenv("CHILD_REDIS"), ClusterAddrs: redisx.ParseClusterAddrs(os.Getenv("CHILD_REDIS_CLUSTER"))}, Prefix: os.Getenv("CHILD_PREFIX"), Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))},
		Lease: lease,

		AlarmLog: os.Stdout, // the reservation-alarm lines the test counts
		// The replica dies at both points that matter: even shards expire their first batch
		// and hang before acknowledging it (between transition and ack); odd shards hang
		// right after the claim (between claim and transition). The test SIGKILLs it then.
		wrapHandler: func(h alarm.Handler) alarm.Handler {
			return hangAfter{h}
		},
	})
	if err == nil {
		fmt.Println(`{"event":"ready"}`)
		err = svc.Serve(ctx)
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// hangAfter never returns, so its batch is never acknowledged: on an even shard it runs the
// real handler first, on an odd one it says so on stdout and runs nothing.
type hangAfter struct{ h alarm.Handler }

func (w hangAfter) HandleAlarms(ctx context.Context, batch []alarm.Firing) []error {
	if batch[0].Shard%2 == 0 {
		_ = w.h.HandleAlarms(ctx, batch)
	} else {
		fmt.Println(`{"event":"claimed-and-hung"}`)
	}
	select {} // until SIGKILL: the child process exists only to die here
}

// firings counts a replica's reservation-alarm lines that say the transition ran ("done").
type firings struct {
	mu              sync.Mutex
	changed, retry  int
	first, hung     chan struct{} // closed by the first done line, the first claimed-and-hung line
	ready           chan struct{}
	seenOne, seenUp bool
	seenHung        bool
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
	case "claimed-and-hung":
		if !f.seenHung {
			f.seenHung = true
			close(f.hung)
		}
	case "reservation-alarm":
		if m["phase"] != "done" {
			return
		}
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

// Write takes the service's AlarmLog writes: a batch of lines at a time.
func (f *firings) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		f.line(line)
	}
	return len(p), nil
}

// TestKilledReplicaExpiresEachHoldOnce SIGKILLs a replica while 10,000 holds are due and in
// its hands, then lets a second replica finish: every hold expires exactly once.
func TestKilledReplicaExpiresEachHoldOnce(t *testing.T) {
	t.Parallel()
	const holds = 10_000
	const holdTTL = 15 // seconds
	core := testCore(t)
	addr := servertest.FreeAddr(t)

	// Replica A: a child process with a short lease, so its unfinished claims come back soon.
	a := &firings{first: make(chan struct{}), hung: make(chan struct{}), ready: make(chan struct{})}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "CHILD_ADDR="+addr, "CHILD_REDIS="+core.Redis.URL,
		"CHILD_REDIS_CLUSTER="+strings.Join(core.Redis.ClusterAddrs, ","),
		"CHILD_PREFIX="+core.Prefix, "CHILD_LEASE=1s")
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
	case <-time.After(wait.Deadline):
		t.Fatal("replica A did not start")
	}

	rs := client(t, addr)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < holds; i += 16 {
				_, err := rs.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{
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

	// Kill A once it has expired a batch it will never acknowledge, and claimed one it will
	// never transition.
	for _, c := range []struct {
		ch   chan struct{}
		what string
	}{{a.first, "expired nothing"}, {a.hung, "claimed nothing on an odd shard"}} {
		select {
		case <-c.ch:
		case <-time.After(holdTTL*time.Second + 5*time.Minute):
			t.Fatal("replica A " + c.what)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-readDone // every line A wrote before it died
	_ = cmd.Wait()

	// Replica B finishes the work, retrying what A had claimed once A's leases run out.
	b := &firings{first: make(chan struct{}), hung: make(chan struct{}), ready: make(chan struct{})}
	bclient := client(t, start(t, Options{Core: core, AlarmLog: b}))

	i := 0
	wait.Within(t, 5*time.Minute, "every hold to expire", func() error {
		for ; i < holds; i++ {
			r, err := bclient.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: fmt.Sprintf("hold-%05d", i)})
			if err != nil {
				return err
			}
			res := r.GetReservation()
			if res.GetStatus() == "held" {
				return fmt.Errorf("hold-%05d is still held", i)
			}
			if res.GetStatus() != "expired" || res.GetExpirationCount() != 1 || res.AlarmAt != nil {
				t.Fatalf("hold-%05d = %v, want expired once with no alarm", i, res)
			}
		}
		return nil
	})
	// A's batches claimed on odd shards were never transitioned: B fires them again once A's
	// leases run out, as retries that do the expiry.
	wait.Until(t, "replica B to re-fire what A claimed", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.retry > 0
	})
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
