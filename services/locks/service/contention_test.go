package service_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/pkg/lockclient"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
)

// lockInput and lockOutput are one call of the contention history.
type lockInput struct {
	release bool
	owner   string
	wait    bool
}

type lockOutput struct {
	ok    bool // acquired or released
	token int64
}

type lockState struct {
	holder string
	token  int64 // the last token issued
}

// lockModel is the lock's sequential specification: a free lock goes to the first acquirer
// with a larger token than any before, the holder re-acquires with the same token, anyone
// else is refused; only the holder releases.
var lockModel = porcupine.Model{
	Init: func() any { return lockState{} },
	Step: func(st, in, out any) (bool, any) {
		s, i, o := st.(lockState), in.(lockInput), out.(lockOutput)
		switch {
		case i.release && s.holder == i.owner:
			return o.ok, lockState{token: s.token}
		case i.release:
			return !o.ok, s
		case s.holder == "":
			return o.ok && o.token > s.token, lockState{holder: i.owner, token: o.token}
		case s.holder == i.owner:
			return o.ok && o.token == s.token, s
		default:
			return !o.ok, s
		}
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(lockInput), out.(lockOutput)
		if i.release {
			return fmt.Sprintf("release(%s) -> %v", i.owner, o.ok)
		}
		return fmt.Sprintf("acquire(%s, wait=%v) -> %v, %d", i.owner, i.wait, o.ok, o.token)
	},
}

// hold is one observed hold: certainly held from the acquire's answer to the release's call.
type hold struct {
	owner      string
	token      int64
	start, end time.Duration
}

// lockOps is how one contention client calls the service: acquire (waiting or not) and
// release, answering what the model needs.
type lockOps struct {
	acquire func(ctx context.Context, wait bool) (ok bool, token int64, err error)
	release func(ctx context.Context) (ok bool, err error)
}

// unaryOps calls the unary RPCs.
func unaryOps(lc locksv1.LockServiceClient, resource, owner string) lockOps {
	return lockOps{
		acquire: func(ctx context.Context, wait bool) (bool, int64, error) {
			req := &locksv1.AcquireRequest{Resource: resource, Owner: owner, TtlMs: ms(30000)}
			if wait {
				req.WaitMs = ms(30000)
			}
			res, err := lc.Acquire(ctx, req)
			return res.GetAcquired(), res.GetFencingToken(), err
		},
		release: func(ctx context.Context) (bool, error) {
			rel, err := lc.Release(ctx, &locksv1.ReleaseRequest{Resource: resource, Owner: owner})
			return rel.GetReleased(), err
		},
	}
}

// sessionOps calls through pkg/lockclient, whose mutexes share one session stream per client.
func sessionOps(c *lockclient.Client, resource, owner string) lockOps {
	m := c.Mutex(resource, lockclient.MutexOptions{Owner: owner, TTL: 30 * time.Second})
	return lockOps{
		acquire: func(ctx context.Context, wait bool) (bool, int64, error) {
			var err error
			if wait {
				err = m.Lock(ctx)
			} else if err = m.TryLock(ctx); errors.Is(err, lockclient.ErrLocked) {
				return false, 0, nil
			}
			if err != nil {
				return false, 0, err
			}
			return true, m.FencingToken(), nil
		},
		release: func(ctx context.Context) (bool, error) {
			err := m.Unlock(ctx)
			if errors.Is(err, lockclient.ErrNotHeld) {
				return false, nil
			}
			return err == nil, err
		},
	}
}

func TestMutualExclusionUnderContention(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	conns := []locksv1.LockServiceClient{e.locks, locksv1.NewLockServiceClient(servertest.Dial(t, e.addr)), locksv1.NewLockServiceClient(servertest.Dial(t, e.addr))}
	checkContention(t, func(c int) lockOps {
		return unaryOps(conns[c%len(conns)], "contended", fmt.Sprintf("client-%d", c))
	})
}

// The same history check with session clients: three lockclient.Clients (three streams),
// each shared by several contending mutexes.
func TestMutualExclusionUnderContentionOverSessions(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	clients := []*lockclient.Client{lockclient.New(servertest.Dial(t, e.addr)), lockclient.New(servertest.Dial(t, e.addr)), lockclient.New(servertest.Dial(t, e.addr))}
	for _, c := range clients {
		t.Cleanup(func() { _ = c.Close() })
	}
	checkContention(t, func(c int) lockOps {
		return sessionOps(clients[c%len(clients)], "contended", fmt.Sprintf("client-%d", c))
	})
}

// checkContention runs 16 clients for 25 rounds each on one lock, mostly waiting in its queue,
// sometimes trying once, and checks the history: holds never overlap, tokens grow in hold
// order, and porcupine finds the calls linearizable against lockModel.
func checkContention(t *testing.T, opsOf func(client int) lockOps) {
	const clients, rounds = 16, 25
	base := time.Now()
	var (
		mu    sync.Mutex
		ops   []porcupine.Operation
		holds []hold
		wg    sync.WaitGroup
	)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock := opsOf(c)
			owner := fmt.Sprintf("client-%d", c)
			for range rounds {
				wait := rand.IntN(3) > 0 // mostly wait in the queue, sometimes try once
				call := time.Since(base)
				acquired, token, err := lock.acquire(context.Background(), wait)
				ret := time.Since(base)
				if err != nil {
					t.Errorf("Acquire(contended, %s) error: %v", owner, err)
					return
				}
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: lockInput{owner: owner, wait: wait},
					Call: int64(call), Output: lockOutput{ok: acquired, token: token}, Return: int64(ret)})
				mu.Unlock()
				if !acquired {
					continue
				}
				relCall := time.Since(base)
				released, err := lock.release(context.Background())
				relRet := time.Since(base)
				if err != nil {
					t.Errorf("Release(contended, %s) error: %v", owner, err)
					return
				}
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: lockInput{release: true, owner: owner},
					Call: int64(relCall), Output: lockOutput{ok: released}, Return: int64(relRet)})
				holds = append(holds, hold{owner: owner, token: token, start: ret, end: relCall})
				mu.Unlock()
				if !released {
					t.Errorf("Release(contended, %s) = false while holding it", owner)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(holds) < clients*rounds/2 {
		t.Errorf("only %d of %d rounds got the lock; waiting clients should nearly always get it", len(holds), clients*rounds)
	}

	sort.Slice(holds, func(i, j int) bool { return holds[i].start < holds[j].start })
	for i := 1; i < len(holds); i++ {
		a, b := holds[i-1], holds[i]
		if b.start < a.end {
			t.Errorf("holds overlap: %s (token %d) held until %v, %s (token %d) from %v", a.owner, a.token, a.end, b.owner, b.token, b.start)
		}
		if b.token <= a.token {
			t.Errorf("tokens out of hold order: %s had %d, then %s had %d", a.owner, a.token, b.owner, b.token)
		}
	}

	res := porcupine.CheckOperationsTimeout(lockModel, ops, 30*time.Second)
	if res != porcupine.Ok {
		t.Errorf("history of %d calls is not linearizable against the lock model: %v", len(ops), res)
	}
}
