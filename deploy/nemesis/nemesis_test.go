//go:build nemesis

package nemesis

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
)

// The schedule of one fault: load for warmup, the fault for faulted, load for after, then the
// history is checked.
const (
	warmup  = 3 * time.Second
	faulted = 20 * time.Second // longer than keepalive's 15s, so clients must notice the silence
	after   = 8 * time.Second
	skew    = 30 * time.Second
)

// oneClock says whether the services make their time decisions against one clock all
// replicas share (issue 25 item 4): they do, each replica's clock disciplined to Redis's TIME
// (pkg/clock), so a replica whose host clock runs 30s ahead decides as the others do and the
// clock rows are asserted like the rest.
const oneClock = true

const clockFault = "clock +30s"

// fault breaks replica 0 of a cluster and returns how to heal it.
type fault struct {
	name    string
	inflict func(t *testing.T, r *replica) (heal func())
}

var faults = []fault{
	{"pause (SIGSTOP)", func(t *testing.T, r *replica) func() {
		r.signal(syscall.SIGSTOP)
		return func() { r.signal(syscall.SIGCONT) }
	}},
	{"partition", func(t *testing.T, r *replica) func() {
		r.front.hold()
		r.back.hold()
		return func() { r.front.release(); r.back.release() }
	}},
	{clockFault, func(t *testing.T, r *replica) func() {
		r.stop(syscall.SIGTERM)
		r.start(skew)
		return func() { r.stop(syscall.SIGTERM); r.start(0) }
	}},
	{"SIGKILL", func(t *testing.T, r *replica) func() {
		r.stop(syscall.SIGKILL)
		return func() { r.start(0) }
	}},
}

var domains = []struct {
	name string
	work func(lobby *grpc.ClientConn, run string) workload
}{
	{"locks", func(_ *grpc.ClientConn, run string) workload { return &locksWorkload{name: run} }},
	{"reservations", func(_ *grpc.ClientConn, run string) workload { return &reservationsWorkload{name: run} }},
	{"chat", func(_ *grpc.ClientConn, run string) workload { return &chatWorkload{name: run} }},
	{"rooms", func(lobby *grpc.ClientConn, run string) workload {
		return &roomsWorkload{name: run, lobby: lobbyv1.NewLobbyServiceClient(lobby)}
	}},
}

// TestNemesis runs every fault against every domain's two replicas under load and prints
// the table. Pause, partition and SIGKILL must lose nothing, double nothing and expire nothing
// early (and the clock fault too, once oneClock holds).
func TestNemesis(t *testing.T) {
	url := redistest.URL(t)
	prefix := redistest.Prefix(t)
	// The rooms' Lobby: one replica, never broken (the rooms' replicas are).
	lobbyc := startCluster(t, "lobby", url, prefix+"-rooms", 1)
	clusters := map[string]*cluster{}
	for _, d := range domains {
		var env []string
		if d.name == "rooms" {
			env = append(env, envLobby+"="+lobbyc.replicas[0].front.addr())
		}
		clusters[d.name] = startCluster(t, d.name, url, prefix+"-"+d.name, 2, env...)
	}
	type row struct {
		fault, domain string
		o             outcome
	}
	var rows []row
	for fi, f := range faults {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, d := range domains {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := clusters[d.name]
				w := d.work(lobbyc.conn, fmt.Sprintf("f%d", fi))
				o, err := exercise(t, c, w, f)
				if err != nil {
					t.Errorf("%s × %s: %v", f.name, d.name, err)
				}
				mu.Lock()
				rows = append(rows, row{f.name, d.name, o})
				mu.Unlock()
			}()
		}
		wg.Wait()
	}

	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "fault\tdomain\toperations\tlost\tdoubled\tearly\tlongest unavailable")
	for _, f := range faults {
		for _, d := range domains {
			for _, r := range rows {
				if r.fault == f.name && r.domain == d.name {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%v\n", r.fault, r.domain, r.o.ops, r.o.lost, r.o.doubled, r.o.early, r.o.unavailable.Round(100*time.Millisecond))
				}
			}
		}
	}
	_ = tw.Flush()
	fmt.Fprint(os.Stdout, "\n"+b.String()+"\n")

	for _, r := range rows {
		if r.fault == clockFault && !oneClock {
			t.Logf("%s × %s (recorded, not asserted until one clock): %d lost, %d doubled, %d early", r.fault, r.domain, r.o.lost, r.o.doubled, r.o.early)
			continue
		}
		if r.o.ops == 0 {
			t.Errorf("%s × %s: no operation succeeded", r.fault, r.domain)
		}
		if r.o.lost != 0 || r.o.doubled != 0 || r.o.early != 0 {
			t.Errorf("%s × %s: %d lost, %d doubled, %d early, want none", r.fault, r.domain, r.o.lost, r.o.doubled, r.o.early)
		}
		if bound := unavailableBound(r.domain); r.o.unavailable > bound {
			t.Errorf("%s × %s: unavailable for %v, want at most %v", r.fault, r.domain, r.o.unavailable.Round(100*time.Millisecond), bound)
		}
	}
}

// unavailableBound is the longest a domain may go without a successful operation while one of
// its two replicas is faulted. A unary call sent to the silent replica fails at its deadline
// (callTimeout) and is retried on the other one, and the picker passes over a replica whose
// call has gone a second unanswered: two deadlines and change (5 s measured at a load average
// of 15-22). A room viewer's stream on the silent replica waits for keepalive to close it
// (10-15 s after the replica last sent anything; 12.2 s measured) and then re-attaches at once.
// A client that stayed with the faulted replica until it healed would be unavailable for
// faulted (20 s) at least, past both bounds.
func unavailableBound(domain string) time.Duration {
	if domain == "rooms" {
		return faulted - 2*time.Second
	}
	return faulted / 2
}

// exercise runs w on c through f's schedule and checks its history.
func exercise(t *testing.T, c *cluster, w workload, f fault) (outcome, error) {
	ctx, stop := context.WithCancel(context.Background())
	var avail availability
	avail.start()
	done := make(chan struct{})
	go func() { w.run(ctx, c.conn, &avail); close(done) }()
	phase(warmup)
	fa, aware := w.(faultAware)
	if aware {
		fa.faulted(time.Now())
	}
	heal := f.inflict(t, c.replicas[0])
	phase(faulted)
	if aware {
		fa.healed(time.Now()) // before heal: the clock fault's heal is a restart, measured on its own
	}
	heal()
	phase(after)
	stop()
	<-done
	unavailable := avail.gap()
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o, err := w.check(cctx, c.conn)
	if o.unavailable == 0 { // the workload's own measure, else the gap between successes
		o.unavailable = unavailable
	}
	return o, err
}

// faultAware is a workload that measures from the fault's start (rooms: a stream on a silent
// replica was dead from then, though noticed later).
type faultAware interface {
	faulted(at time.Time)
	healed(at time.Time)
}

// phase lets the schedule's time pass: the load runs meanwhile (nothing is awaited).
func phase(d time.Duration) { <-time.After(d) }
