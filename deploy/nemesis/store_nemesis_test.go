//go:build nemesis

package nemesis

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
)

// The schedule of one store fault: load for storeWarmup, the fault for storeFaulted, load for
// storeAfter; then the history is checked and the store healed before the next fault.
const (
	storeWarmup = 3 * time.Second
	// storeFaulted is longer than a failover takes (downAfter + failoverTimeout) by half again:
	// a domain that waited for the faulted node to come back, instead of following the
	// failover, is unavailable for this long and fails storeUnavailableBound.
	storeFaulted = 20 * time.Second
	storeAfter   = 5 * time.Second
	// heldBeforeKill is how long the replication link is held before the primary is killed:
	// less than maxLag, so the primary still accepts writes that no replica will ever have.
	heldBeforeKill = 2 * time.Second
)

// storeUnavailableBound is the longest a domain may go without a successful operation through
// any store fault: the sentinels' detection and failover (downAfter + failoverTimeout) and
// a call's deadline to give up on the old primary. A failover that never happens (or a client
// that never follows it) is unavailable for storeFaulted at least.
const storeUnavailableBound = downAfter + failoverTimeout + callTimeout

// storeFault breaks the store's primary p and returns how to heal it. failover says the
// sentinels must have promoted another node by the heal (the fault lasts past their timeout).
type storeFault struct {
	name     string
	failover bool
	inflict  func(t *testing.T, p *storeNode) (heal func())
}

var (
	// killHeld: the primary SIGKILLed while its replication link is held, so writes it
	// accepted in the last heldBeforeKill never reach a replica: under async they are lost
	// by construction, under replica they were never acknowledged.
	killHeld = storeFault{"primary SIGKILL (link held 2s)", true, func(t *testing.T, p *storeNode) func() {
		p.front.hold(fromReplica)
		held := time.Now()
		phase(heldBeforeKill)
		p.kill()
		p.front.cut(fromReplica) // what the replicas had not read dies with the primary
		p.front.release()
		// When, to read beside the services' and sentinels' logs: a kill that returns late keeps
		// the link held past maxLag, and the primary refuses writes before it dies.
		t.Logf("%s: replication held at %s, killed %v later", p.name, held.UTC().Format("15:04:05.000"), time.Since(held).Round(10*time.Millisecond))
		return p.start
	}}
	pausePast = storeFault{"primary paused past failover", true, func(t *testing.T, p *storeNode) func() {
		p.pause()
		return p.unpause
	}}
	cutOff = storeFault{"primary cut off alone", true, func(t *testing.T, p *storeNode) func() {
		// The replicas and the sentinels lose it; the services still reach it.
		p.front.hold(fromReplica, fromSentinel)
		return p.front.release
	}}
	restartAtOnce = storeFault{"primary restarted at once", false, func(t *testing.T, p *storeNode) func() {
		p.kill()
		p.start()
		return func() {}
	}}
)

// storeDomains are the domains whose store the faults break. rooms is the room service and
// its Lobby, both keeping their state on the faulted store.
var storeDomains = []string{"locks", "reservations", "chat", "rooms"}

// churners is how many joiners come and go in each rooms workload's room (see roomsWorkload).
const churners = 2

// storeRow is what one store fault cost one domain under one durability setting.
type storeRow struct {
	durability, fault, domain string
	o                         outcome
}

// TestStoreNemesis breaks the store of locks, reservations, chat and rooms (a primary, two
// replicas, three sentinels) under the nemesis load: the primary SIGKILLed with its
// replication link held, paused past the failover timeout, cut off alone from its replicas and
// sentinels while the services still reach it, and restarted at once. Under replica
// durability nothing acknowledged may be lost, doubled or early, fencing tokens strictly
// increase across the whole run, the Lobby's count of each room is exact after healing, and
// each domain is available again within storeUnavailableBound; under async (today's default)
// the held link's loss must show, which proves the checkers can fail.
func TestStoreNemesis(t *testing.T) {
	s := startStore(t)
	for _, mode := range []struct {
		durability string
		faults     []storeFault
	}{
		{"async", []storeFault{killHeld}},
		{"replica", []storeFault{killHeld, pausePast, cutOff, restartAtOnce}},
	} {
		// A subtest per setting, so that its service replicas stop before the next starts.
		ok := t.Run(mode.durability, func(t *testing.T) {
			s.t = t
			defer func() { s.t = nil }()
			rows := runStoreFaults(t, s, mode.durability, mode.faults)
			printStoreTable(rows)
			checkStoreRows(t, rows)
		})
		if !ok {
			break
		}
	}
}

// checkStoreRows asserts what each setting promises.
func checkStoreRows(t *testing.T, rows []storeRow) {
	t.Helper()
	for _, r := range rows {
		name := fmt.Sprintf("%s × %s × %s", r.durability, r.fault, r.domain)
		if r.o.ops == 0 {
			t.Errorf("%s: no operation succeeded", name)
		}
		if r.o.unavailable > storeUnavailableBound {
			t.Errorf("%s: unavailable for %v, want at most %v (the sentinels' down-after %v + failover timeout %v + a call's deadline %v)",
				name, r.o.unavailable.Round(100*time.Millisecond), storeUnavailableBound, downAfter, failoverTimeout, callTimeout)
		}
		switch {
		case r.durability == "replica":
			if r.o.lost != 0 || r.o.doubled != 0 || r.o.early != 0 {
				t.Errorf("%s: %d lost, %d doubled, %d early, want none", name, r.o.lost, r.o.doubled, r.o.early)
			}
		case r.domain == "rooms" && (r.o.lost != 0 || r.o.doubled != 0):
			// The Lobby and the rooms lost the same tail (one store), and the room's
			// occupancy seq jumps on a new primary, so its next snapshot puts the count
			// right: exact under async too (measured so; a loss here is not by construction).
			t.Errorf("%s: the Lobby counts %d viewers too few and %d too many after healing, want exact", name, r.o.lost, r.o.doubled)
		case r.fault == killHeld.name && (r.domain == "chat" || r.domain == "reservations") && r.o.lost == 0:
			// Chat posts and holds acknowledged while the link was held exist on the dead
			// primary only: if none is missing, the checker cannot see a loss.
			t.Errorf("%s: nothing lost, want the writes acknowledged while the replication link was held lost (async)", name)
		}
	}
}

// storeServices are one replica of each store domain (and the rooms' Lobby) on one store.
type storeServices struct {
	durability string
	clusters   map[string]*cluster
	lobby      lobbyv1.LobbyServiceClient
}

// startStoreServices starts them on the store at url with durability, their keys under prefix.
func startStoreServices(t *testing.T, url, prefix, durability string) *storeServices {
	t.Helper()
	env := envDurability + "=" + durability
	ss := &storeServices{durability: durability, clusters: map[string]*cluster{}}
	// The Lobby and the rooms share a prefix, as they share a Redis in production.
	lobbyc := startCluster(t, "lobby", url, prefix+"-rooms", 1, env)
	ss.lobby = lobbyv1.NewLobbyServiceClient(lobbyc.conn)
	for _, d := range storeDomains {
		more := []string{env}
		if d == "rooms" {
			more = append(more, envLobby+"="+lobbyc.replicas[0].front.addr())
		}
		ss.clusters[d] = startCluster(t, d, url, prefix+"-"+d, 1, more...)
	}
	return ss
}

// underLoad runs every domain's workload for warm, inflicts the fault named fault, lets faulted
// pass, heals, lets after pass, and checks each domain's history: one row per domain, and the
// locks' holds (for the check across the whole run). run names the workloads' keys.
func (ss *storeServices) underLoad(t *testing.T, run, fault string, warm, faulted, after time.Duration, inflict func() (heal func())) ([]storeRow, []hold) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, stop := context.WithCancel(context.Background())
	avails := map[string]*availability{}
	works := map[string]workload{}
	done := map[string]chan struct{}{}
	for _, d := range storeDomains {
		var w workload
		switch d {
		case "locks":
			w = &locksWorkload{name: run, resources: ss.durability}
		case "reservations":
			rw := &reservationsWorkload{name: run}
			if ss.durability == "async" {
				rw.patience = reservationTTL + 2*alarmLease
			}
			w = rw
		case "chat":
			w = &chatWorkload{name: run}
		case "rooms":
			w = &roomsWorkload{name: run, lobby: ss.lobby, churn: churners}
		}
		a := &availability{}
		a.start()
		avails[d], works[d], done[d] = a, w, make(chan struct{})
		go func() { w.run(ctx, ss.clusters[d].conn, a); close(done[d]) }()
	}
	phase(warm)
	at := time.Now()
	for _, w := range works {
		if fa, ok := w.(faultAware); ok {
			fa.faulted(at)
		}
	}
	heal := inflict()
	phase(faulted)
	at = time.Now()
	for _, w := range works {
		if fa, ok := w.(faultAware); ok {
			fa.healed(at)
		}
	}
	heal()
	phase(after)
	stop()
	gaps := map[string]time.Duration{}
	for _, d := range storeDomains {
		<-done[d]
		gaps[d] = avails[d].gap() // before the checks, which take their own time
	}
	var rows []storeRow
	for _, d := range storeDomains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			o, err := works[d].check(cctx, ss.clusters[d].conn)
			if err != nil {
				t.Errorf("%s × %s × %s: %v", ss.durability, fault, d, err)
			}
			// The rooms' own measure (a viewer without its stream) beside the gap between
			// operations; the other domains have only the gap.
			o.unavailable = max(o.unavailable, gaps[d])
			mu.Lock()
			rows = append(rows, storeRow{ss.durability, fault, d, o})
			mu.Unlock()
		}()
	}
	wg.Wait()
	return rows, works["locks"].(*locksWorkload).holds
}

// runStoreFaults starts one replica of each domain on the store with durability and runs the
// faults one after another, each under load, checking each fault's history and, at the end,
// every fencing token the run handed out.
func runStoreFaults(t *testing.T, s *store, durability string, faults []storeFault) []storeRow {
	ss := startStoreServices(t, s.url(), redistest.Prefix(t)+"-"+durability, durability)
	var rows []storeRow
	var allHolds []hold
	for fi, f := range faults {
		p := s.primary()
		fr, holds := ss.underLoad(t, fmt.Sprintf("%s-f%d", durability, fi), f.name, storeWarmup, storeFaulted, storeAfter, func() func() {
			heal := f.inflict(t, p)
			return func() {
				if f.failover {
					if np, err := s.agreedPrimary(); err != nil || np == p {
						t.Errorf("%s × %s: no failover from %s within %v (%v)", durability, f.name, p.name, storeFaulted, err)
					}
				}
				heal()
			}
		})
		rows = append(rows, fr...)
		allHolds = append(allHolds, holds...)
		// The next fault starts on a whole store: the faulted node back as a replica of the
		// primary the sentinels name then (whole, the store has one primary and two replicas).
		// If they failed over again while it healed, back to p, p is that one primary.
		np := s.waitHealed()
		t.Logf("%s: the primary was %s, is %s", f.name, p.name, np.name)
		if f.failover && np != p {
			if role, err := p.role(); err != nil || role != "slave" {
				t.Errorf("%s × %s: the old primary %s came back as %q (%v), want a replica", durability, f.name, p.name, role, err)
			}
		}
	}
	return append(rows, tokensRow(durability, allHolds))
}

// tokensRow checks fencing tokens across a whole run, every failover and restart included: a
// token handed out twice, or out of real-time order, is doubled.
func tokensRow(durability string, holds []hold) storeRow {
	o := checkHolds(holds, lockTTL)
	o.ops = len(holds)
	return storeRow{durability, "whole run (tokens)", "locks", o}
}

func printStoreTable(rows []storeRow) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "durability\tfault\tdomain\toperations\tlost\tdoubled\tearly\tlongest unavailable")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%v\n", r.durability, r.fault, r.domain, r.o.ops, r.o.lost, r.o.doubled, r.o.early, r.o.unavailable.Round(100*time.Millisecond))
	}
	_ = tw.Flush()
	fmt.Fprint(os.Stdout, "\n"+b.String()+"\n")
}
