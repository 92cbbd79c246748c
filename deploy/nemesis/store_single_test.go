//go:build nemesis

package nemesis

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// The schedule of a single Redis's restart: load for singleWarmup, the restart (SIGKILL, then
// a start on its files at once), load for singleAfter; then the history is checked.
const (
	singleWarmup = 3 * time.Second
	singleAfter  = 8 * time.Second
)

// restartOne is the single Redis's fault.
const restartOne = "Redis SIGKILLed, started at once"

// TestSingleRedisRestart SIGKILLs one Redis with no replica under the nemesis load of every
// store domain and starts it at once on its files: once under appendfsync everysec and async
// durability (what a one-Redis deployment runs by default), once under fsync durability
// (appendfsync always, no-appendfsync-on-rewrite no: the services refuse to start otherwise).
// Under fsync nothing acknowledged may be lost, doubled or early, and fencing tokens strictly
// increase across the restart; under everysec the table says what the kill cost, unasserted: a
// process's kill leaves its AOF writes with the kernel (Redis writes them before it replies,
// unless a slow background fsync makes it postpone a write, up to 2 s), and the window everysec
// leaves open (a host's crash before the second's fsync) is one a container cannot make (as in
// deploy/faulttest/durability_test.go), so a loss there is not by construction.
func TestSingleRedisRestart(t *testing.T) {
	for _, mode := range []struct {
		name, appendfsync, durability string
	}{
		{"everysec", "everysec", "async"},
		{"fsync", "always", "fsync"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			n := startSingle(t, mode.appendfsync)
			url := "redis://" + net.JoinHostPort(n.s.gw, n.front.port()) + "/0"
			ss := startStoreServices(t, url, redistest.Prefix(t), mode.durability)
			// The longest a domain may go without a successful operation across the restart:
			// the restart itself (the kill, docker's start and the AOF's replay, until the node
			// answers: 1-6 s measured, by the machine's load) and a call's deadline. A client
			// that did not reconnect would be unavailable for singleAfter at least.
			var bound time.Duration
			rows, holds := ss.underLoad(t, mode.name, restartOne, singleWarmup, 0, singleAfter, func() func() {
				began := time.Now()
				n.kill()
				n.start()
				wait.Within(t, time.Minute, n.name+" answering again", n.ping)
				bound = time.Since(began) + callTimeout
				return func() {}
			})
			rows = append(rows, tokensRow(mode.durability, holds))
			label := mode.durability + " (appendfsync " + mode.appendfsync + ", one Redis)"
			for i := range rows {
				rows[i].durability = label
			}
			printStoreTable(rows)
			t.Logf("the restart took %v: longest unavailable at most %v (locks %v)", (bound - callTimeout).Round(100*time.Millisecond), bound.Round(100*time.Millisecond), max(bound, lockTTL+callTimeout).Round(100*time.Millisecond))
			for _, r := range rows {
				name := fmt.Sprintf("%s × %s × %s", r.durability, r.fault, r.domain)
				if r.o.ops == 0 {
					t.Errorf("%s: no operation succeeded", name)
				}
				// A lock whose release could not reach the restarting Redis (each attempt fails
				// at once) stays held until its lease ends, which the next acquirer waits out:
				// up to lockTTL from the last grant before the kill, plus a call's deadline.
				// That is the lock's contract, not a slow reconnect (CI measured locks
				// unavailable 5 s across a restart that took 1.6 s, over the 4.6 s bound).
				domainBound := bound
				if r.domain == "locks" {
					domainBound = max(bound, lockTTL+callTimeout)
				}
				if r.o.unavailable > domainBound {
					t.Errorf("%s: unavailable for %v, want at most %v (the restart and a call's deadline %v; for locks at least a lease %v and a deadline)", name, r.o.unavailable.Round(100*time.Millisecond), domainBound.Round(100*time.Millisecond), callTimeout, lockTTL)
				}
				switch {
				case mode.durability == "fsync":
					if r.o.lost != 0 || r.o.doubled != 0 || r.o.early != 0 {
						t.Errorf("%s: %d lost, %d doubled, %d early, want none", name, r.o.lost, r.o.doubled, r.o.early)
					}
				case r.o.lost != 0 || r.o.doubled != 0 || r.o.early != 0:
					t.Logf("%s (recorded, not asserted): %d lost, %d doubled, %d early", name, r.o.lost, r.o.doubled, r.o.early)
				}
			}
		})
	}
}

// startSingle runs one Redis with no replica and no sentinel (appendonly yes, appendfsync as
// given) in a container on a docker network of the test's own, reached through a proxy of the
// test's that follows it across restarts.
func startSingle(t *testing.T, appendfsync string) *storeNode {
	t.Helper()
	s := newStore(t)
	n := &storeNode{s: s, name: s.id + "-n0"}
	n.front = newLinkProxy(t, s.gw, s.kind)
	s.nodes = []*storeNode{n}
	docker(t, "run", "-d", "--name", n.name, "--network", s.network, "--entrypoint", "vigil-redis", redistest.Image(),
		"bind 0.0.0.0", "protected-mode no", "dir /data", `save ""`,
		"appendonly yes", "appendfsync "+appendfsync, "no-appendfsync-on-rewrite no")
	n.retarget()
	wait.Within(t, time.Minute, n.name+" answering", n.ping)
	return n
}

// ping says whether n answers (a Redis loading its AOF answers LOADING: not yet).
func (n *storeNode) ping() error {
	c := n.client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}
