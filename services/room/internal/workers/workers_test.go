package workers

import (
	"sync"
	"testing"
	"time"
)

// TestPoolRunsEveryTask runs tasks from many callers at once, some while every goroutine is
// busy (they get new ones) and some after (they reuse idle ones): each runs exactly once.
func TestPoolRunsEveryTask(t *testing.T) {
	t.Parallel()
	p := New(time.Minute)
	const n = 1000
	var mu sync.Mutex
	ran := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		p.Go(func() {
			defer wg.Done()
			mu.Lock()
			ran[i]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(ran) != n {
		t.Fatalf("%d tasks ran, want %d", len(ran), n)
	}
	for i, c := range ran {
		if c != 1 {
			t.Fatalf("task %d ran %d times, want once", i, c)
		}
	}
}
