//go:build faulttest

package faulttest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/gateway"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

// TestFaultRedisUnreachable freezes the reservations service's Redis (docker pause: connections
// stay open, nothing answers, as in a partition). Calls must fail with UNAVAILABLE within a
// second, not hang; no reservation may be half-written (held without its alarm); once Redis
// answers again the service recovers by itself.
func TestFaultRedisUnreachable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	prefix := redistest.Prefix(t)
	conn := start(t, func(ctx context.Context, ready func(net.Addr)) error {
		// The production timeout, not the test default redistest.Main sets.
		svc, err := reservations.New(ctx, reservations.Options{Core: server.Core{Redis: redisx.Config{URL: srv.URL(t), Timeout: redisx.DefaultTimeout}, Prefix: prefix, Logger: newEvents().Logger()}})
		if err != nil {
			return err
		}
		ready(svc.Addr())
		return svc.Serve(ctx)
	})
	client := reservationsv1.NewReservationServiceClient(conn)
	ctx := context.Background()
	const before = 200
	for i := range before {
		if _, err := client.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{ReservationId: fmt.Sprintf("before-%d", i), TtlSeconds: 3600}); err != nil {
			t.Fatal(err)
		}
	}

	srv.Pause(t)
	paused := true
	t.Cleanup(func() {
		if paused {
			srv.Unpause(t)
		}
	})
	const during = 64
	var wg sync.WaitGroup
	latencies := make([]time.Duration, during)
	codesSeen := make([]codes.Code, during)
	for i := range during {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			began := time.Now()
			var err error
			if i%2 == 0 {
				_, err = client.CreateReservation(cctx, &reservationsv1.CreateReservationRequest{ReservationId: fmt.Sprintf("during-%d", i), TtlSeconds: 3600})
			} else {
				_, err = client.GetReservation(cctx, &reservationsv1.GetReservationRequest{ReservationId: fmt.Sprintf("before-%d", i)})
			}
			latencies[i] = time.Since(began)
			codesSeen[i] = status.Code(err)
		}()
	}
	wg.Wait()
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	unavailable := 0
	for _, c := range codesSeen {
		if c == codes.Unavailable {
			unavailable++
		}
	}
	slowest := latencies[len(latencies)-1]
	t.Logf("Redis paused: %d of %d calls failed with UNAVAILABLE; median %v, slowest %v", unavailable, during,
		latencies[len(latencies)/2].Round(time.Millisecond), slowest.Round(time.Millisecond))
	if unavailable != during {
		t.Fatalf("codes while Redis is paused = %v, want all UNAVAILABLE", codesSeen)
	}
	if slowest > time.Second {
		t.Fatalf("slowest failing call took %v, want under a second", slowest)
	}

	srv.Unpause(t)
	paused = false
	healed := time.Now()
	wait.Until(t, "the service to recover", func() bool {
		_, err := client.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{ReservationId: "after", TtlSeconds: 3600})
		return err == nil
	})
	recovery := time.Since(healed)

	// Nothing half-written: every reservation is held with its alarm, or absent.
	halfWritten, kept, attempted := 0, 0, 0
	for i := range before {
		r, err := client.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: fmt.Sprintf("before-%d", i)})
		if err != nil || r.GetReservation().GetStatus() != "held" || r.GetReservation().AlarmAt == nil {
			t.Fatalf("before-%d after the outage = %v, %v; want held with its alarm", i, r.GetReservation(), err)
		}
		kept++
	}
	for i := 0; i < during; i += 2 {
		attempted++
		r, err := client.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: fmt.Sprintf("during-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		st := r.GetReservation().GetStatus()
		if st != "missing" && (st != "held" || r.GetReservation().AlarmAt == nil) {
			halfWritten++
		}
	}
	t.Logf("at stake: %d acknowledged holds; after the outage %d kept with their alarms, lost 0; %d creates refused during it, %d half-written; recovered %v after Redis answered again",
		before, kept, attempted, halfWritten, recovery.Round(time.Millisecond))
	if halfWritten > 0 {
		t.Fatalf("%d reservations half-written", halfWritten)
	}
}

// TestFaultOverloadIsShed sends the gateway far more concurrent requests than the reservations
// service admits (MaxInFlight 16): the excess is refused at once with 429 and a sentence,
// everything admitted succeeds, and memory stays flat instead of queueing the flood.
func TestFaultOverloadIsShed(t *testing.T) {
	core := servertest.Core(t, redistest.Prefix(t), newEvents().Logger())
	core.MaxInFlight = 16
	conn := start(t, servertest.Serve(reservations.New, reservations.Options{Core: core}))
	gwAddr := startGateway(t, gateway.Backends{Reservations: conn.Target()})

	const clients, each = 256, 20
	var ok, shed, other atomic.Int64
	var badBody atomic.Value
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for !stopped(done) {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			time.Sleep(10 * time.Millisecond) // sampling memory, not waiting for a result
		}
	}()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 10 * time.Second}
	began := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := hc.Post(fmt.Sprintf("http://%s/reservations/load-%d-%d", gwAddr, c, i), "application/json", strings.NewReader(`{"ttlSeconds": 3600}`))
				if err != nil {
					other.Add(1)
					continue
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				switch res.StatusCode {
				case http.StatusCreated:
					ok.Add(1)
				case http.StatusTooManyRequests:
					shed.Add(1)
					if !strings.Contains(string(body), "capacity") {
						badBody.Store(string(body))
					}
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	close(done)
	total := clients * each
	growth := float64(int64(peak.Load())-int64(before.HeapInuse)) / (1 << 20)
	t.Logf("at stake: %d requests from %d concurrent clients in %v against a limit of 16 in flight: %d served (201), %d shed (429), %d other; heap in use grew by at most %.1f MiB",
		total, clients, took.Round(time.Millisecond), ok.Load(), shed.Load(), other.Load(), growth)
	if other.Load() > 0 {
		t.Fatalf("%d requests got neither 201 nor 429", other.Load())
	}
	if shed.Load() == 0 {
		t.Fatalf("nothing was shed: the load did not exceed the limit")
	}
	if b := badBody.Load(); b != nil {
		t.Fatalf("a 429 said %q, want the at-capacity sentence", b)
	}
}

// startGateway runs the gateway in front of backends until the test ends and returns its address.
func startGateway(t *testing.T, backends gateway.Backends) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, gateway.Options{Addr: "127.0.0.1:0", Backends: backends, Logger: newEvents().Logger()},
			func(a net.Addr) { addr <- a.String() })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addr:
		return a
	case err := <-done:
		t.Fatalf("gateway: %v", err)
	}
	return ""
}
