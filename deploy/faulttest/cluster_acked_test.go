//go:build faulttest

package faulttest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/pkg/alarm"
	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	chat "github.com/vigil-dev/vigil/services/chat/service"
	lobby "github.com/vigil-dev/vigil/services/lobby/service"
	locks "github.com/vigil-dev/vigil/services/locks/service"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

// The load on the cluster: contended lock resources and chat rooms, half of each on the master
// that is killed (the victim), half elsewhere; the lobby's keys share one hash tag, so the
// victim is the lobby's master and every lobby write is at stake.
const (
	clusterResources   = 4 // lock resources, 2 on the victim
	clusterLockWorkers = 8 // 2 per resource, so grants are contended
	clusterRooms       = 4 // chat rooms, 2 on the victim
	clusterPostWorkers = 8 // 2 per room, so ids are given out concurrently
	clusterLobbyWorker = 3
	clusterHoldWorkers = 3
	// clusterLockTTL is each grant's lease: a grant whose release is unknown blocks its
	// resource this long at most.
	clusterLockTTL = 5 * time.Second
	// clusterCallTimeout is each call's deadline; a call that misses it is unknown.
	clusterCallTimeout = 2 * time.Second
	// clusterAcrossTTL is the lease of the grants held across the kill: longer than the
	// failover and the restart of the killed master take.
	clusterAcrossTTL = 60 * time.Second
)

// TestClusterMasterKilledLosesNothingAcknowledged runs locks, chat, lobby and reservations on
// one Redis Cluster (3 masters with a replica each) under concurrent gRPC load and SIGKILLs the
// master that serves the lobby and half of the lock resources and chat rooms, with writes in
// flight and without waiting for its replica first; the cluster promotes the replica by itself
// (node timeout 1 s, no CLUSTER FAILOVER) and the load goes on. Under replica durability every
// acknowledged write survives: each chat post once, under the id it was given, ids strictly
// increasing per room in the order posts were acknowledged; each lock grant's fencing token
// above every token acknowledged before it was asked for, no grant while an earlier one's
// holder could still hold it, and a grant held across the kill still held after it; each lobby
// room and its acknowledged occupancy; each reservation and its confirmation. A call answered
// UNAVAILABLE (or past its deadline) is unknown, never lost. Replica durability is run twice:
// killed as it is, and with the victim's replication link cut first, as in the async run, where
// the loss must show: that is the proof the checks can fail.
func TestClusterMasterKilledLosesNothingAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name       string
		durability redisx.Durability
		linkHeld   bool
	}{
		{"replica", redisx.Replica, false},
		{"replica_link_held", redisx.Replica, true},
		{"async_link_held", redisx.Async, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startClusterRun(t, tc.name, tc.durability)
			r.warmUp()
			var across []grant
			if tc.durability == redisx.Async {
				// Taken once the link is cut, so that the grants exist on the victim alone.
				r.holdLink()
				across = r.holdAcross()
			} else {
				// Taken before: with the link cut, no write on the victim is acknowledged.
				across = r.holdAcross()
				if tc.linkHeld {
					r.holdLink()
				}
			}
			r.killVictim()
			if tc.durability != redisx.Async {
				// The promoted replica has no replica of its own, so under replica durability
				// no write on its slots is confirmed (UNAVAILABLE, outcome unknown) until the
				// killed master is back, as its replica.
				r.cl.Start(t, r.victim)
				r.waitLinked()
			}
			r.releaseAcross(across)
			r.continueAfter()
			l := r.check()
			if tc.durability != redisx.Async {
				if l.total() > 0 {
					t.Errorf("replica durability lost acknowledged writes: %s", l)
				}
				return
			}
			// What was acknowledged while the link was held exists on the dead master only:
			// if a domain shows no loss, its check cannot see one.
			if l.posts == 0 || l.locks == 0 || l.rooms == 0 || l.holds == 0 {
				t.Errorf("async with the replication link held: %s; want a loss in every domain", l)
			}
		})
	}
}

// clusterRun is one cluster, the four services on it, the load and what it acknowledged.
type clusterRun struct {
	t            *testing.T
	name         string // the subtest's, in log lines
	durability   redisx.Durability
	cl           *redistest.Cluster
	prefix       string
	victim       string
	rooms        []string
	resources    []string
	onVictim     map[string]bool // room or resource → on the victim
	holdShards   map[int]bool    // reservation shards on the victim
	holdQueue    *alarm.Queue    // the reservations' shard rule
	locks        locksv1.LockServiceClient
	chat         chatv1.ChatServiceClient
	lobby        lobbyv1.LobbyServiceClient
	reservations reservationsv1.ReservationServiceClient

	stop    chan struct{}
	workers sync.WaitGroup
	began   time.Time
	killed  time.Time

	mu         sync.Mutex
	grants     map[string][]grant     // resource → acknowledged grants
	posts      map[string][]post      // room → acknowledged posts
	lobbyRooms map[string]*lobbyState // lobby code → what was acknowledged
	holds      map[string]holdState   // reservation id → what was acknowledged
	calls      map[string]*callCount  // domain → outcomes
	// victimAcks counts acknowledged writes on the victim's keys, per domain, to know the
	// load reached it before and after the fault.
	victimAcks map[string]*atomic.Int64
}

type grant struct {
	owner       string
	token       int64 // -1: lost (its release found the lock gone before its lease ended)
	ttl         time.Duration
	sent, acked time.Time
	releaseSent time.Time
}

type post struct {
	postID      string
	id          int64
	sent, acked time.Time
}

type lobbyState struct {
	viewers   int32 // occupancy deltas acknowledged as applied
	uncertain int32 // deltas whose answer was unknown (at most the last one: the room is left then)
}

type holdState int

const (
	held holdState = iota
	heldOrConfirmed
	confirmed
)

type callCount struct{ acked, unknown, other int }

// lossCount is what the check found missing or wrong, per domain.
type lossCount struct {
	posts, postOrder, locks, lockOrder, rooms, occupancy, holds int
}

func (l lossCount) total() int {
	return l.posts + l.postOrder + l.locks + l.lockOrder + l.rooms + l.occupancy + l.holds
}

func (l lossCount) String() string {
	return fmt.Sprintf("%d chat posts lost, %d posts out of order or sharing an id, %d lock grants lost, %d fencing tokens out of order or with two owners, %d lobby rooms lost, %d rooms with acknowledged occupancy lost, %d reservations lost or unconfirmed",
		l.posts, l.postOrder, l.locks, l.lockOrder, l.rooms, l.occupancy, l.holds)
}

func startClusterRun(t *testing.T, name string, durability redisx.Durability) *clusterRun {
	t0 := time.Now()
	cl := redistest.StartCluster(t, 3)
	t.Logf("%s: cluster of 6 nodes up in %v", name, time.Since(t0).Round(time.Millisecond))
	r := &clusterRun{t: t, name: name, durability: durability, cl: cl, prefix: redistest.Prefix(t),
		onVictim: map[string]bool{}, stop: make(chan struct{}),
		grants: map[string][]grant{}, posts: map[string][]post{}, lobbyRooms: map[string]*lobbyState{},
		holds: map[string]holdState{}, calls: map[string]*callCount{}, victimAcks: map[string]*atomic.Int64{}}
	for _, d := range []string{"locks", "chat", "lobby", "reservations"} {
		r.calls[d] = &callCount{}
		r.victimAcks[d] = &atomic.Int64{}
	}
	r.victim = cl.MasterOf(t, r.prefix+":{lobby}:version")
	// Half the rooms and resources on the victim, half elsewhere, picked by the slot of the
	// keys the services will use.
	lockQueue, err := alarm.New(nil, alarm.Options{Prefix: r.prefix, Namespace: locks.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	r.rooms = pickHalf(t, cl, r.victim, clusterRooms, "room", func(name string) string {
		return redisx.Tag(r.prefix+":chat:"+name) + ":seq"
	}, r.onVictim)
	r.resources = pickHalf(t, cl, r.victim, clusterResources, "resource", func(name string) string {
		return lockQueue.KeysOf(name).Tag + ":fence"
	}, r.onVictim)
	if r.holdQueue, err = alarm.New(nil, alarm.Options{Prefix: r.prefix, Namespace: "reservations"}); err != nil {
		t.Fatal(err)
	}
	r.holdShards = map[int]bool{}
	for shard := range 16 { // the reservations service's default shard count
		if cl.MasterOf(t, r.holdQueue.Keys(shard).Alarms) == r.victim {
			r.holdShards[shard] = true
		}
	}

	redisCfg := redisx.Config{ClusterAddrs: cl.Addrs(), Durability: durability}
	core := func() server.Core {
		return server.Core{Redis: redisCfg, Prefix: r.prefix, Logger: newEvents().Logger()}
	}
	r.locks = locksv1.NewLockServiceClient(start(t, servertest.Serve(locks.New, locks.Options{Core: core()})))
	r.chat = chatv1.NewChatServiceClient(start(t, servertest.Serve(chat.New, chat.Options{Core: core(), HistoryKeep: 1_000_000})))
	r.lobby = lobbyv1.NewLobbyServiceClient(start(t, servertest.Serve(lobby.New, lobby.Options{Core: core()})))
	r.reservations = reservationsv1.NewReservationServiceClient(start(t, servertest.Serve(reservations.New, reservations.Options{Core: core()})))
	t.Cleanup(r.stopLoad)
	r.startLoad()
	return r
}

// pickHalf names n objects, half of whose keys (keyOf) the victim serves.
func pickHalf(t *testing.T, cl *redistest.Cluster, victim string, n int, kind string, keyOf func(string) string, onVictim map[string]bool) []string {
	t.Helper()
	var on, off []string
	for i := 0; len(on) < n/2 || len(off) < n-n/2; i++ {
		if i > 200 {
			t.Fatalf("no %d %ss found half on %s", n, kind, victim)
		}
		name := fmt.Sprintf("%s-%d", kind, i)
		if cl.MasterOf(t, keyOf(name)) == victim {
			if len(on) < n/2 {
				on = append(on, name)
				onVictim[name] = true
			}
		} else if len(off) < n-n/2 {
			off = append(off, name)
		}
	}
	return append(on, off...)
}

// count records one call's outcome: acknowledged, unknown (UNAVAILABLE, past its deadline) or
// any other error (reported; a refusal that says nothing happened).
func (r *clusterRun) count(domain string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls[domain]
	switch code := status.Code(err); {
	case err == nil:
		c.acked++
	case code == codes.Unavailable || code == codes.DeadlineExceeded:
		c.unknown++
	default:
		c.other++
	}
}

func (r *clusterRun) startLoad() {
	r.began = time.Now()
	var seq atomic.Int64
	for w := range clusterLockWorkers {
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			r.lockLoop(r.resources[w%len(r.resources)], w, &seq)
		}()
	}
	for w := range clusterPostWorkers {
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			r.postLoop(r.rooms[w%len(r.rooms)], w, &seq)
		}()
	}
	for range clusterLobbyWorker {
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			r.lobbyLoop()
		}()
	}
	for w := range clusterHoldWorkers {
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			r.holdLoop(w, &seq)
		}()
	}
}

func (r *clusterRun) stopLoad() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.workers.Wait()
}

func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), clusterCallTimeout)
}

// lockLoop acquires res (waiting for it), records the grant and releases it at once.
func (r *clusterRun) lockLoop(res string, w int, seq *atomic.Int64) {
	for !stopped(r.stop) {
		owner := fmt.Sprintf("w%d-%d", w, seq.Add(1))
		ctx, cancel := callCtx()
		sent := time.Now()
		a, err := r.locks.Acquire(ctx, &locksv1.AcquireRequest{Resource: res, Owner: owner,
			TtlMs: ptr(clusterLockTTL.Milliseconds()), WaitMs: ptr(int64(1000))})
		acked := time.Now()
		cancel()
		r.count("locks", err)
		if err == nil && !a.GetAcquired() {
			continue // the wait ran out: no grant
		}
		g := grant{owner: owner, token: a.GetFencingToken(), ttl: clusterLockTTL, sent: sent, acked: acked}
		// A grant whose answer was lost may still be held: release it too (owner-checked).
		r.release(res, g, err == nil)
	}
}

// release releases g's lock on res and, when g was acknowledged, records it: as lost if the
// release found the lock gone (or another's) before g's lease could end.
func (r *clusterRun) release(res string, g grant, acked bool) {
	ctx, cancel := callCtx()
	g.releaseSent = time.Now()
	rel, err := r.locks.Release(ctx, &locksv1.ReleaseRequest{Resource: res, Owner: g.owner})
	cancel()
	if !acked {
		return
	}
	r.count("locks", err)
	if err == nil && !rel.GetReleased() && g.releaseSent.Before(g.sent.Add(g.ttl)) {
		g.token = -1
	}
	r.mu.Lock()
	r.grants[res] = append(r.grants[res], g)
	r.mu.Unlock()
	if r.onVictim[res] {
		r.victimAcks["locks"].Add(1)
	}
}

// holdAcross acquires every lock resource on the victim for clusterAcrossTTL, to hold it
// through the kill: the other workers wait, and the release afterwards must find it still held.
func (r *clusterRun) holdAcross() []grant {
	var gs []grant
	for _, res := range r.resources {
		if !r.onVictim[res] {
			continue
		}
		owner := "across-" + res
		wait.For(r.t, "a grant of "+res+" to hold across the kill", func() error {
			ctx, cancel := callCtx()
			defer cancel()
			sent := time.Now()
			a, err := r.locks.Acquire(ctx, &locksv1.AcquireRequest{Resource: res, Owner: owner,
				TtlMs: ptr(clusterAcrossTTL.Milliseconds()), WaitMs: ptr(int64(1000))})
			r.count("locks", err)
			if err != nil || !a.GetAcquired() {
				if err != nil {
					// Unknown: it may be held, and a retry by the same owner is refused.
					r.release(res, grant{owner: owner}, false)
				}
				return fmt.Errorf("acquired %v, %v", a.GetAcquired(), err)
			}
			gs = append(gs, grant{owner: owner, token: a.GetFencingToken(), ttl: clusterAcrossTTL, sent: sent, acked: time.Now()})
			return nil
		})
	}
	r.t.Logf("%s: %d lock grants held across the kill, until the failover is over", r.name, len(gs))
	return gs
}

// releaseAcross releases what holdAcross acquired; check counts a release that found the
// lock gone as a lost grant.
func (r *clusterRun) releaseAcross(gs []grant) {
	for _, g := range gs {
		r.release(strings.TrimPrefix(g.owner, "across-"), g, true)
	}
}

// postLoop posts to room, each post with its own idempotency key (also its body).
func (r *clusterRun) postLoop(room string, w int, seq *atomic.Int64) {
	for !stopped(r.stop) {
		id := fmt.Sprintf("p%d-%d", w, seq.Add(1))
		ctx, cancel := callCtx()
		sent := time.Now()
		m, err := r.chat.PostMessage(ctx, &chatv1.PostMessageRequest{Room: room, UserId: "u1", Username: "writer", Body: id, PostId: id})
		acked := time.Now()
		cancel()
		r.count("chat", err)
		if err != nil {
			continue
		}
		r.mu.Lock()
		r.posts[room] = append(r.posts[room], post{postID: id, id: m.GetMessage().GetId(), sent: sent, acked: acked})
		r.mu.Unlock()
		if r.onVictim[room] {
			r.victimAcks["chat"].Add(1)
		}
	}
}

// lobbyLoop creates a room and raises its occupancy by one delta at a time, five times; a
// delta whose answer is unknown ends the room (the next delta's sequence number would be a
// guess), as does an error creating it.
func (r *clusterRun) lobbyLoop() {
	for !stopped(r.stop) {
		ctx, cancel := callCtx()
		c, err := r.lobby.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{Name: "practice", Video: &lobbyv1.Video{Title: "t", DurationMs: 60_000}})
		cancel()
		r.count("lobby", err)
		if err != nil {
			continue
		}
		st := &lobbyState{}
		r.mu.Lock()
		r.lobbyRooms[c.GetCode()] = st
		r.mu.Unlock()
		r.victimAcks["lobby"].Add(1)
		for seq := int64(1); seq <= 5 && !stopped(r.stop); seq++ {
			ctx, cancel := callCtx()
			d, err := r.lobby.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: c.GetCode(), Seq: seq, ViewersDelta: 1})
			cancel()
			r.count("lobby", err)
			r.mu.Lock()
			switch {
			case err != nil:
				st.uncertain++
			case d.GetOutcome() == lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED:
				st.viewers++
			default:
				// STALE or RESYNC after acknowledged deltas: the lobby lost one; check sees
				// the occupancy short.
			}
			r.mu.Unlock()
			if err != nil || d.GetOutcome() != lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED {
				break
			}
			r.victimAcks["lobby"].Add(1)
		}
	}
}

// holdLoop creates reservations and confirms each.
func (r *clusterRun) holdLoop(w int, seq *atomic.Int64) {
	for !stopped(r.stop) {
		id := fmt.Sprintf("h%d-%d", w, seq.Add(1))
		ctx, cancel := callCtx()
		_, err := r.reservations.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{ReservationId: id, TtlSeconds: 3600})
		cancel()
		r.count("reservations", err)
		if err != nil {
			continue
		}
		ctx, cancel = callCtx()
		_, err = r.reservations.ConfirmReservation(ctx, &reservationsv1.ConfirmReservationRequest{ReservationId: id})
		cancel()
		r.count("reservations", err)
		st := confirmed
		if err != nil {
			st = heldOrConfirmed
		}
		r.mu.Lock()
		r.holds[id] = st
		r.mu.Unlock()
		if r.holdShards[r.holdQueue.ShardOf(id)] {
			r.victimAcks["reservations"].Add(1)
		}
	}
}

func (r *clusterRun) unknownCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		n += c.unknown
	}
	return n
}

func (r *clusterRun) victimCounts() string {
	return fmt.Sprintf("%d lock grants, %d chat posts, %d lobby writes, %d reservations",
		r.victimAcks["locks"].Load(), r.victimAcks["chat"].Load(), r.victimAcks["lobby"].Load(), r.victimAcks["reservations"].Load())
}

// waitVictimAcks waits until the victim's keys took n more acknowledged writes in each of
// locks, chat, lobby and reservations than they had at the call.
func (r *clusterRun) waitVictimAcks(what string, locksN, chatN, lobbyN, holdsN int64) {
	r.t.Helper()
	l0, c0, b0, h0 := r.victimAcks["locks"].Load(), r.victimAcks["chat"].Load(), r.victimAcks["lobby"].Load(), r.victimAcks["reservations"].Load()
	wait.Within(r.t, 60*time.Second, what, func() error {
		l, c, b, h := r.victimAcks["locks"].Load()-l0, r.victimAcks["chat"].Load()-c0, r.victimAcks["lobby"].Load()-b0, r.victimAcks["reservations"].Load()-h0
		if l >= locksN && c >= chatN && b >= lobbyN && h >= holdsN {
			return nil
		}
		return fmt.Errorf("%d lock grants, %d posts, %d lobby writes, %d reservations acknowledged on the victim's keys so far", l, c, b, h)
	})
}

func (r *clusterRun) warmUp() {
	r.waitVictimAcks("load on the victim's keys before the fault", 50, 100, 30, 10)
	r.t.Logf("%s: before the fault, acknowledged on the victim's keys: %s (%v of load)", r.name, r.victimCounts(), time.Since(r.began).Round(time.Millisecond))
}

// holdLink cuts the victim's replication link and keeps it cut while the victim goes on
// taking writes: the victim's default user may no longer run PSYNC or SYNC (the services never
// do), and its replica's connection is closed, so the replica's retries are refused. Neither
// docker pause of the replica nor CLIENT PAUSE on it holds the stream: the first leaves it in
// the replica's socket buffer, most of it read on unpause, the second does not stop a replica
// applying its master's stream (Redis 7.0). Under async it waits for writes acknowledged on
// the victim meanwhile; under replica, where none can be, for calls answered unknown.
func (r *clusterRun) holdLink() {
	t := r.t
	replica := r.cl.ReplicaOf(t, r.victim)
	ctx := context.Background()
	vc := redis.NewClient(&redis.Options{Addr: r.victim})
	defer vc.Close()
	if err := vc.Do(ctx, "ACL", "SETUSER", "default", "-psync", "-sync").Err(); err != nil {
		t.Fatalf("ACL SETUSER on %s: %v", r.victim, err)
	}
	if err := vc.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		t.Fatalf("CLIENT KILL TYPE replica on %s: %v", r.victim, err)
	}
	rc := redis.NewClient(&redis.Options{Addr: replica})
	defer rc.Close()
	wait.For(t, "the replica's link to the victim down", func() error {
		info, err := rc.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:down") {
			return errors.New("master_link_status not down")
		}
		return nil
	})
	if r.durability == redisx.Async {
		r.waitVictimAcks("writes on the victim while its link is held", 20, 50, 20, 10)
	} else {
		u0 := r.unknownCalls()
		wait.Until(t, "calls on the victim answered unknown while its link is held", func() bool { return r.unknownCalls() >= u0+10 })
	}
	r.t.Logf("%s: replication link of %s held; acknowledged on the victim's keys: %s", r.name, r.victim, r.victimCounts())
}

// killVictim SIGKILLs the victim with the load running and waits for the cluster to promote
// its replica by itself.
func (r *clusterRun) killVictim() {
	r.t.Logf("%s: at the kill, acknowledged on the victim's keys: %s", r.name, r.victimCounts())
	r.killed = time.Now()
	r.cl.Kill(r.t, r.victim)
	r.cl.WaitHealthy(r.t, 30*time.Second)
	r.t.Logf("%s: master %s SIGKILLed; the cluster promoted its replica %v later", r.name, r.victim, time.Since(r.killed).Round(time.Millisecond))
}

// waitLinked waits until the master now serving the lobby has a replica online again.
func (r *clusterRun) waitLinked() {
	r.t.Helper()
	master := r.cl.MasterOf(r.t, r.prefix+":{lobby}:version")
	mc := redis.NewClient(&redis.Options{Addr: master})
	defer mc.Close()
	wait.Within(r.t, 60*time.Second, "the restarted master to replicate the new one", func() error {
		info, err := mc.Info(context.Background(), "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "state=online") {
			return errors.New("no replica online")
		}
		return nil
	})
	r.t.Logf("%s: %s is back as a replica of %s, %v after the kill", r.name, r.victim, master, time.Since(r.killed).Round(time.Millisecond))
}

func (r *clusterRun) continueAfter() {
	r.waitVictimAcks("load on the victim's keys after the failover", 50, 100, 30, 10)
	r.stopLoad()
	r.t.Logf("%s: load stopped %v after the kill, %v after it began", r.name, time.Since(r.killed).Round(time.Millisecond), time.Since(r.began).Round(time.Millisecond))
}

// check compares everything acknowledged with what the services answer now.
func (r *clusterRun) check() lossCount {
	t := r.t
	ctx := context.Background()
	var l lossCount
	var nGrants, nPosts, nOccupancy int
	for _, res := range r.resources {
		gs := r.grants[res]
		nGrants += len(gs)
		lost, order := checkGrants(t, res, gs)
		l.locks += lost
		l.lockOrder += order
	}
	for _, room := range r.rooms {
		nPosts += len(r.posts[room])
		lost, order := r.checkPosts(ctx, room)
		l.posts += lost
		l.postOrder += order
	}
	for code, st := range r.lobbyRooms {
		nOccupancy += int(st.viewers)
		g, err := r.lobby.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: code})
		if err != nil {
			if status.Code(err) != codes.NotFound {
				t.Fatalf("GetRoom(%s): %v", code, err)
			}
			l.rooms++
			continue
		}
		if v := g.GetRoom().GetViewers(); v < st.viewers || v > st.viewers+st.uncertain {
			l.occupancy++
			if l.occupancy <= 3 {
				t.Logf("%s: room %s has %d viewers, want %d acknowledged (+%d unknown)", r.name, code, v, st.viewers, st.uncertain)
			}
		}
	}
	for id, st := range r.holds {
		g, err := r.reservations.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: id})
		if err != nil && status.Code(err) != codes.NotFound {
			t.Fatalf("GetReservation(%s): %v", id, err)
		}
		switch s := g.GetReservation().GetStatus(); {
		case s == "confirmed":
		case s == "held" && st != confirmed:
		default:
			l.holds++
		}
	}
	confirmedN := 0
	for _, st := range r.holds {
		if st == confirmed {
			confirmedN++
		}
	}
	for _, d := range []string{"locks", "chat", "lobby", "reservations"} {
		c := r.calls[d]
		t.Logf("%s: %-12s calls: %d acknowledged, %d unknown (UNAVAILABLE or past the deadline), %d refused otherwise",
			r.name, d, c.acked, c.unknown, c.other)
	}
	t.Logf("%s: at stake: %d lock grants on %d resources, %d chat posts in %d rooms, %d lobby rooms with %d occupancy deltas, %d reservations (%d confirmed)",
		r.name, nGrants, len(r.resources), nPosts, len(r.rooms), len(r.lobbyRooms), nOccupancy, len(r.holds), confirmedN)
	t.Logf("%s: after the failover: %s", r.name, l)
	return l
}

// checkGrants checks one resource's acknowledged grants: none lost (released as its owner),
// every token above each token acknowledged before its acquire was sent, and no grant
// acknowledged while an earlier grant's holder could still hold the lock (its release not yet
// sent and its lease not over). It returns (lost, out of order or overlapping).
func checkGrants(t *testing.T, res string, gs []grant) (lost, bad int) {
	sort.Slice(gs, func(i, j int) bool { return gs[i].token < gs[j].token })
	for i, g := range gs {
		if g.token < 0 {
			lost++
			continue
		}
		for _, e := range gs[:i] {
			if e.token < 0 {
				continue
			}
			switch {
			case e.token == g.token:
				bad++
				logBad(t, bad, "%s: token %d given to %s and %s", res, g.token, e.owner, g.owner)
			case g.acked.Before(e.sent):
				// g was acknowledged before e was asked for, yet e has the larger token.
				bad++
				logBad(t, bad, "%s: %s got token %d after %s got %d", res, e.owner, e.token, g.owner, g.token)
			case g.acked.Before(e.releaseSent) && g.acked.Before(e.sent.Add(e.ttl)):
				bad++
				logBad(t, bad, "%s: %s (token %d) granted while %s (token %d) held it", res, g.owner, g.token, e.owner, e.token)
			}
		}
	}
	return lost, bad
}

func logBad(t *testing.T, n int, format string, args ...any) {
	if n <= 3 {
		t.Logf(format, args...)
	}
}

// checkPosts reads room's whole history and checks each acknowledged post is there once under
// the id it was given, ids strictly increase in the history and in the order posts were
// acknowledged, and no id was given to two posts. It returns (lost, out of order or doubled).
func (r *clusterRun) checkPosts(ctx context.Context, room string) (lost, bad int) {
	t := r.t
	byBody := map[string][]int64{}
	var since, last int64
	for {
		m, err := r.chat.ListMessages(ctx, &chatv1.ListMessagesRequest{Room: room, Limit: 100, Since: ptr(since)})
		if err != nil {
			t.Fatalf("ListMessages(%s): %v", room, err)
		}
		for _, msg := range m.GetMessages() {
			if msg.GetId() <= last {
				bad++
				logBad(t, bad, "%s: history id %d after %d", room, msg.GetId(), last)
			}
			last = msg.GetId()
			byBody[msg.GetBody()] = append(byBody[msg.GetBody()], msg.GetId())
			since = msg.GetId()
		}
		if len(m.GetMessages()) == 0 {
			break
		}
	}
	posts := r.posts[room]
	givenTo := map[int64]string{}
	for _, p := range posts {
		if other, ok := givenTo[p.id]; ok {
			bad++
			logBad(t, bad, "%s: id %d acknowledged to %s and %s", room, p.id, other, p.postID)
		}
		givenTo[p.id] = p.postID
		switch ids := byBody[p.postID]; {
		case len(ids) == 0:
			lost++
			logBad(t, lost, "%s: post %s (id %d) lost", room, p.postID, p.id)
		case len(ids) > 1 || ids[0] != p.id:
			bad++
			logBad(t, bad, "%s: post %s acknowledged as id %d, history has %v", room, p.postID, p.id, ids)
		}
	}
	// Acknowledged before the other was sent: the smaller id.
	sort.Slice(posts, func(i, j int) bool { return posts[i].acked.Before(posts[j].acked) })
	for i, p := range posts {
		for _, q := range posts[i+1:] {
			if p.acked.Before(q.sent) && p.id >= q.id {
				bad++
				logBad(t, bad, "%s: %s got id %d after %s got %d", room, q.postID, q.id, p.postID, p.id)
			}
		}
	}
	return lost, bad
}
