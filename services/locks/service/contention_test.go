package service_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
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

func TestMutualExclusionUnderContention(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	const clients, rounds = 16, 25
	conns := []locksv1.LockServiceClient{e.locks, locksv1.NewLockServiceClient(dial(t, e.addr)), locksv1.NewLockServiceClient(dial(t, e.addr))}
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
			lc := conns[c%len(conns)]
			owner := fmt.Sprintf("client-%d", c)
			for range rounds {
				wait := rand.IntN(3) > 0 // mostly wait in the queue, sometimes try once
				req := &locksv1.AcquireRequest{Resource: "contended", Owner: owner, TtlMs: ms(30000)}
				if wait {
					req.WaitMs = ms(30000)
				}
				call := time.Since(base)
				res, err := lc.Acquire(context.Background(), req)
				ret := time.Since(base)
				if err != nil {
					t.Errorf("Acquire(contended, %s) error: %v", owner, err)
					return
				}
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: lockInput{owner: owner, wait: wait},
					Call: int64(call), Output: lockOutput{ok: res.GetAcquired(), token: res.GetFencingToken()}, Return: int64(ret)})
				mu.Unlock()
				if !res.GetAcquired() {
					continue
				}
				relCall := time.Since(base)
				rel, err := lc.Release(context.Background(), &locksv1.ReleaseRequest{Resource: "contended", Owner: owner})
				relRet := time.Since(base)
				if err != nil {
					t.Errorf("Release(contended, %s) error: %v", owner, err)
					return
				}
				mu.Lock()
				ops = append(ops, porcupine.Operation{ClientId: c, Input: lockInput{release: true, owner: owner},
					Call: int64(relCall), Output: lockOutput{ok: rel.GetReleased()}, Return: int64(relRet)})
				holds = append(holds, hold{owner: owner, token: res.GetFencingToken(), start: ret, end: relCall})
				mu.Unlock()
				if !rel.GetReleased() {
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
