package socket

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// flusherPool writes the bursts of sockets that had nothing queued, for every socket of a
// registry, with at most GOMAXPROCS goroutines, which end when nothing is left. A room's
// fan-out hands it every socket of the room: a writer goroutine per socket left a goroutine
// struct and half-empty stack spans per socket behind (an idle practice-room socket held
// ~2.5 KiB more than a chat socket, docs/BENCHMARKS.md), and the fan-out's caller writing
// every socket itself ran every writev on one core (room deliveries at 100 frames/s fell from
// ~97,000 to ~61,000 a second).
type flusherPool struct {
	mu      sync.Mutex
	pending []*Conn // sockets to flush, from next on
	next    int
	running int

	// writerStarts counts the writer goroutines sockets started when their kernel buffer was
	// full (the test that a fan-out to idle sockets starts none reads it).
	writerStarts atomic.Int64
}

// add queues s, which holds its writer role, for a flusher, and starts one if fewer than
// GOMAXPROCS are running.
func (p *flusherPool) add(s *Conn) {
	p.mu.Lock()
	if p.next > 0 && len(p.pending) == cap(p.pending) {
		// Reuse the flushed front instead of growing: under steady load the list never empties.
		p.pending = p.pending[:copy(p.pending, p.pending[p.next:])]
		p.next = 0
	}
	p.pending = append(p.pending, s)
	start := p.running < runtime.GOMAXPROCS(0)
	if start {
		p.running++
	}
	p.mu.Unlock()
	if start {
		go p.run()
	}
}

// run flushes sockets until none is left.
func (p *flusherPool) run() {
	for {
		p.mu.Lock()
		if p.next == len(p.pending) {
			clear(p.pending)
			p.pending, p.next = p.pending[:0], 0
			p.running--
			p.mu.Unlock()
			return
		}
		s := p.pending[p.next]
		p.pending[p.next] = nil
		p.next++
		p.mu.Unlock()
		s.flush()
	}
}
