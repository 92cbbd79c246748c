// Package workers runs short tasks on goroutines kept for the next task. Each join, leave and
// push to the Lobby is a task of its own, and a fresh goroutine grows its stack through the
// task's gRPC and Redis calls every time (runtime.copystack was about 3 % of the process's CPU
// in a churn run of vigilbench lobby); a kept goroutine has grown it already.
package workers

import "time"

// Pool runs tasks on kept goroutines. It has no size: a task that finds no goroutine idle gets
// a new one, and a goroutine idle for the pool's idle time ends, so a quiet pool holds none.
type Pool struct {
	tasks chan func()
	idle  time.Duration
}

// New returns a pool whose goroutines end after idle without a task.
func New(idle time.Duration) *Pool {
	return &Pool{tasks: make(chan func()), idle: idle}
}

// Go runs f on an idle goroutine of the pool, or on a new one when none is idle; it never
// waits for one.
func (p *Pool) Go(f func()) {
	select {
	case p.tasks <- f:
	default:
		go p.work(f)
	}
}

func (p *Pool) work(f func()) {
	f()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		select {
		case f := <-p.tasks:
			f()
			t.Reset(p.idle)
		case <-t.C:
			return
		}
	}
}
